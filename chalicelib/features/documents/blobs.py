"""The document bucket (S3): multipart uploads with presigned part URLs, small objects, presigned
reads, deletes. Every S3 call of the app is here (services never see boto3).

Errors are sorted the way the services need them:
  * ``BlobRejected``: S3 refused the request because of what the client sent or did (a wrong or
    missing ETag, a part too small, an upload that does not exist any more): a 400 in our words;
  * ``BlobUnavailable``: S3 throttled or failed (after botocore's own retries): 503, nothing kept.

Checksums: botocore's default (CRC32 on every upload) would make the multipart upload require a
checksum header on each presigned part PUT; plain HTTP clients send none, so checksums are only
computed when S3 requires them. Presigned URLs are SigV4 (needed with SSE-KMS) and path-style
when an endpoint is configured (the local moto server on loopback).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from chalicelib.core.config import get_config
from chalicelib.core.errors import ServiceUnavailable
from chalicelib.kernel.store.endpoints import watched

CONNECT_TIMEOUT = 2
READ_TIMEOUT = 20
# S3 codes that mean "what you sent (or did) is wrong", with our words for them.
REJECTED = {
    'InvalidPart': 'a part is missing or its ETag does not match what was uploaded',
    'InvalidPartOrder': 'the parts are not in ascending order',
    'EntityTooSmall': 'every part but the last must be at least 5 MiB',
    'NoSuchUpload': 'the upload does not exist in storage (aborted, completed or expired)',
    'NoSuchKey': 'the object does not exist',
    'InvalidArgument': 'storage refused an argument of the request',
    'MalformedXML': 'the part list is malformed',
}


class BlobRejected(Exception):
    def __init__(self, code: str) -> None:
        super().__init__(REJECTED.get(code, code))
        self.code = code
        self.reason = REJECTED.get(code, f'storage refused the request ({code})')


class BlobUnavailable(ServiceUnavailable):
    def __init__(self) -> None:
        super().__init__('Document storage is busy; nothing was changed, retry shortly', retry_after=2)


@dataclass(frozen=True)
class Head:
    size: int
    content_type: str | None
    etag: str | None
    metadata: dict[str, str] = field(default_factory=dict)   # the object's x-amz-meta-* (names lower-case)


@lru_cache(maxsize=1)
def client():
    import boto3  # noqa: PLC0415 - lazy: only document routes reach S3
    from botocore.config import Config  # noqa: PLC0415 - lazy, with boto3
    cfg = get_config()
    options: dict[str, Any] = {
        'signature_version': 's3v4', 'connect_timeout': CONNECT_TIMEOUT, 'read_timeout': cfg.read_timeout(READ_TIMEOUT),
        'retries': {'max_attempts': 3, 'mode': 'standard'}, 'max_pool_connections': 64,
        'request_checksum_calculation': 'when_required', 'response_checksum_validation': 'when_required'}
    if cfg.endpoint_url:
        options['s3'] = {'addressing_style': 'path'}
    return watched(boto3.client('s3', region_name=cfg.region, endpoint_url=cfg.endpoint_url, config=Config(**options)))


def reset() -> None:
    client.cache_clear()


def _bucket() -> str:
    return get_config().bucket_name


def _code(exc: Exception) -> str:
    response = getattr(exc, 'response', None) or {}
    return str((response.get('Error') or {}).get('Code') or '')


def _call(fn, **kwargs):
    from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415 - lazy, with boto3
    try:
        return fn(Bucket=_bucket(), **kwargs)
    except ClientError as exc:
        code = _code(exc)
        if code in REJECTED or code in ('404', 'NotFound'):
            raise BlobRejected('NoSuchKey' if code in ('404', 'NotFound') else code) from None
        raise BlobUnavailable() from None
    except BotoCoreError:
        raise BlobUnavailable() from None


# ----------------------------------------------------------------------------- multipart

def start_multipart(key: str, content_type: str) -> str:
    return _call(client().create_multipart_upload, Key=key, ContentType=content_type)['UploadId']


def part_url(key: str, upload_id: str, part_number: int, expires_in: int, *, size: int | None = None) -> str:
    """A presigned UploadPart URL; with ``size`` the signature covers ``Content-Length: size``
    (X-Amz-SignedHeaders=content-length;host), so S3 refuses a body of any other length."""
    params: dict[str, Any] = {'Bucket': _bucket(), 'Key': key, 'UploadId': upload_id, 'PartNumber': part_number}
    if size is not None:
        params['ContentLength'] = size
    return client().generate_presigned_url('upload_part', ExpiresIn=max(1, int(expires_in)), Params=params)


def part_sizes(key: str, upload_id: str) -> dict[int, int]:
    """Part number -> size in bytes of the parts uploaded so far (ListParts, 1,000 a page)."""
    out: dict[int, int] = {}
    marker = 0
    while True:
        page = _call(client().list_parts, Key=key, UploadId=upload_id, MaxParts=1000, PartNumberMarker=marker)
        for part in page.get('Parts') or []:
            out[int(part['PartNumber'])] = int(part['Size'])
        if not page.get('IsTruncated'):
            return out
        marker = int(page.get('NextPartNumberMarker') or 0)


def complete_multipart(key: str, upload_id: str, parts: list[tuple[int, str]]) -> None:
    _call(client().complete_multipart_upload, Key=key, UploadId=upload_id,
          MultipartUpload={'Parts': [{'PartNumber': n, 'ETag': etag} for n, etag in parts]})


def abort_multipart(key: str, upload_id: str) -> None:
    try:
        _call(client().abort_multipart_upload, Key=key, UploadId=upload_id)
    except BlobRejected:
        pass   # already gone: aborting is idempotent


# ----------------------------------------------------------------------------- objects

def head(key: str) -> Head | None:
    try:
        answer = _call(client().head_object, Key=key)
    except BlobRejected:
        return None
    return Head(size=int(answer.get('ContentLength') or 0), content_type=answer.get('ContentType'),
                etag=(answer.get('ETag') or '').strip('"') or None,
                metadata={str(k).lower(): str(v) for k, v in (answer.get('Metadata') or {}).items()})


def put(key: str, body: bytes, content_type: str, *, metadata: dict[str, str] | None = None) -> str | None:
    """Store an object (``metadata``: small ASCII x-amz-meta-* values); its ETag."""
    extra = {'Metadata': metadata} if metadata else {}
    answer = _call(client().put_object, Key=key, Body=body, ContentType=content_type, **extra)
    return (answer.get('ETag') or '').strip('"') or None


def read(key: str) -> bytes:
    answer = _call(client().get_object, Key=key)
    try:
        return answer['Body'].read()
    except Exception:  # noqa: BLE001 - a body cut off in transit is storage failing
        raise BlobUnavailable() from None


def read_url(key: str, expires_in: int, *, content_type: str | None = None,
             filename: str | None = None) -> str:
    params: dict[str, Any] = {'Bucket': _bucket(), 'Key': key}
    if content_type:
        params['ResponseContentType'] = content_type
    if filename:
        from urllib.parse import quote  # noqa: PLC0415 - small, rarely used
        params['ResponseContentDisposition'] = f"attachment; filename*=UTF-8''{quote(filename, safe='')}"
    return client().generate_presigned_url('get_object', Params=params, ExpiresIn=max(1, int(expires_in)))


def delete(keys: list[str]) -> None:
    """Delete objects (missing ones are fine), 1000 per call."""
    keys = [k for k in dict.fromkeys(keys) if k]
    for start in range(0, len(keys), 1000):
        _call(client().delete_objects,
              Delete={'Objects': [{'Key': k} for k in keys[start:start + 1000]], 'Quiet': True})


def delete_prefix(prefix: str) -> int:
    """Delete every object under ``prefix`` (a family's folder); how many were found."""
    found: list[str] = []
    token = None
    while True:
        kwargs: dict[str, Any] = {'Prefix': prefix}
        if token:
            kwargs['ContinuationToken'] = token
        page = _call(client().list_objects_v2, **kwargs)
        found += [o['Key'] for o in page.get('Contents', [])]
        token = page.get('NextContinuationToken')
        if not token:
            break
    delete(found)
    return len(found)
