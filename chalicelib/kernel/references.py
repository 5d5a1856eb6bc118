"""Request bodies as the platform's own clients write them: references as objects, nulls.

The platform's Python SDK (``kodexa``) serialises whole models: every field it does not set is
``null``, and references are objects (``organization: {id, name, ...}``, ``project: {...}``,
``productGroup: {...}``) rather than ids. ``normalize`` turns such a body into the body the
generic rules expect, before any other rule runs:

* ``x: {id, ...}`` for a reference ``xId`` (the family's ``references``: ownership
  ``organization`` / ``project`` included) is read as ``xId: <id>``; the object's other keys
  are ignored. ``x: null`` is read as ``xId: null``. An object without a string ``id``, or a
  value that is neither an object nor null, is 400. ``x`` and ``xId`` both present and naming
  different records (null counts as a value) is 400.
* Where the family also declares ``x`` as a field of its own that holds a whole record of the
  target family (``productGroup`` on products, ...: kernel/models.py ``embedded_family``), the
  object stays too, and the existing rule writes it by id (kernel/crud.py ``resolve_embedded``).
  Any other declared ``x`` (``contentObject: any``) is a reference and nothing else: the object
  is not stored, reads embed the current record (kernel/embedding.py).

Slug references (a family's ``slug_refs``, kernel/registry.py: tasks' ``statusSlug`` names a
task status by its slug) are references too: ``slug_checks`` refuses a value that names no
record of the target family in the written record's scope (its organization, its project, or
the platform), 400 like a dangling id (contract rule 7). kernel/crud.py ``reference_ops`` calls
it on every write path that writes a record with client values: create, update (PUT, batch
update, a SCRIPT's result, MCP tools) and the tasks an activity's TASK steps create. Like id
references it is checked by a read before the write (one consistent GetItem of the target's
unique-slug item), never held in the write's transaction (docs/scale.md).

Null on input (``clean_input`` in kernel/crud.py applies it): a field that is not
required is "not given" when null on create (its server default applies) and is cleared on
update (back to its default, or absent). Null stays 400 for required fields.
"""
from __future__ import annotations

import re
from typing import Any

from chalicelib.core.errors import BadRequest
from chalicelib.kernel.registry import Family
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.store import table


def _keeps_object(family: Family, name: str) -> bool:
    """Whether ``name`` is also a declared field holding a whole record (kept and resolved by id)."""
    spec = family.writable.get(name)
    if spec is None:
        return False
    from chalicelib.kernel.models import embedded_family  # noqa: PLC0415 - lazy: pydantic (cold start)
    return embedded_family(spec) is not None


def normalize(family: Family, body: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``body`` with reference objects folded into their id fields (module docstring).
    The body is returned unchanged when it holds no reference object."""
    names = [name for name in family.references if name in body]
    if not names:
        return body
    out = dict(body)
    for name in names:
        id_field, _target = family.references[name]
        value = out[name]
        if value is None:
            ref_id = None
        elif isinstance(value, dict):
            ref_id = value.get('id')
            if not isinstance(ref_id, str):
                if _keeps_object(family, name):
                    continue   # the declared field's own rules answer (400 naming it)
                raise BadRequest(f"Field '{name}' must be an object with the referenced record's 'id' "
                                 f"(or send '{id_field}')")
        else:
            if _keeps_object(family, name):
                continue
            raise BadRequest(f"Field '{name}' must be an object {{\"id\": ...}} or null (or send '{id_field}')")
        if id_field in out and out[id_field] != ref_id:
            raise BadRequest(f"Fields '{name}' and '{id_field}' name different records")
        out[id_field] = ref_id
        if not _keeps_object(family, name):
            out.pop(name)
    return out


def slug_checks(family: Family, values: dict[str, Any], org: str | None, project_id: str | None = None) -> None:
    """400 for the first slug reference in ``values`` that names no record of its target family
    in the record's scope (module docstring). Null values clear the field: nothing to check."""
    for name, target_path in family.slug_refs.items():
        value = values.get(name)
        if value is None:
            continue
        target = family_of(target_path)
        scope = {'global': table.GLOBAL_TENANT, 'org': org, 'project': project_id}[target.scope]
        if not isinstance(value, str) or scope is None or \
                not table.unique_exists(target.path, scope=scope, field_name='slug', value=value):
            noun = re.sub(r'(?<!^)(?=[A-Z])', ' ', target.entity).lower()   # TaskStatus -> task status
            article = 'an' if noun[:1] in 'aeiou' else 'a'
            raise BadRequest(f"Field '{name}' refers to {article} {noun} that does not exist: {str(value)[:100]}")
