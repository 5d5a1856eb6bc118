"""A family's pages as images and its words with boxes, in process (chalice.test.Client over moto):
a text PDF page and scans drawn at the asked dpi from a presigned URL, drawn once and then served
from the S3 cache, the caps, the errors, another org's family a 404, and the words matching the
parsed document's nodes (docs/api/documents.md "Page images and words")."""
from __future__ import annotations

import io
import time
import urllib.parse
from pathlib import Path

import pytest
import requests
from PIL import Image

from chalicelib.core import limits
from chalicelib.features.documents import blobs, deltas
from chalicelib.features.identity.service_token import SERVICE
from chalicelib.features.parsing import render, stage
from tests.api.test_parsing import store, upload  # noqa: F401 - fixture
from tests.conftest import make_org, make_user

DOCS = Path(__file__).resolve().parents[1] / 'fixtures' / 'documents'
# the presigned URLs are fetched with requests, answered by the in-process moto: nothing leaves
pytestmark = pytest.mark.usefixtures('net')


def _upload(api, store, name, content_type):  # noqa: F811
    return upload(api, store, body=(DOCS / name).read_bytes(), path=f'in/{name}', content_type=content_type)


def _parse(family_id):
    """The real parse stage over the real readers (a text PDF: no OCR)."""
    state = stage.new_state('run-pages')
    for _ in range(20):
        done = stage.run_slice(family_id, state, principal=SERVICE, deadline=time.monotonic() + 20, ocr=False)
        if done.kind != 'continue':
            assert done.kind == 'done', done.message
            return
        state = done.state
    raise AssertionError('the parse did not end')


def _png(answer):
    """The PNG behind a presigned URL, read from the in-process moto S3 by that URL."""
    url = answer['url']
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    assert 'X-Amz-Signature' in query and int(query['X-Amz-Expires'][0]) == answer['expiresIn'] == 300
    assert 'x-api-key' not in url.lower() and 'authorization' not in url.lower()
    got = requests.get(url, timeout=5)
    assert got.status_code == 200 and got.headers['content-type'] == 'image/png'
    image = Image.open(io.BytesIO(got.content))
    image.load()
    return image


@pytest.fixture
def renders(monkeypatch):
    calls = []
    real = render.render_page

    def counted(data, **kw):
        calls.append(kw)
        return real(data, **kw)
    monkeypatch.setattr(render, 'render_page', counted)
    return calls


def test_a_text_pdf_page_is_drawn_at_the_asked_dpi_and_then_served_from_the_cache(api, store, bucket,  # noqa: F811
                                                                                  renders):
    family = _upload(api, store, 'upref.pdf', 'application/pdf')   # 2 pages of 612 x 792 points
    r = api.get(f"/api/document-families/{family['id']}/pages/2/image?dpi=100")
    assert r.status == 200, r.json
    body = r.json
    assert body['page'] == 2 and body['pageCount'] == 2 and body['dpi'] == 100
    assert body['contentType'] == 'image/png' and body['expiresIn'] == 300
    assert (body['width'], body['height']) == (850, 1100)        # 612 x 792 points * 100 / 72
    image = _png(body)
    assert image.size == (850, 1100)
    assert image.getextrema() != ((255, 255),) and len(set(image.convert('L').getdata())) > 2   # ink, not blank
    assert len(renders) == 1
    again = api.get(f"/api/document-families/{family['id']}/pages/2/image?dpi=100")
    assert again.status == 200 and len(renders) == 1                # a HEAD and a presign: nothing drawn
    assert {k: v for k, v in again.json.items() if k != 'url'} == {k: v for k, v in body.items() if k != 'url'}
    assert _png(again.json).tobytes() == image.tobytes()
    default = api.get(f"/api/document-families/{family['id']}/pages/1/image")
    assert default.status == 200 and default.json['dpi'] == limits.PAGE_IMAGE_DEFAULT_DPI == 150
    assert (default.json['width'], default.json['height']) == (1275, 1650) and len(renders) == 2


def test_scans_are_drawn_from_their_original_before_any_parse(api, store, bucket, renders):  # noqa: F811
    # a PNG scan of 1654 x 2339 pixels at 200 dpi: 150 dpi is 3/4 of it
    png = _upload(api, store, 'scanned-page.png', 'image/png')
    r = api.get(f"/api/document-families/{png['id']}/pages/1/image?dpi=150")
    assert r.status == 200, r.json
    assert (r.json['dpi'], r.json['pageCount']) == (150, 1)
    assert abs(r.json['width'] - 1654 * 150 / 200) <= 1 and abs(r.json['height'] - 2339 * 150 / 200) <= 1
    assert _png(r.json).size == (r.json['width'], r.json['height'])
    # never enlarged past the image's own resolution: asked 300, drawn at the scan's 200
    big = api.get(f"/api/document-families/{png['id']}/pages/1/image?dpi=300").json
    assert big['dpi'] == 200 and (big['width'], big['height']) == (1654, 2339)
    # a multi-page TIFF's second frame; a scan inside a PDF (no text layer) is rendered too
    tiff = _upload(api, store, 'scanned-pages.tiff', 'image/tiff')
    frame = api.get(f"/api/document-families/{tiff['id']}/pages/2/image?dpi=72").json
    assert (frame['page'], frame['pageCount'], frame['dpi']) == (2, 2, 72)
    assert _png(frame).size == (frame['width'], frame['height']) and abs(frame['width'] - 1654 * 72 / 200) <= 1
    jpeg = _upload(api, store, 'scanned-page.jpg', 'image/jpeg')
    assert api.get(f"/api/document-families/{jpeg['id']}/pages/1/image?dpi=100").json['width'] == 827
    scan = _upload(api, store, 'scanned-page.pdf', 'application/pdf')
    drawn = api.get(f"/api/document-families/{scan['id']}/pages/1/image?dpi=72").json
    assert (drawn['width'], drawn['height']) == (596, 843) and _png(drawn).size == (596, 843)


def test_the_caps_bad_pages_and_documents_without_pages(api, store, bucket, monkeypatch):  # noqa: F811
    family = _upload(api, store, 'upref.pdf', 'application/pdf')
    base = f"/api/document-families/{family['id']}/pages"
    for dpi in ('1000', '35', '0', 'abc', '150.5', '-1'):
        r = api.get(f'{base}/1/image?dpi={dpi}')
        assert r.status == 400 and 'dpi' in r.json['message'] and '36 to 300' in r.json['message'], (dpi, r.json)
    for page in ('0', 'x', '-1', '1e3'):
        assert api.get(f'{base}/{page}/image').status == 400
        assert api.get(f'{base}/{page}/words').status == 400
    past = api.get(f'{base}/3/image')
    assert past.status == 404 and past.json['pageCount'] == 2 and 'has 2 pages' in past.json['message']
    # the pixel caps lower the dpi used: 300 dpi of a letter page is 8.4 Mpx; with a 2 Mpx cap it fits at 144
    monkeypatch.setattr(render, 'MAX_PIXELS', 2_000_000)
    capped = api.get(f'{base}/1/image?dpi=300').json
    assert capped['dpi'] < 300 and capped['width'] * capped['height'] <= 2_000_000, capped
    assert (capped['width'], capped['height']) == (-(-612 * capped['dpi'] // 72), -(-792 * capped['dpi'] // 72))
    assert _png(capped).size == (capped['width'], capped['height'])
    monkeypatch.setattr(render, 'MAX_SIDE', 500)
    side = api.get(f'{base}/2/image?dpi=300').json
    assert max(side['width'], side['height']) <= 500 and side['dpi'] == 45
    # a Word document has no pages to draw: 409, and nothing stored
    docx = _upload(api, store, 'memo.docx',
                   'application/vnd.openxmlformats-officedocument.wordprocessingml.document')
    r = api.get(f"/api/document-families/{docx['id']}/pages/1/image")
    assert r.status == 409 and 'no pages to render' in r.json['message'] and 'Word document' in r.json['message']
    assert r.json['error'] == 'Conflict' and r.json['status'] == 409
    # a file that cannot be drawn is a 422 naming why, never a 500
    for name, words in (('hostile-truncated.pdf', 'cut short'), ('hostile-encrypted.pdf', 'encrypted'),
                        ('hostile-page-tree-loop.pdf', 'page tree is broken')):
        broken = upload(api, store, body=(DOCS / name).read_bytes(), path=f'in/{name}')
        r = api.get(f"/api/document-families/{broken['id']}/pages/1/image")
        assert r.status == 422 and words in r.json['message'], (name, r.json)
    bomb = upload(api, store, body=(DOCS / 'hostile-bomb.png').read_bytes(), path='in/b.png', content_type='image/png')
    r = api.get(f"/api/document-families/{bomb['id']}/pages/1/image")
    assert r.status == 422 and 'pixels' in r.json['message'], r.json


def test_a_render_past_the_request_budget_is_a_422_naming_it_and_nothing_is_kept(api, store, bucket,  # noqa: F811
                                                                                monkeypatch):
    from tests.api.test_work_budget import _without_budget
    family = _upload(api, store, 'upref.pdf', 'application/pdf')
    r = _without_budget(api, monkeypatch, f"/api/document-families/{family['id']}/pages/1/image")
    assert r.status == 422 and r.json['limit'] == 'workBudget', r.json
    assert 'rendering page 1 at 150 dpi' in r.json['message']
    assert not [o['Key'] for o in bucket.list_objects_v2(Bucket=_bucket()).get('Contents', [])
                if '/pages/' in o['Key'] and family['id'] in o['Key']]
    assert api.get(f"/api/document-families/{family['id']}/pages/1/image").status == 200


def test_another_orgs_family_is_404_for_a_member_and_a_viewer_may_look(api, org_id, store, bucket, users):  # noqa: F811
    family = _upload(api, store, 'upref.pdf', 'application/pdf')
    _parse(family['id'])
    other = make_org(api)
    _, key = make_user(api, other['id'], 'MEMBER')
    stranger = api.as_key(key)
    for path in (f"/api/document-families/{family['id']}/pages/1/image",
                 f"/api/document-families/{family['id']}/pages/1/words"):
        r = stranger.get(path)
        assert r.status == 404 and r.json['status'] == 404 and 'url' not in r.json, (path, r.json)
        assert api.as_key(users['VIEWER']).get(path).status == 200
    assert api.get(f"/api/document-families/{family['id']}/pages/1/image", key=None).status in (401, 403)


def test_the_words_are_the_parsed_nodes_with_their_boxes(api, store, bucket):  # noqa: F811
    family = _upload(api, store, 'upref.pdf', 'application/pdf')
    base = f"/api/document-families/{family['id']}/pages"
    before = api.get(f'{base}/1/words')
    assert before.status == 409 and 'no parsed document yet' in before.json['message']
    _parse(family['id'])
    nodes = api.get(f"/api/document-families/{family['id']}/document").json['nodes']
    r = api.get(f'{base}/2/words')
    assert r.status == 200, r.json
    body = r.json
    page = next(n for n in nodes if n['nodeType'] == 'page' and n['features']['page'] == 2)
    assert (body['page'], body['pageCount'], body['width'], body['height']) == (2, 2, page['features']['width'],
                                                                              page['features']['height'])
    expected = [n for n in deltas.ordered(nodes) if n['nodeType'] == 'word' and n['features']['page'] == 2]
    assert len(expected) > 20 and body['truncated'] is False
    assert [(w['id'], w['text'], w['bbox'], w['lineId']) for w in body['words']] == [
        (n['id'], n['content'], n['features']['bbox'], n['parentId']) for n in expected]
    assert all(w['lineId'].startswith('p2.l') and w['id'].startswith(w['lineId'] + '.w') for w in body['words'])
    # the boxes and the image share one space: pixel = point * dpi / 72, inside the drawn page
    image = api.get(f'{base}/2/image?dpi=72').json
    assert (image['width'], image['height']) == (round(body['width']), round(body['height']))
    assert all(0 <= w['bbox'][0] <= w['bbox'][2] <= body['width'] and 0 <= w['bbox'][1] <= w['bbox'][3]
               <= body['height'] for w in body['words'])
    missing = api.get(f'{base}/3/words')
    assert missing.status == 404 and missing.json['pageCount'] == 2


def test_a_new_original_is_drawn_again_and_the_cache_lives_in_the_familys_folder(api, store, bucket,  # noqa: F811
                                                                                  renders):
    from chalicelib.features.documents import service as documents
    family = _upload(api, store, 'upref.pdf', 'application/pdf')
    api.get(f"/api/document-families/{family['id']}/pages/1/image")
    folder = documents.family_folder(_org_of(family), family['id'])
    keys = [o['Key'] for o in bucket.list_objects_v2(Bucket=_bucket(), Prefix=f'{folder}pages/').get('Contents', [])]
    assert len(keys) == 1 and keys[0].endswith('/p000001-150.png')
    head = blobs.head(keys[0])
    assert head.metadata == {'page-count': '2', 'width': '1275', 'height': '1650', 'dpi': '150'}


def _bucket():
    from chalicelib.core.config import get_config
    return get_config().bucket_name


def _org_of(family):
    from chalicelib.kernel.store import table
    return table.get('document-families', family['id']).org


def test_the_asked_dpi_is_rounded_up_to_a_few_steps_so_a_page_holds_a_bounded_cache(api, store, bucket,  # noqa: F811
                                                                                   renders):
    """Each step of limits.PAGE_IMAGE_DPI_STEPS is drawn and cached once, whatever dpi is asked
    between steps; the answer's dpi names the step (docs/api/documents.md "Page images and words")."""
    assert limits.PAGE_IMAGE_DPI_STEPS == (36, 72, 100, 150, 200, 300)
    family = _upload(api, store, 'upref.pdf', 'application/pdf')
    base = f"/api/document-families/{family['id']}/pages/1/image"
    answers = {asked: api.get(f'{base}?dpi={asked}') for asked in (101, 120, 149, 150)}
    assert {r.status for r in answers.values()} == {200}
    assert {(r.json['dpi'], r.json['width'], r.json['height']) for r in answers.values()} == {(150, 1275, 1650)}
    assert len(renders) == 1 and renders[0]['dpi'] == 150
    for asked, step in ((36, 36), (37, 72), (72, 72), (73, 100), (151, 200), (201, 300), (299, 300), (300, 300)):
        got = api.get(f'{base}?dpi={asked}').json
        assert got['dpi'] == step and got['width'] == -(-612 * step // 72), (asked, got)
    folder = documents_folder(family)
    names = sorted(o['Key'].rsplit('/', 1)[1] for o in
                   bucket.list_objects_v2(Bucket=_bucket(), Prefix=f'{folder}pages/').get('Contents', []))
    assert names == sorted(f'p000001-{step}.png' for step in limits.PAGE_IMAGE_DPI_STEPS)
    assert len(renders) == len(limits.PAGE_IMAGE_DPI_STEPS)
    # a scan is never enlarged past its own 200 dpi: the 300 step answers 200
    png = _upload(api, store, 'scanned-page.png', 'image/png')
    assert api.get(f"/api/document-families/{png['id']}/pages/1/image?dpi=250").json['dpi'] == 200


def documents_folder(family):
    from chalicelib.features.documents import service as documents
    return documents.family_folder(_org_of(family), family['id'])


def test_a_pdf_page_never_loads_pillow_and_an_image_page_is_drawn_with_it(api, store, bucket,  # noqa: F811
                                                                           monkeypatch):
    """Pillow is in every deployment (requirements.txt), imported for image files only: a PDF page,
    a scan inside a PDF included, is drawn where importing it would fail."""
    import sys
    png = _upload(api, store, 'scanned-page.png', 'image/png')
    scan = _upload(api, store, 'scanned-page.pdf', 'application/pdf')
    assert api.get(f"/api/document-families/{png['id']}/pages/1/image?dpi=72").json['dpi'] == 72
    monkeypatch.setitem(sys.modules, 'PIL', None)        # `import PIL` raises ImportError
    drawn = api.get(f"/api/document-families/{scan['id']}/pages/1/image?dpi=72")
    assert drawn.status == 200 and drawn.json['width'] == 596
