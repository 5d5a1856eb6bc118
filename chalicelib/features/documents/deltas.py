"""Document content and linked deltas (docs/api/documents.md).

A document is a tree of nodes ``{id, parentId, nodeType, content, index, features}`` stored as
one immutable JSON object per version in S3 (``{folder}/document/v{n}-{random}.json``: the
random part keeps two writers of the same version from overwriting each other). The family
points at its current version (``documentVersion``, ``documentKey``).

Saving a version: put the new object, then ONE conditional write of the family (on its
changeSequence) with the new pointer, plus, for a delta, the delta record. When that write
fails for any reason the new object is deleted and the family still points at the old one:
the document is exactly as it was and no object is referenced that does not exist. A delta
that lost the race to another writer is applied again on the newer version (its operations
name nodes, not positions), so concurrent deltas all land.

A parsed document (features/parsing/stage.py) may be far larger than one object should hold:
its version is a *manifest* ``{version, root, parts: [{key, first, last, nodes, bytes}], nodeCount,
bytes, pageCount}`` naming per-page-range part objects (``{folder}parsed/{run}/{first}.json``, one
list of nodes each, written one at a time while parsing: memory stays flat in page count). The
node and byte caps below apply to what is loaded *whole* (deltas, PUT, an unpaged read); a
manifest up to ``MAX_PARSED_NODES`` / ``MAX_PARSED_BYTES`` is read page range by page range
(``read_document`` with ``page``; docs/api/documents.md "Large documents").

Reads never walk a parent cycle forever: ordering (parents first) and the checks of ``move``
keep a visited set.
"""
from __future__ import annotations

import copy
import json
import threading
import time
import uuid
from collections import OrderedDict
from typing import Any

from chalicelib.core import budget, clock
from chalicelib.core.errors import BadRequest, Conflict
from chalicelib.core.observability import get_logger
from chalicelib.core.principal import Principal
from chalicelib.features.documents import blobs, uploads
from chalicelib.features.documents.families import require_unlocked
from chalicelib.features.documents.service import family_folder, family_landed
from chalicelib.kernel import access, crud, records, writes
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.store import table
from chalicelib.kernel.store.repository import WriteConflict
from chalicelib.kernel.store.table import Stored

log = get_logger('deltas')

FAMILIES = family_of('document-families')
DELTAS = family_of('linked-deltas')
NODE_KEYS = ('id', 'parentId', 'nodeType', 'content', 'index', 'features')
SETTABLE = ('nodeType', 'content', 'index', 'features')
MAX_NODES = 100_000
MAX_OPERATIONS = 1_000
MAX_DOCUMENT_BYTES = 20 * 2 ** 20
MAX_PARSED_NODES = 5_000_000          # a parsed document stored in parts (module docstring)
MAX_PARSED_BYTES = 1 * 2 ** 30
MAX_READ_BYTES = 4 * 2 ** 20          # one answer of GET .../document: Lambda answers at most 6 MB
SAVE_ATTEMPTS = 60
SAVE_BUDGET_SECONDS = 20.0
_CHECK_EVERY = 4096   # steps of a walk between two budget checks


class _Stale(Exception):
    """The family changed under the write (or the write could not be taken now): re-read."""


Stale = _Stale   # for writers outside this module (features/parsing/stage.py)


# ----------------------------------------------------------------------------- nodes

def _node(value: Any, where: str, *, generate_id: bool = False) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadRequest(f'{where} must be an object {{id, parentId, nodeType, content, index, features}}')
    unknown = sorted(set(value) - set(NODE_KEYS))
    if unknown:
        raise BadRequest(f"{where} has unknown field '{unknown[0]}'")
    node_id = value.get('id')
    if node_id is None and generate_id:
        node_id = str(uuid.uuid4())
    if not isinstance(node_id, str) or not 1 <= len(node_id) <= 200:
        raise BadRequest(f'{where}.id must be a string of 1 to 200 characters')
    parent = value.get('parentId')
    if parent is not None and (not isinstance(parent, str) or not parent):
        raise BadRequest(f'{where}.parentId must be a node id or null')
    node = {'id': node_id, 'parentId': parent, 'nodeType': value.get('nodeType', ''),
            'content': value.get('content'), 'index': value.get('index', 0), 'features': value.get('features', {})}
    _check_fields(node, where)
    return node


def _check_fields(values: dict[str, Any], where: str) -> None:
    if 'nodeType' in values and not isinstance(values['nodeType'], str):
        raise BadRequest(f'{where}.nodeType must be a string')
    if 'content' in values and values['content'] is not None and not isinstance(values['content'], str):
        raise BadRequest(f'{where}.content must be a string or null')
    if 'index' in values and (isinstance(values['index'], bool) or not isinstance(values['index'], int)):
        raise BadRequest(f'{where}.index must be an integer')
    if 'features' in values and not isinstance(values['features'], dict):
        raise BadRequest(f'{where}.features must be an object')


def parse_nodes(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise BadRequest("Field 'nodes' must be a list of nodes")
    if len(value) > MAX_NODES:
        raise BadRequest(f"Field 'nodes' holds more than {MAX_NODES} nodes")
    nodes = [_node(v, f'nodes[{i}]') for i, v in enumerate(value)]
    seen: set[str] = set()
    for i, node in enumerate(nodes):
        if node['id'] in seen:
            raise BadRequest(f"nodes[{i}]: node id '{node['id'][:100]}' appears twice")
        seen.add(node['id'])
    return nodes


def ordered(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Parents before children, siblings by (index, id); nodes whose parent is missing are roots;
    nodes on a parent cycle (never reached from a root) follow in stored order. Iterative and
    with a visited set: a loop in the parent links cannot make it run forever."""
    by_id = {n['id']: n for n in nodes}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for node in nodes:
        parent = node.get('parentId')
        children.setdefault(parent if parent in by_id else None, []).append(node)
    for group in children.values():
        group.sort(key=lambda n: (n.get('index') or 0, n['id']))
    out: list[dict[str, Any]] = []
    visited: set[str] = set()
    stack = list(reversed(children.get(None, [])))
    while stack:
        node = stack.pop()
        if node['id'] in visited:
            continue
        visited.add(node['id'])
        out.append(node)
        stack.extend(reversed(children.get(node['id'], [])))
    out += [n for n in nodes if n['id'] not in visited]
    return out


def _under(nodes: dict[str, dict[str, Any]], node_id: str, ancestor: str) -> bool:
    """Whether ``node_id`` is ``ancestor`` or below it (walks parent links once each: O(depth),
    checking the request's budget as it goes)."""
    seen: set[str] = set()
    current: str | None = node_id
    while current is not None and current not in seen:
        if current == ancestor:
            return True
        seen.add(current)
        if len(seen) % _CHECK_EVERY == 0:
            budget.check(f'checking a move in a document of {len(nodes)} nodes')
        current = (nodes.get(current) or {}).get('parentId')
    return False


class _Tree:
    """The nodes by id and, built in one pass, the ids of each parent's children: a delete
    removes its subtree by walking down (O(subtree)), never every node up to the root (which
    made deletes quadratic in depth: issue 24)."""

    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        self.by_id: dict[str, dict[str, Any]] = OrderedDict((n['id'], copy.deepcopy(n)) for n in nodes)
        self.children: dict[str, set[str]] = {}
        for node in self.by_id.values():
            self._link(node)

    def _link(self, node: dict[str, Any]) -> None:
        parent = node.get('parentId')
        if parent is not None:
            self.children.setdefault(parent, set()).add(node['id'])

    def _unlink(self, node: dict[str, Any]) -> None:
        siblings = self.children.get(node.get('parentId'))
        if siblings is not None:
            siblings.discard(node['id'])
            if not siblings:
                del self.children[node['parentId']]

    def add(self, node: dict[str, Any]) -> None:
        self.by_id[node['id']] = node
        self._link(node)

    def move(self, node_id: str, parent: str | None) -> None:
        node = self.by_id[node_id]
        self._unlink(node)
        node['parentId'] = parent
        self._link(node)

    def delete(self, node_id: str) -> None:
        """Remove the node and everything below it (a parent cycle through it included)."""
        self._unlink(self.by_id[node_id])
        stack, gone = [node_id], {node_id}
        while stack:
            current = stack.pop()
            for child in self.children.pop(current, ()):
                if child not in gone:
                    gone.add(child)
                    stack.append(child)
            if len(gone) % _CHECK_EVERY == 0:
                budget.check(f'deleting a subtree in a document of {len(self.by_id)} nodes')
        for nid in gone:
            self.by_id.pop(nid, None)


# ----------------------------------------------------------------------------- operations

def parse_operations(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not value:
        raise BadRequest("Field 'operations' must be a non-empty list")
    if len(value) > MAX_OPERATIONS:
        raise BadRequest(f"Field 'operations' holds more than {MAX_OPERATIONS} operations")
    out = []
    for i, op in enumerate(value):
        where = f'operations[{i}]'
        if not isinstance(op, dict) or op.get('op') not in ('add', 'update', 'delete', 'move'):
            raise BadRequest(f'{where}.op must be one of add, update, delete, move')
        kind = op['op']
        if kind == 'add':
            out.append({'op': 'add', 'node': _node(op.get('node'), f'{where}.node', generate_id=True)})
            continue
        if not isinstance(op.get('id'), str) or not op['id']:
            raise BadRequest(f'{where}.id must be a node id')
        if kind == 'update':
            changes = op.get('set')
            if not isinstance(changes, dict) or not changes:
                raise BadRequest(f'{where}.set must be an object of {", ".join(SETTABLE)}')
            unknown = sorted(set(changes) - set(SETTABLE))
            if unknown:
                raise BadRequest(f"{where}.set cannot change '{unknown[0]}' (use move for parentId)")
            _check_fields(changes, f'{where}.set')
            out.append({'op': 'update', 'id': op['id'], 'set': changes})
        elif kind == 'delete':
            out.append({'op': 'delete', 'id': op['id']})
        else:
            if 'parentId' not in op or (op['parentId'] is not None and (not isinstance(op['parentId'], str)
                                                                         or not op['parentId'])):
                raise BadRequest(f'{where}.parentId must be a node id or null')
            out.append({'op': 'move', 'id': op['id'], 'parentId': op['parentId']})
    return out


def apply(nodes: list[dict[str, Any]], operations: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Apply what can apply -> (new nodes, reasons for the dropped operations). Linear in the
    document and the operations (a move's check walks up once: O(depth)); the request's time
    budget is checked at each operation (core/budget.py), before anything is written."""
    tree = _Tree(nodes)
    by_id = tree.by_id
    dropped: list[str] = []
    for i, op in enumerate(operations):
        budget.check(f'applying operation {i + 1} of {len(operations)} to a document of {len(by_id)} nodes')
        kind = op['op']
        target = op['node']['id'] if kind == 'add' else op['id']
        reason = None
        if kind == 'add':
            parent = op['node']['parentId']
            if target in by_id:
                reason = f'node {target} already exists'
            elif parent is not None and parent not in by_id:
                reason = f'parent {parent} does not exist'
            else:
                tree.add(copy.deepcopy(op['node']))
        elif target not in by_id:
            reason = f'node {target} does not exist'
        elif kind == 'update':
            by_id[target].update(copy.deepcopy(op['set']))
        elif kind == 'delete':
            tree.delete(target)
        else:
            parent = op['parentId']
            if parent is not None and parent not in by_id:
                reason = f'parent {parent} does not exist'
            elif parent is not None and _under(by_id, parent, target):
                reason = f'moving {target} under {parent} would put it under itself'
            else:
                tree.move(target, parent)
        if reason is not None:
            dropped.append(f'operation {i} ({kind}): {reason}')
    return list(by_id.values()), dropped


# ----------------------------------------------------------------------------- versions in S3

_cache: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()   # key -> nodes (objects are immutable)
_cache_lock = threading.Lock()
CACHE_SIZE = 16


def _version_key(family: Stored, version: int) -> str:
    return f'{family_folder(family.org, family.id)}document/v{version:010d}-{uuid.uuid4().hex[:12]}.json'


def load_nodes(family: Stored) -> list[dict[str, Any]]:
    key = family.data.get('documentKey')
    if not family.data.get('documentVersion') or not key:
        return []
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return copy.deepcopy(_cache[key])
    stored = json.loads(blobs.read(key))
    if 'parts' in stored:
        if stored.get('nodeCount', 0) > MAX_NODES or stored.get('bytes', 0) > MAX_DOCUMENT_BYTES:
            raise BadRequest(f"The document holds {stored.get('nodeCount')} nodes ({stored.get('bytes')} bytes), more "
                             f'than the {MAX_NODES} nodes or {MAX_DOCUMENT_BYTES} bytes a document edited as a whole '
                             'may hold: read it page by page (GET .../document?page=)')
        nodes = [stored['root']] if stored.get('root') else []
        for part in stored['parts']:
            nodes += read_part(part['key'])
    else:
        nodes = stored['nodes']
    _remember(key, nodes)
    return copy.deepcopy(nodes)


def manifest(family: Stored) -> dict[str, Any] | None:
    """The family's current version when it is stored in parts (module docstring), else None."""
    key = family.data.get('documentKey')
    if not family.data.get('documentVersion') or not key:
        return None
    stored = json.loads(blobs.read(key))
    return stored if 'parts' in stored else None


def part_key(family: Stored, run: str, first: int) -> str:
    return f'{family_folder(family.org, family.id)}parsed/{run}/{first:06d}.json'


def put_part(key: str, nodes: list[dict[str, Any]]) -> int:
    """One part of a parsed document (a page range's nodes); its size in bytes. Rewriting the
    same key with the same nodes is harmless (a redelivered message does)."""
    payload = json.dumps(nodes, separators=(',', ':')).encode()
    blobs.put(key, payload, 'application/json')
    return len(payload)


def read_part(key: str) -> list[dict[str, Any]]:
    return json.loads(blobs.read(key))


def save_parts(family: Stored, root: dict[str, Any], parts: list[dict[str, Any]], principal: Principal,
               extra_ops=lambda version: []) -> int:
    """Store a parsed document written in parts as the family's next version: one manifest
    object and the same single conditional write as any version (raises ``_Stale`` when the
    family changed meanwhile; the caller decides whether to try again)."""
    nodes = 1 + sum(int(p['nodes']) for p in parts)
    size = sum(int(p['bytes']) for p in parts)
    if nodes > MAX_PARSED_NODES or size > MAX_PARSED_BYTES:
        raise BadRequest(f'The parsed document would hold {nodes} nodes ({size} bytes), more than the '
                         f'{MAX_PARSED_NODES} nodes or {MAX_PARSED_BYTES} bytes a parsed document may hold')
    version = int(family.data.get('documentVersion') or 0) + 1
    pages = max([int(p['last']) for p in parts] or [0])
    payload = json.dumps({'version': version, 'root': root, 'parts': parts, 'nodeCount': nodes, 'bytes': size,
                          'pageCount': pages}, separators=(',', ':')).encode()
    return _commit_version(family, version, payload, None, principal, extra_ops)


def _remember(key: str, nodes: list[dict[str, Any]]) -> None:
    with _cache_lock:
        _cache[key] = copy.deepcopy(nodes)
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)


def _save_version(family: Stored, nodes: list[dict[str, Any]], principal: Principal,
                  extra_ops=lambda version: []) -> int:
    """Store ``nodes`` as the family's next version (module docstring); raises ``_Stale`` when
    the family changed meanwhile. On any failure the new object is deleted. A locked family's
    document does not change (409, docs/api/documents.md "Locked families"): the write is
    conditional on the family's sequence, so a lock that lands meanwhile makes it stale."""
    require_unlocked(family, 'changed (its document)')
    version = int(family.data.get('documentVersion') or 0) + 1
    payload = json.dumps({'version': version, 'nodes': nodes}, separators=(',', ':')).encode()
    if len(payload) > MAX_DOCUMENT_BYTES:
        raise BadRequest(f'The document would be larger than {MAX_DOCUMENT_BYTES} bytes')
    return _commit_version(family, version, payload, nodes, principal, extra_ops)


def _commit_version(family: Stored, version: int, payload: bytes, nodes: list[dict[str, Any]] | None,
                    principal: Principal, extra_ops) -> int:
    key = _version_key(family, version)
    blobs.put(key, payload, 'application/json')
    new = dict(family.data)
    new.update(documentVersion=version, documentKey=key, updatedOn=clock.now_iso(), changeSequence=family.seq + 1)
    ops = records.update_ops(FAMILIES, new, family, principal=principal) + extra_ops(version)
    try:
        records.commit(ops)
    except Exception as exc:
        # A failure may hide a write that landed: the table failing past its retries, or a
        # one-item write retried after its answer was lost, which then meets itself as a stale
        # sequence. The object goes only when the family does not name it (service.family_landed).
        landed = family_landed(family.id, key=('documentKey', key))
        if not landed:   # None (cannot tell): the object stays; the family's delete sweeps its folder
            if landed is False:
                _forget(key)
            if isinstance(exc, WriteConflict) and (exc.code == 'TransactionConflict' or (
                    exc.op is not None and exc.op.tag.get('what') == 'entity')):
                raise _Stale() from None
            raise
        log.warning('version %s of family %s landed though its write reported a failure', version, family.id)
    except BaseException:
        _forget(key)
        raise
    if nodes is not None:
        _remember(key, nodes)   # the next delta on this document starts from memory, not S3
    return version


def _forget(key: str) -> None:
    try:
        blobs.delete([key])
    except Exception:  # noqa: BLE001 - an unreferenced object is harmless; the family's delete sweeps its folder
        log.warning('could not delete unreferenced document version %s', key, exc_info=True)


# ----------------------------------------------------------------------------- document routes

def read_document(family_id: str, principal: Principal, *, page: int | None = None) -> dict[str, Any]:
    """The family's document. A document stored in parts (a parsed one) is answered whole when
    it fits one answer (``MAX_READ_BYTES``), else from ``page`` (default 1) on, as many page
    ranges as fit, with ``nextPage`` naming where the next read starts (docs/api/documents.md)."""
    family = crud.load_visible(FAMILIES, family_id, principal)
    version = int(family.data.get('documentVersion') or 0)
    stored = manifest(family)
    if stored is None:
        if page is not None:
            raise BadRequest("Parameter 'page' applies to a document stored by pages (a parsed one)")
        return {'version': version, 'nodes': ordered(load_nodes(family))}
    parts = stored['parts']
    first = 1 if page is None else page
    if page is None and stored.get('bytes', 0) <= MAX_READ_BYTES:
        chosen = parts
    else:
        chosen, size = [], 0
        for part in parts:
            if int(part['last']) < first:
                continue
            if chosen and size + int(part['bytes']) > MAX_READ_BYTES:
                break
            chosen.append(part)
            size += int(part['bytes'])
    nodes = [stored['root']]
    for part in chosen:
        budget.check(f"reading pages {part['first']}-{part['last']} of a document of {stored.get('pageCount')} pages")
        nodes += read_part(part['key'])
    following = [p for p in parts if chosen and int(p['first']) > int(chosen[-1]['last'])]
    answer = {'version': version, 'nodes': ordered(nodes), 'pageCount': stored.get('pageCount'),
              'nodeCount': stored.get('nodeCount')}
    if chosen:
        answer.update(firstPage=int(chosen[0]['first']), lastPage=int(chosen[-1]['last']))
    answer['nextPage'] = int(following[0]['first']) if following else None
    return answer


def replace_document(family_id: str, body: dict[str, Any], principal: Principal) -> dict[str, Any]:
    family = crud.load_visible(FAMILIES, family_id, principal)
    crud.require_write(FAMILIES, principal, family, op='update')
    version = body.get('version')
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise BadRequest("Field 'version' is required: the version the new content replaces (0 for none)")
    nodes = parse_nodes(body.get('nodes'))
    require_unlocked(family, 'changed (its document)')
    current = int(family.data.get('documentVersion') or 0)
    if version != current:
        raise Conflict('The document was changed by someone else (stale version)', version=current)
    try:
        saved = _save_version(family, nodes, principal)
    except _Stale:
        now = table.get(FAMILIES.path, family.id)
        raise Conflict('The document was changed by someone else (stale version)',
                       version=int((now.data if now else {}).get('documentVersion') or 0)) from None
    return {'version': saved, 'nodes': ordered(nodes)}


# ----------------------------------------------------------------------------- linked deltas

def _delta_family(value: Any, principal: Principal) -> Stored:
    missing = BadRequest(f"Field 'documentFamilyId' refers to a record that does not exist: {str(value)[:64]}")
    try:
        family_id = str(uuid.UUID(str(value)))
    except ValueError:
        raise missing from None
    family = table.get(FAMILIES.path, family_id)
    if family is None or not crud.visible(FAMILIES, principal, family):
        raise missing
    access.require_active(principal, family.org)
    access.require_write(principal, DELTAS, family.org)
    return family


def save(body: dict[str, Any], principal: Principal) -> dict[str, Any]:
    """POST /api/linked-deltas with documentFamilyId: apply, record, answer the delta record."""
    family = _delta_family(body.get('documentFamilyId'), principal)
    operations = parse_operations(body.get('operations'))
    base = body.get('baseVersion')
    if base is not None and (isinstance(base, bool) or not isinstance(base, int) or base < 0):
        raise BadRequest("Field 'baseVersion' must be a version number")
    name = body.get('name')
    if name is not None and not isinstance(name, str):
        raise BadRequest("Field 'name' must be a string")
    started = time.monotonic()
    for attempt in range(SAVE_ATTEMPTS):
        if attempt:
            family = table.get(FAMILIES.path, family.id)
            if family is None:
                raise BadRequest("Field 'documentFamilyId' refers to a record that does not exist: "
                                 f"{body['documentFamilyId']}")
        require_unlocked(family, 'changed (its document)')
        current = int(family.data.get('documentVersion') or 0)
        if base is not None and base > current:
            raise BadRequest(f"Field 'baseVersion' ({base}) is ahead of the document (version {current})")
        nodes, dropped = apply(load_nodes(family), operations)
        state = 'FAILED' if len(dropped) == len(operations) else 'APPLIED_PARTIAL' if dropped else 'APPLIED'
        values: dict[str, Any] = {'documentFamilyId': family.id, 'operations': operations, 'state': state,
                                  'baseVersion': current if base is None else base}
        if name is not None:
            values['name'] = name
        if dropped:
            values['errorMessage'] = '; '.join(dropped)[:4000]
        delta = records.new_record(DELTAS, values, principal=principal, org=family.org,
                                   project_id=family.data['projectId'])
        try:
            if state == 'FAILED':
                ops = records.create_ops(DELTAS, [delta], principal)
                ops.append(uploads.check_unchanged(FAMILIES.path, family.id, family.seq))
                records.commit(ops)
                return delta

            def delta_ops(version: int, delta: dict[str, Any] = delta) -> list:
                delta['appliedVersion'] = version
                return records.create_ops(DELTAS, [delta], principal)
            _save_version(family, nodes, principal, delta_ops)
            return delta
        except _Stale:
            pass
        except WriteConflict as exc:
            if exc.code != 'TransactionConflict' and not (exc.op is not None and exc.op.tag.get('what') == 'entity'):
                raise
        if time.monotonic() - started > SAVE_BUDGET_SECONDS or budget.remaining(ceiling=True) < writes.RESERVE_SECONDS:
            break
        writes.backoff(attempt)
    raise writes.busy()
