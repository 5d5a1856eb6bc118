"""KDDB: the SQLite document file of the platform's SDK (``kodexa`` 7.4, ``Document.from_kddb`` /
``Document.to_kddb``), written from and read into the platform's node model
(features/documents/deltas.py; docs/api/documents.md "KDDB").

The format, as ``kodexa/model/persistence.py`` (``SqliteDocumentPersistence``) builds and reads it:

  metadata(id, metadata)                 one row, id 1: msgpack of {version "6.0.0", metadata, source,
                                         mixins, labels, uuid}
  n_type(id, name) / f_type(id, name)    node type names / feature type names ("type:name")
  cn(id, nt, pid, idx)                   nodes: integer id, type, parent (NULL: the root), index
  cnp(id, cn_id, pos, content, content_idx)   content parts: text parts (content) in pos order
  ft(id, cn_id, f_type, binary_value, single, tag_uuid)   features: msgpack of the value LIST
                                         (a single value v is stored as [v], single = 1)
  content_exceptions, model_insights     empty here

Mapping to the node model: a node's text is its one content part; ``features.bbox`` is the SDK's
``spatial:bbox``; every other feature ``k`` is ``parsed:k``; the node's own id rides as
``parsed:nodeId`` so a document read back keeps its ids (nodes the SDK added get ``n<int>``).
Features of other types (the SDK's ``tag:...``) come back under their full name ``type:name``.

Why our own reader and writer: the SDK itself is not a runtime dependency (it brings pandas,
a client and ~100 MB), and what the platform needs is only the five tables above. msgpack (the
maintained codec the SDK uses) encodes the values.

Bounds (a KDDB sent by a client is hostile until read): its size (``MAX_KDDB_BYTES``), its node
and feature row counts, the length of any one value, and the time SQLite may spend (a progress
handler stops any statement past the deadline, whatever views or a crafted file would make it
do); the file is opened read-only and immutable, the schema must hold plain tables, and nothing
but fixed SELECTs runs against it.
"""
from __future__ import annotations

import os
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import msgpack

from chalicelib.core.errors import BadRequest, PayloadTooLarge

VERSION = '6.0.0'
MAX_KDDB_BYTES = 5 * 2 ** 20          # a KDDB a client sends (the small-upload cap)
MAX_NODES = 100_000                   # the node model's cap (features/documents/deltas.py MAX_NODES)
MAX_FEATURES = 1_000_000
MAX_VALUE_BYTES = 1 * 2 ** 20         # one feature value or one content part
READ_SECONDS = 10.0
_TABLES = ('metadata', 'cn', 'cnp', 'n_type', 'f_type', 'ft')
_BATCH = 5_000


class KddbRejected(BadRequest):
    """A KDDB that cannot be read: the message says why."""

    def __init__(self, why: str) -> None:
        super().__init__(f'The KDDB document cannot be read: {why}')


# ----------------------------------------------------------------------------- writing

def _schema(cursor: sqlite3.Cursor) -> None:
    cursor.executescript("""
        CREATE TABLE metadata (id integer primary key, metadata text);
        CREATE TABLE cn (id integer primary key, nt INTEGER, pid INTEGER, idx INTEGER);
        CREATE TABLE cnp (id integer primary key, cn_id INTEGER, pos integer, content text, content_idx integer);
        CREATE TABLE n_type (id integer primary key, name text);
        CREATE TABLE f_type (id integer primary key, name text);
        CREATE TABLE ft (id integer primary key, cn_id integer, f_type INTEGER, binary_value blob,
                         single integer, tag_uuid text);
        CREATE UNIQUE INDEX n_type_uk ON n_type(name);
        CREATE UNIQUE INDEX f_type_uk ON f_type(name);
        CREATE INDEX cn_perf ON cn(nt);
        CREATE INDEX cn_perf2 ON cn(pid);
        CREATE INDEX cnp_perf ON cnp(cn_id, pos);
        CREATE INDEX f_perf ON ft(cn_id);
        CREATE INDEX f_perf2 ON ft(tag_uuid);
        CREATE TABLE content_exceptions (id integer primary key, tag text, message text, exception_details text,
                                         group_uuid text, tag_uuid text, exception_type text,
                                         exception_type_id text, severity text, node_uuid text);
        CREATE TABLE model_insights (id integer primary key, model_insight text);
    """)


def _feature_name(key: str) -> str:
    if key == 'bbox':
        return 'spatial:bbox'
    return key if ':' in key else f'parsed:{key}'


class _Types:
    """Name -> integer id of n_type / f_type rows, inserted on first use."""

    def __init__(self, cursor: sqlite3.Cursor, table: str) -> None:
        self.cursor, self.table, self.ids = cursor, table, {}

    def __call__(self, name: str) -> int:
        found = self.ids.get(name)
        if found is None:
            found = self.ids[name] = len(self.ids) + 1
            self.cursor.execute(f'INSERT INTO {self.table} (id, name) VALUES (?, ?)', (found, name))  # noqa: S608 - fixed names
        return found


def write(path: str, nodes: Iterable[dict[str, Any]], *, metadata: dict[str, Any] | None = None,
          source: dict[str, Any] | None = None, labels: list[str] | None = None) -> int:
    """Write ``nodes`` (parents before children, as deltas.ordered gives them; any number of
    chunks: memory holds one batch) to a new KDDB file at ``path``; how many nodes."""
    connection = sqlite3.connect(path)
    try:
        cursor = connection.cursor()
        cursor.execute('PRAGMA journal_mode=OFF')
        cursor.execute('PRAGMA synchronous=OFF')
        _schema(cursor)
        meta = {'version': VERSION, 'metadata': metadata or {}, 'source': source or {}, 'mixins': [],
                'labels': labels or [], 'uuid': str(uuid.uuid4())}
        cursor.execute('INSERT INTO metadata (id, metadata) VALUES (1, ?)',
                       (sqlite3.Binary(msgpack.packb(meta, use_bin_type=True)),))
        node_type, feature_type = _Types(cursor, 'n_type'), _Types(cursor, 'f_type')
        ids: dict[str, int] = {}
        cn, cnp, ft = [], [], []
        count = 0
        for node in nodes:
            count += 1
            number = ids[node['id']] = len(ids) + 1
            parent = ids.get(node.get('parentId')) if node.get('parentId') is not None else None
            cn.append((number, node_type(str(node.get('nodeType') or '')), parent, int(node.get('index') or 0)))
            if node.get('content') is not None:
                cnp.append((number, 0, node['content'], None))
            features = {**(node.get('features') or {}), 'nodeId': node['id']}
            for key, value in features.items():
                ft.append((number, feature_type(_feature_name(str(key))),
                           sqlite3.Binary(msgpack.packb([value], use_bin_type=True)), 1, None))
            if len(cn) >= _BATCH:
                _flush(cursor, cn, cnp, ft)
        _flush(cursor, cn, cnp, ft)
        connection.commit()
        return count
    finally:
        connection.close()


def _flush(cursor: sqlite3.Cursor, cn: list, cnp: list, ft: list) -> None:
    cursor.executemany('INSERT INTO cn (id, nt, pid, idx) VALUES (?,?,?,?)', cn)
    cursor.executemany('INSERT INTO cnp (cn_id, pos, content, content_idx) VALUES (?,?,?,?)', cnp)
    cursor.executemany('INSERT INTO ft (cn_id, f_type, binary_value, single, tag_uuid) VALUES (?,?,?,?,?)', ft)
    cn.clear()
    cnp.clear()
    ft.clear()


def to_bytes(nodes: Iterable[dict[str, Any]], **kwargs: Any) -> bytes:
    """A KDDB file's bytes (small documents, tests); large ones go through ``write`` to a file."""
    fd, path = tempfile.mkstemp(suffix='.kddb')
    os.close(fd)
    os.unlink(path)
    try:
        write(path, nodes, **kwargs)
        with open(path, 'rb') as handle:
            return handle.read()
    finally:
        if os.path.exists(path):
            os.unlink(path)


# ----------------------------------------------------------------------------- reading

def _unpack(blob: Any, where: str) -> Any:
    if not isinstance(blob, (bytes, bytearray, memoryview)) or len(blob) > MAX_VALUE_BYTES:
        raise KddbRejected(f'{where} is not a msgpack value of at most {MAX_VALUE_BYTES} bytes')
    try:
        return msgpack.unpackb(bytes(blob), raw=False, strict_map_key=True)   # its lengths are bounded by the blob
    except Exception:  # noqa: BLE001 - any decoding failure is the file's fault
        raise KddbRejected(f'{where} is not valid msgpack') from None


def read(data: bytes, *, seconds: float = READ_SECONDS, max_nodes: int = MAX_NODES) -> dict[str, Any]:
    """A KDDB's bytes -> ``{'nodes': [...], 'metadata': {...}}`` in the node model; refuses
    (``KddbRejected``, 400; ``PayloadTooLarge``, 413) what is too large, malformed or too slow."""
    if not data:
        raise KddbRejected('the file is empty')
    if len(data) > MAX_KDDB_BYTES:
        raise PayloadTooLarge(f'A KDDB document holds at most {MAX_KDDB_BYTES} bytes')
    if not data.startswith(b'SQLite format 3\x00'):
        raise KddbRejected('it is not an SQLite database')
    fd, path = tempfile.mkstemp(suffix='.kddb')
    try:
        with os.fdopen(fd, 'wb') as handle:
            handle.write(data)
        return _read_file(path, seconds=seconds, max_nodes=max_nodes)
    finally:
        os.unlink(path)


def _read_file(path: str, *, seconds: float, max_nodes: int) -> dict[str, Any]:
    ends = time.monotonic() + seconds
    try:
        connection = sqlite3.connect(f'file:{path}?mode=ro&immutable=1', uri=True, check_same_thread=True)
    except sqlite3.Error:
        raise KddbRejected('it is not an SQLite database') from None
    try:
        connection.set_progress_handler(lambda: 1 if time.monotonic() > ends else 0, 1_000)
        connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        connection.execute('PRAGMA trusted_schema=OFF')
        return _rows(connection, max_nodes)
    except sqlite3.OperationalError as exc:
        if time.monotonic() > ends:
            raise KddbRejected(f'reading it took longer than {seconds:.0f} s') from None
        raise KddbRejected(f'SQLite refused it ({str(exc)[:200]})') from None
    except sqlite3.Error as exc:
        raise KddbRejected(f'SQLite refused it ({str(exc)[:200]})') from None
    finally:
        connection.close()


def _rows(connection: sqlite3.Connection, max_nodes: int) -> dict[str, Any]:
    kinds = dict(connection.execute("SELECT name, type FROM sqlite_master WHERE name IN "
                                    "('metadata','cn','cnp','n_type','f_type','ft')").fetchall())
    for name in _TABLES:
        if kinds.get(name) != 'table':
            raise KddbRejected(f"it has no table '{name}'" if name not in kinds else f"'{name}' is not a table")
    nodes_count = connection.execute('SELECT count(*) FROM cn').fetchone()[0]
    if nodes_count > max_nodes:
        raise KddbRejected(f'it holds {nodes_count} nodes, more than the {max_nodes} a document may hold')
    if connection.execute('SELECT count(*) FROM ft').fetchone()[0] > MAX_FEATURES:
        raise KddbRejected(f'it holds more than {MAX_FEATURES} features')
    row = connection.execute('SELECT metadata FROM metadata ORDER BY id LIMIT 1').fetchone()
    meta = _unpack(row[0], 'its metadata') if row else {}
    if not isinstance(meta, dict):
        raise KddbRejected('its metadata is not a map')
    node_types = {i: str(n) for i, n in connection.execute('SELECT id, name FROM n_type')}
    feature_types = {i: str(n) for i, n in connection.execute('SELECT id, name FROM f_type')}
    rows: dict[int, dict[str, Any]] = {}
    for number, nt, pid, idx in connection.execute('SELECT id, nt, pid, idx FROM cn ORDER BY id'):
        if not isinstance(number, int):
            raise KddbRejected('a node id is not an integer')
        rows[number] = {'pid': pid, 'nodeType': node_types.get(nt, ''), 'index': idx if isinstance(idx, int) else 0,
                        'content': None, 'features': {}}
    parts: dict[int, list[str]] = {}
    for cn_id, content in connection.execute('SELECT cn_id, content FROM cnp ORDER BY cn_id, pos'):
        if cn_id in rows and isinstance(content, str):
            parts.setdefault(cn_id, []).append(content)
    for cn_id, text in parts.items():
        rows[cn_id]['content'] = ' '.join(text) if len(text) > 1 else text[0]
    for cn_id, f_type, blob, single in connection.execute('SELECT cn_id, f_type, binary_value, single FROM ft'):
        node = rows.get(cn_id)
        name = feature_types.get(f_type)
        if node is None or name is None:
            continue
        value = _unpack(blob, f'feature {name[:100]}')
        if single == 1 and isinstance(value, list) and len(value) == 1:
            value = value[0]
        key = 'bbox' if name == 'spatial:bbox' else name[len('parsed:'):] if name.startswith('parsed:') else name
        node['features'][key] = value
    return {'nodes': list(_nodes(rows)), 'metadata': meta}


def _nodes(rows: dict[int, dict[str, Any]]) -> Iterator[dict[str, Any]]:
    ids: dict[int, str] = {}
    taken: set[str] = set()
    for number, row in rows.items():
        own = row['features'].pop('nodeId', None)
        if isinstance(own, str) and 0 < len(own) <= 200 and own not in taken:
            ids[number] = own
            taken.add(own)
    for number in rows:
        if number not in ids:
            candidate = f'n{number}'
            while candidate in taken:
                candidate += '_'
            ids[number] = candidate
            taken.add(candidate)
    for number, row in rows.items():
        pid = row['pid']
        yield {'id': ids[number], 'parentId': ids.get(pid) if pid is not None else None,
               'nodeType': row['nodeType'][:200], 'content': row['content'], 'index': row['index'],
               'features': row['features']}
