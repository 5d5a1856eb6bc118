"""The reviewer's page through the HTTP layer (docs/api/review-page.md): /review and its assets
are served with the page's security headers (a Content-Security-Policy allowing this origin and
the bucket's presigned-image origin only, nosniff, no referrer), the page holds no inline script
or style and names no other origin, the script draws values as text only; and every API route
the page's script calls answers another organization's MEMBER key with 404, its own org's key
with the data."""
from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.api.test_extraction import _extract, setup  # noqa: F401 - fixture
from tests.conftest import make_org, make_user
from tests.extraction_corpus import invoice_pdf, invoice_values, pdf_nodes

SCRIPT = Path(__file__).resolve().parents[2] / 'chalicelib' / 'features' / 'review_ui' / 'static' / 'app.js'


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.script_text: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == 'script'

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script and data.strip():
            self.script_text.append(data)


def _directives(policy: str) -> dict[str, list[str]]:
    out = {}
    for part in policy.split(';'):
        name, *values = part.split()
        out[name] = values
    return out


def test_the_page_and_its_assets_carry_the_security_headers(api, bucket, setup):  # noqa: F811
    fam = _family(api, setup, 'INV-CSP')
    # the origin the API hands presigned GETs out from: the only other origin images may come from
    content = api.get(f"/api/document-families/{fam['id']}/content")
    assert content.status == 307, content.json
    parts = urlsplit(content.headers['location'])
    bucket_origin = f'{parts.scheme}://{parts.netloc}'
    for path, media in (('/review', 'text/html'), ('/review/app.js', 'text/javascript'),
                        ('/review/app.css', 'text/css')):
        r = api.get(path, key=None)
        assert r.status == 200, (path, r.body[:200])
        assert r.headers['content-type'] == f'{media}; charset=utf-8'
        assert r.headers['x-content-type-options'] == 'nosniff'
        assert r.headers['referrer-policy'] == 'no-referrer'
        assert 'set-cookie' not in r.headers
        csp = _directives(r.headers['content-security-policy'])
        assert csp['default-src'] == ["'none'"] and csp['script-src'] == ["'self'"] and csp['style-src'] == ["'self'"]
        assert csp['connect-src'] == ["'self'"] and csp['frame-ancestors'] == ["'none'"]
        assert csp['base-uri'] == ["'none'"] and csp['form-action'] == ["'none'"]
        assert csp['img-src'] == ["'self'", bucket_origin, 'data:'], csp['img-src']


def test_the_page_has_no_inline_script_or_style_and_names_no_other_origin(api):
    page = api.get('/review', key=None)
    parsed = _Tags()
    parsed.feed(page.body.decode())
    scripts = [attrs for tag, attrs in parsed.tags if tag == 'script']
    assert scripts and all(a.get('src') for a in scripts) and not parsed.script_text
    assert not [tag for tag, _ in parsed.tags if tag == 'style']
    for tag, attrs in parsed.tags:
        assert 'style' not in attrs and not any(name.startswith('on') for name in attrs), (tag, attrs)
        for name in ('src', 'href', 'action'):
            value = attrs.get(name)
            assert value is None or not re.match(r'^([a-z][a-z0-9+.-]*:|//)', value, re.I), (tag, attrs)
    linked = {attrs.get('src') or attrs.get('href') for tag, attrs in parsed.tags if tag in ('script', 'link')}
    assert linked == {'review/app.js', 'review/app.css'}   # relative: the page works under a stage prefix too
    script = api.get('/review/app.js', key=None).body.decode()
    # values are drawn as text: no markup sinks, no eval, no URL built from the credential
    for sink in ('innerHTML', 'outerHTML', 'insertAdjacentHTML', 'document.write', 'eval(', 'new Function'):
        assert sink not in script, sink
    assert 'localStorage' not in script and 'document.cookie' not in script
    assert "credentials: 'omit'" in script
    css = api.get('/review/app.css', key=None).body.decode()
    assert 'url(' not in css and '@import' not in css


# ----------------------------------------------------------------------------- as an attacker

def _family(api, setup, number: str, broken: bool = False) -> dict:  # noqa: F811
    """A family uploaded as a file (its pages can be drawn), its parsed nodes written."""
    values = invoice_values(number=number, broken=broken)
    pdf = invoice_pdf(values)
    store = api.post('/api/document-stores', {'projectId': setup['project'], 'name': f'in-{number}',
                                              'slug': f'in-{number.lower()}'})
    assert store.status == 201, store.json
    fam = api.call('POST', f"/api/document-stores/{store.json['id']}/upload?path=invoices/{number}.pdf", raw=pdf,
                   headers={'content-type': 'application/pdf'})
    assert fam.status == 201, fam.json
    r = api.put(f"/api/document-families/{fam.json['id']}/document", {'version': 0, 'nodes': pdf_nodes(pdf)})
    assert r.status == 200, r.json
    return fam.json


def _called_routes() -> set[str]:
    """The first path segments of every API call the page's script makes (api('METHOD', 'x/...')
    and pages('x?...')): the test below must cover each."""
    text = SCRIPT.read_text()
    calls = re.findall(r"""\bapi\('(GET|PUT|POST)',\s*[`'"]([a-z-]+)""", text)
    calls += [('GET', p) for p in re.findall(r"""\bpages\([`'"]([a-z-]+)""", text)]
    return {f'{method} {path}' for method, path in calls}


@pytest.mark.parametrize('caller', ['stranger', 'owner'])
def test_every_route_the_page_calls_answers_another_orgs_member_with_404(api, bucket, setup, caller):  # noqa: F811
    fam = _family(api, setup, f'INV-ATTACK-{caller}', broken=True)
    summary = _extract(api, setup, fam)
    task = api.get(f"/api/tasks/{summary['taskId']}").json
    assert task['metadata']['extractionReview']['documentFamilyId'] == fam['id']
    invoice = api.get(f"/api/data-objects?filter=documentFamilyId == '{fam['id']}' and path == 'invoice'").json
    [obj] = invoice['content']
    total = next(a for a in obj['attributes'] if a['tag'] == 'total')
    org = setup['org']['id']
    if caller == 'stranger':
        other = make_org(api)
        _, key = make_user(api, other['id'], 'MEMBER')
    else:
        _, key = make_user(api, org, 'MEMBER')
    me = api.as_key(key)
    enc = f"documentFamilyId == '{fam['id']}'"
    reads = {
        'GET tasks': [f"/api/tasks/{task['id']}"],
        'GET document-families': [f"/api/document-families/{fam['id']}",
                                  f"/api/document-families/{fam['id']}/pages/1/image?dpi=150",
                                  f"/api/document-families/{fam['id']}/pages/1/words"],
        'GET data-definitions': [f"/api/data-definitions/{obj['dataDefinitionId']}"],
    }
    lists = {
        'GET data-objects': f'/api/data-objects?filter={enc}',
        'GET exceptions': f"/api/exceptions?documentFamilyId={fam['id']}&state=OPEN",
        'GET tasks': f"/api/tasks?filter=projectId == '{setup['project']}'",
        'GET projects': '/api/projects?sort=name:asc',
        'GET task-statuses': '/api/task-statuses',
    }
    writes = {
        'PUT data-objects': ('PUT', f"/api/data-objects/{obj['id']}/attributes/{total['id']}", {'confirmed': True}),
        'POST tasks': ('POST', '/api/tasks/take-next', {'projectId': setup['project']}),
    }
    covered = set(reads) | set(lists) | set(writes) | {'GET account'}
    assert _called_routes() <= covered, _called_routes() - covered
    assert me.get('/api/account/me').status == 200
    for paths in reads.values():
        for path in paths:
            r = me.get(path)
            if caller == 'stranger':
                assert r.status == 404, (path, r.status, r.json)
                assert set(r.json) == {'error', 'message', 'status'}
            else:
                assert r.status == 200, (path, r.status, r.json)
    for name, path in lists.items():
        r = me.get(path)
        assert r.status == 200, (path, r.json)
        ids = {item.get('id') for item in r.json['content']}
        mine = {'GET data-objects': obj['id'], 'GET tasks': task['id'], 'GET projects': setup['project']}.get(name)
        if caller == 'stranger':
            assert not any(item.get('organizationId') == org for item in r.json['content']), (path, r.json)
        elif mine:
            assert mine in ids, (path, ids)
    for method, path, body in writes.values():
        r = me.call(method, path, body)
        if caller == 'stranger':
            assert r.status == 404, (path, r.status, r.json)
        else:
            assert r.status == 200, (path, r.status, r.json)
    # the stranger changed nothing: the total is as read, its check still open
    after = api.get(f"/api/data-objects/{obj['id']}").json
    confirmed = next(a for a in after['attributes'] if a['id'] == total['id']).get('reviewStatus')
    assert confirmed == (None if caller == 'stranger' else 'CONFIRMED')
    assert api.get(f"/api/tasks/{task['id']}").json.get('assigneeId') is None or caller == 'owner'
