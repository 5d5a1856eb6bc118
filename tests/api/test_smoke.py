def test_smoke(api):
    r = api.get('/api/organizations')
    assert r.status == 200, r.body
    assert r.json['totalElements'] == 1
