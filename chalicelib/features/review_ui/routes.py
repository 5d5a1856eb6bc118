"""The reviewer's page and its assets, public like /docs (the page holds no data; every call it
makes carries the reviewer's credential in a header: docs/api/review-page.md "Security"):

  GET /review            the page (HTML)
  GET /review/app.js     its script
  GET /review/app.css    its style sheet

Every answer carries the page's security headers (``SECURITY_HEADERS`` and ``csp``): a
Content-Security-Policy that allows scripts and styles from this origin only (no inline script,
no eval), images from this origin and the document bucket's origin (the page images are
short-lived presigned S3 GETs), network calls to this origin only, no framing, no forms, no
base URL; ``X-Content-Type-Options: nosniff``; ``Referrer-Policy: no-referrer`` (a presigned
image URL, or the page's own URL, never leaks to another origin in a Referer).

The bucket's origin is the origin of a presigned GET made by the document bucket's client
(features/documents/blobs.py: virtual-hosted ``https://<bucket>.s3...amazonaws.com`` on AWS,
the moto server's ``http://127.0.0.1:<port>`` under `make run`), computed once per process (a
local signature, no network call). When it cannot be made the policy names no bucket: page
images do not load, everything else works (fail closed).

The assets are package data (``static/``: chalice packages the whole of chalicelib into the
Lambda zip), read on first use and kept for the life of the process.
"""
from __future__ import annotations

from functools import cache, lru_cache
from pathlib import Path
from urllib.parse import urlsplit

from chalice import Blueprint, Response

from chalicelib.core import observability
from chalicelib.kernel.http import policy
from chalicelib.kernel.http.docmeta import describe
from chalicelib.kernel.http.request import ANY_CONTENT

bp = Blueprint(__name__)
log = observability.get_logger('review_ui')

STATIC = Path(__file__).with_name('static')
ASSETS = {'index.html': 'text/html', 'app.js': 'text/javascript', 'app.css': 'text/css'}
SECURITY_HEADERS = {
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
    'Cross-Origin-Opener-Policy': 'same-origin',
    'Cache-Control': 'no-cache',
}


@cache
def _asset(name: str) -> str:
    return (STATIC / name).read_text(encoding='utf-8')


def image_origin() -> str | None:
    """The origin page images are served from (a presigned GET of the document bucket), or None.
    Kept per bucket configuration (bucket, endpoint, region), never a failure: a bucket origin
    that could not be made is tried again by the next request (images refused meanwhile)."""
    from chalicelib.core.config import get_config  # noqa: PLC0415 - with the page only
    cfg = get_config()
    try:
        return _origin_of(cfg.bucket_name, cfg.endpoint_url, cfg.region)
    except Exception:   # noqa: BLE001 - no bucket origin: images are refused by the policy (fail closed)
        log.exception('review page: the document bucket origin could not be made')
        return None


@lru_cache(maxsize=8)
def _origin_of(bucket: str, endpoint: str | None, region: str) -> str | None:
    from chalicelib.features.documents import blobs  # noqa: PLC0415 - lazy: S3 client for this page only
    parts = urlsplit(blobs.read_url('review-ui/origin-probe', 60))
    if parts.scheme not in ('http', 'https') or not parts.netloc:
        return None
    return f'{parts.scheme}://{parts.netloc}'


def csp() -> str:
    images = ' '.join(x for x in ("'self'", image_origin(), 'data:') if x)
    return '; '.join((
        "default-src 'none'", "script-src 'self'", "style-src 'self'", f'img-src {images}',
        "connect-src 'self'", "font-src 'none'", "object-src 'none'", "frame-ancestors 'none'",
        "base-uri 'none'", "form-action 'none'"))


def _answer(name: str) -> Response:
    return Response(body=_asset(name), status_code=200,
                    headers={'Content-Type': f'{ASSETS[name]}; charset=utf-8', 'Content-Security-Policy': csp(),
                             **SECURITY_HEADERS})


@bp.route(policy.public('/review'), methods=['GET'], name='getReviewPage', content_types=ANY_CONTENT)
def review_page():
    return _answer('index.html')


@bp.route(policy.public('/review/app.js'), methods=['GET'], name='getReviewPageScript', content_types=ANY_CONTENT)
def review_script():
    return _answer('app.js')


@bp.route(policy.public('/review/app.css'), methods=['GET'], name='getReviewPageStyle', content_types=ANY_CONTENT)
def review_style():
    return _answer('app.css')


def _content(media_type: str) -> dict:
    return {'content': {media_type: {'schema': {'type': 'string'}}}}


describe('getReviewPage', summary="The reviewer's page (docs/api/review-page.md)", tags=['review'],
         responses={200: _content('text/html')}, errors=[429])
describe('getReviewPageScript', summary="The reviewer's page: its script", tags=['review'],
         responses={200: _content('text/javascript')}, errors=[429])
describe('getReviewPageStyle', summary="The reviewer's page: its style sheet", tags=['review'],
         responses={200: _content('text/css')}, errors=[429])
