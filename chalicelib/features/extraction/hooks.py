"""The family hooks of extraction (kernel/hooks.py):

* data definitions: their ``taxons`` are checked when written (features/extraction/taxons.py),
  so a rule that cannot run is a 400 naming its taxon and rule, not a failed extraction later;
  a deleted definition's layout memories are deleted after it (features/extraction/memories.py);
* exceptions written by clients or other steps keep ``state`` and their index key in step with
  ``open``;
* data objects written by clients or other steps (``POST /api/data-objects``, a BRIDGE_CALL or
  AGENT step's results): each attribute gets an id and its object's id, and the shape every
  reader relies on ({tag or taxon, value, ...}) is checked.
"""
from __future__ import annotations

import uuid
from typing import Any

from chalicelib.core.errors import BadRequest
from chalicelib.features.extraction.taxons import check_or_400
from chalicelib.kernel.hooks import Hook

MAX_ATTRIBUTES = 500
_ATTRIBUTE_KEYS = {'id', 'tag', 'taxon', 'path', 'label', 'type', 'value', 'typedValue', 'confidence',
                   'dataFeatures', 'stringValue', 'numberValue', 'decimalValue', 'floatValue', 'dateValue',
                   'booleanValue', 'currency', 'confirmed', 'reviewStatus', 'attributeStatus', 'ownerUri', 'truncated',
                   'normaliseError', 'normaliseErrorType', 'history', 'dataExceptions', 'dataObjId', 'tagUuid'}


class Definitions(Hook):
    guards = frozenset({'taxons', 'metadata'})

    def before_create(self, family, principal, data, body) -> None:
        check_or_400(data.get('taxons'))
        _check_locale(data.get('metadata'))

    def after_delete(self, family, principal, stored) -> None:
        """Its layout memories go with it (features/extraction/memories.py)."""
        from chalicelib.features.extraction import memories  # noqa: PLC0415 - the delete path only
        try:
            memories.forget_definition(stored.org, stored.id, principal)
        except Exception:   # noqa: BLE001 - the delete committed: what is left is never read (memories.py)
            memories.log.warning('layout memories not deleted with their definition', extra={'id': stored.id})

    def before_update(self, family, principal, new, stored) -> None:
        if new.get('taxons') != stored.data.get('taxons'):
            check_or_400(new.get('taxons'))
        if new.get('metadata') != stored.data.get('metadata'):
            _check_locale(new.get('metadata'))


def _check_locale(metadata: Any) -> None:
    """A definition's ``metadata.locale`` (the locale its runs read with unless the run's options
    name one, docs/api/extraction.md) is one the normaliser knows, as a taxon's ``locale`` is: a
    400 when written, never a run that fails later."""
    if not isinstance(metadata, dict) or metadata.get('locale') is None:
        return
    from chalicelib.features.extraction.shapes import LOCALE_CHOICES  # noqa: PLC0415 - the write path only
    if metadata['locale'] not in LOCALE_CHOICES:
        raise BadRequest(f'metadata.locale must be one of {", ".join(LOCALE_CHOICES)}')


def check_attributes(data: dict[str, Any]) -> None:
    attributes = data.get('attributes')
    if attributes is None:
        return
    if not isinstance(attributes, list) or len(attributes) > MAX_ATTRIBUTES:
        raise BadRequest(f'attributes must be a list of at most {MAX_ATTRIBUTES} attributes')
    for i, attr in enumerate(attributes):
        if not isinstance(attr, dict):
            raise BadRequest(f'attributes[{i}] must be an object')
        unknown = sorted(set(attr) - _ATTRIBUTE_KEYS)
        if unknown:
            raise BadRequest(f'attributes[{i}].{unknown[0]} is not an attribute field')
        name = attr.get('taxon') or attr.get('tag')
        if not isinstance(name, str) or not name.strip():
            raise BadRequest(f'attributes[{i}] needs its taxon (a taxon path) or tag')
        attr.setdefault('taxon', name)
        attr.setdefault('tag', name.rsplit('/', 1)[-1])
        attr.setdefault('path', attr['taxon'])
        conf = attr.get('confidence')
        if conf is not None and (not isinstance(conf, (int, float)) or isinstance(conf, bool) or not 0 <= conf <= 1):
            raise BadRequest(f'attributes[{i}].confidence must be a number from 0 to 1')
        if not isinstance(attr.get('id'), str) or not attr['id']:
            attr['id'] = str(uuid.uuid4())
        attr['dataObjId'] = data.get('id')


class Objects(Hook):
    guards = frozenset({'attributes'})

    def before_create(self, family, principal, data, body) -> None:
        check_attributes(data)

    def before_update(self, family, principal, new, stored) -> None:
        check_attributes(new)


class Exceptions(Hook):
    """Exceptions written by clients or other steps (``POST /api/data-exceptions``, e.g. a model's
    doubt): ``state`` and the ``storeState`` index key follow ``open``, so they list with the
    rest. A reviewer closes one through ``PUT /api/exceptions/{id}`` (which also closes the
    review task when it was the last)."""
    guards = frozenset({'open', 'dataStoreId'})

    @staticmethod
    def _derive(data: dict[str, Any], principal) -> None:
        state = 'CLOSED' if data.get('open') is False else 'OPEN'
        data['open'] = state == 'OPEN'
        data['state'] = state
        if data.get('dataStoreId'):
            data['storeState'] = f"{data['dataStoreId']}#{state}"
        else:
            data.pop('storeState', None)
        if state == 'CLOSED' and not data.get('closedBy'):
            data['closedBy'] = principal.email or principal.user_id
            data['closedOn'] = data.get('updatedOn')

    def before_create(self, family, principal, data, body) -> None:
        self._derive(data, principal)

    def before_update(self, family, principal, new, stored) -> None:
        self._derive(new, principal)


DEFINITIONS = Definitions()
OBJECTS = Objects()
EXCEPTIONS = Exceptions()
