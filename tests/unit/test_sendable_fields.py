"""What an unknown field's 400 offers (kernel/crud.py ``sendable_fields``; issue 46 item 8) is,
for every family, exactly the properties of its create and update request schemas in
/v3/api-docs (kernel/http/openapi.py): the message and the document cannot disagree."""
from __future__ import annotations

import app  # noqa: F401 - registers every feature's families
from chalicelib.kernel import crud
from chalicelib.kernel.http import openapi
from chalicelib.kernel.registry import FAMILIES, SERVER_FIELDS


def test_every_family_offers_its_request_schemas_properties_and_no_server_field():
    schemas = openapi._Schemas(FAMILIES)
    checked = 0
    for family in FAMILIES:
        if family.read_only:   # no request bodies at all
            continue
        create = crud.sendable_fields(family, creating=True)
        update = crud.sendable_fields(family, creating=False)
        assert create == set(schemas.create_request(family)['properties']), family.path
        assert update == set(schemas.update_request(family)['properties']), family.path
        assert not create & SERVER_FIELDS and not (update - {'changeSequence'}) & SERVER_FIELDS, family.path
        checked += 1
    assert checked > 30
