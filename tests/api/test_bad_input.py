"""Input DynamoDB or JSON cannot hold is a clear 400, never a 500."""
import pytest

DEEP: list = [1]
for _ in range(40):
    DEEP = [DEEP]


@pytest.mark.parametrize('body', [
    {'name': 'x', 'options': {'a': '\ud800'}},
    {'name': 'x', 'options': {'\ud800': 1}},
    {'name': '\ud800'},
    {'name': 'x', 'options': {'n': 1.5e300}},
    {'name': 'x', 'options': {'n': 10 ** 40}},
    {'name': 'x', 'options': {'deep': DEEP}},
], ids=['surrogate-in-object', 'surrogate-key', 'surrogate-field', 'huge-float', 'huge-int', 'too-deep'])
def test_unstorable_values_are_400(api, body):
    r = api.post('/api/projects', body)
    assert r.status == 400, r.body
    assert set(r.json) == {'error', 'message', 'status'}


@pytest.mark.parametrize('raw', [b'\xff\xfe', b'{"name": "x"', b'{"name": NaN}', b'{"name": Infinity}'])
def test_undecodable_bodies_are_400(api, raw):
    assert api.call('POST', '/api/projects', raw=raw).status == 400


@pytest.mark.parametrize('query', ['page=-1', 'page=x', 'pageSize=0', 'pageSize=101', 'pageSize=1.5',
                                   'page=99999999999999999999', 'sort=nope', 'sort=name:sideways',
                                   'sort=options:asc', 'filter=name%20%3D%3D', 'view=bogus'])
def test_bad_list_parameters_are_400(api, query):
    r = api.get(f'/api/projects?{query}')
    assert r.status == 400, (query, r.body)
    assert r.json['status'] == 400


def test_valid_odd_values_are_stored(api):
    r = api.post('/api/projects', {'name': 'x\u0000y', 'options': {'k': 1, 'z': [None, -0.0, 1e-100]}})
    assert r.status == 201, r.body
    got = api.get(f'/api/projects/{r.json["id"]}').json
    assert got['name'] == 'x\u0000y' and got['options']['z'][0] is None
