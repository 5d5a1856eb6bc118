"""moto's server for the local stack: `python -m localdev.moto_server -H HOST -p PORT`.

Fixes over `python -m moto.server`: two about moto's TransactWriteItems, which the API
uses for every write, one about its Query (``narrow_queries``: a Query's candidates are
its partition, not the whole table sorted; on this server an index Query's are its partition
key's group, grouped once per change: ``INDEX_GROUPS``), and one about its answers
(``plain_json_answers``: DynamoDB's item operations answered without moto's shape walk). The
server also routes without listing moto's package folder per request and writes no access log
(``serve_quickly``, ``main``):

* one request at a time. moto's backends are not thread-safe and its server is threaded:
  concurrent transactions fail with "dictionary changed size during iteration" (the API then
  answers 500), and a rolled-back transaction can restore a table copy that drops another
  request's writes. moto is CPU-bound under the GIL anyway, so a lock costs nothing.
* a rollback of the items the transaction touches, in place. moto deep-copies every table a
  transaction names before running it and, when it fails, puts the copy in the table's place.
  That costs time in proportion to the table (after a few thousand items a create takes seconds
  and clients time out), and the copy is a new object with a new stream shard: a stream reader
  holding an iterator keeps reading the old shard, so it is handed the records of the
  rolled-back transaction (events of writes that never happened) and never sees another write
  (found by the chaos run of issue 16). Here the table stays the same object: before the
  transaction the items it names are copied, and if it fails they are put back and the stream
  records it appended are removed. Under the lock nothing else runs, so this rolls back
  exactly as well.

Around both sits the chaos switch (localdev/chaos.py, CHAOS_* variables, ``/_chaos``): it is
outside the lock, so an injected error never waits for it and a slow answer does not hold it.
"""
from __future__ import annotations

import argparse
import copy
import gc
import os
import signal
import sys
import threading
import time
import types
from typing import Any

from localdev import chaos

_state = threading.local()


def _item_keys(table, transact_items: list[dict[str, Any]]) -> set[tuple[Any, Any]]:
    """(hash, range) DynamoType keys of the items a transaction writes in ``table``."""
    from moto.dynamodb.models.dynamo_type import DynamoType
    keys = set()
    for entry in transact_items:
        _, op = next(iter(entry.items()))
        if op.get('TableName') != table.name:
            continue
        key = op.get('Key') or op.get('Item') or {}
        try:
            hash_value = DynamoType(key[table.hash_key_attr])
            range_value = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
        except (KeyError, TypeError, IndexError):
            continue
        keys.add((hash_value, range_value))
    return keys


class _Saved:
    """What rolling back ``transact_items`` in ``table`` needs: a copy of each item they name (None
    for one that does not exist yet) and the length of the table's stream."""

    def __init__(self, table, transact_items: list[dict[str, Any]]) -> None:
        self.table = table
        self.items = {key: copy.deepcopy(table.get_item(*key)) for key in _item_keys(table, transact_items)}
        shard = getattr(table, 'stream_shard', None)
        self.stream_length = len(shard.items) if shard is not None else None

    def restore(self) -> None:
        table = self.table
        for (hash_value, range_value), item in self.items.items():
            if table.range_key_attr:
                bucket = table.items[hash_value]
                if item is None:
                    bucket.pop(range_value, None)
                    if not bucket:
                        table.items.pop(hash_value, None)
                else:
                    bucket[range_value] = item
            elif item is None:
                table.items.pop(hash_value, None)
            else:
                table.items[hash_value] = item
        if self.stream_length is not None:
            del table.stream_shard.items[self.stream_length:]


def patch_moto() -> None:
    """The fixes of the module docstring: failed transactions rolled back in place, tokens
    honoured, Queries narrowed, item operations answered without the shape walk."""
    from moto.dynamodb import models
    from moto.dynamodb.models.table import Table

    real_copy = models.copy

    def deepcopy(value, memo=None):
        if isinstance(value, Table) and getattr(_state, 'in_transaction', False):
            return value   # moto's own rollback puts the table back in its place: a no-op
        return real_copy.deepcopy(value, memo)

    models.copy = types.SimpleNamespace(**{**vars(real_copy), 'deepcopy': deepcopy})
    original = models.DynamoDBBackend.transact_write_items

    def transact_write_items(self, transact_items):
        names = {next(iter(entry.values())).get('TableName') for entry in transact_items}
        saved = [_Saved(self.tables[name], transact_items) for name in names if name in self.tables]
        _state.in_transaction = True
        try:
            return original(self, transact_items)
        except BaseException:
            for entry in saved:
                entry.restore()
            raise
        finally:
            _state.in_transaction = False

    models.DynamoDBBackend.transact_write_items = transact_write_items
    idempotent_transactions()
    narrow_queries()
    plain_json_answers()


# DynamoDB's item operations, whose answers moto holds as the wire's own JSON (attribute values in
# DynamoDB JSON, members named as the API spells them): ``plain_json_answers`` dumps them as they are.
PLAIN_JSON_OPERATIONS = frozenset({
    'GetItem', 'BatchGetItem', 'Query', 'Scan', 'PutItem', 'UpdateItem', 'DeleteItem',
    'BatchWriteItem', 'TransactWriteItems', 'TransactGetItems'})
SHAPED = {'execute_result': None}   # moto's own ActionResult.execute_result, once replaced


def _plain(value: Any) -> Any:
    """``value`` as the JSON protocol sends it: blobs in base64, members that are None left out
    (moto's serializer leaves them out too); TypeError for anything that is not plain JSON."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        import base64  # noqa: PLC0415 - lazy: only blobs need it
        return base64.b64encode(bytes(value)).decode('ascii')
    if isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(type(value).__name__)


def plain_json_answers() -> None:
    """moto writes every answer through a serializer that walks the operation's output shape
    value by value, with several name lookups for each (an item of 40 attributes costs ~1,000
    of them): two thirds of the time of a GetItem on in-process moto, a list of the API 150 ms
    instead of 25 (bench/README.md "The test suite"). For DynamoDB's item operations moto already
    holds the answer as the wire's JSON, so it is dumped as it is: the same body, which
    tests/unit/test_moto_server_answers.py checks against the serializer's for every operation
    and every kind of value. An error, any other operation, or a value that is not plain JSON
    goes through moto's serializer as before."""
    import json

    from moto.core import responses
    if SHAPED['execute_result'] is not None:
        return
    shaped = SHAPED['execute_result'] = responses.ActionResult.execute_result

    def execute_result(self, context):
        if isinstance(self.result, dict) and not isinstance(self, responses.PaginatedResult) and \
                context.operation_model.name in PLAIN_JSON_OPERATIONS and \
                context.service_model.service_name == 'dynamodb' and context.operation_model.output_shape:
            members = context.operation_model.output_shape.members   # what the shape has (moto adds more)
            try:
                body = json.dumps(_plain({k: v for k, v in self.result.items() if k in members}))
            except TypeError:
                return shaped(self, context)
            return 200, {'Content-Type': 'application/x-amz-json-1.0'}, body
        return shaped(self, context)

    responses.ActionResult.execute_result = execute_result


def narrow_queries() -> None:
    """A Query reads only what it can match, as DynamoDB does. moto gathers a Query's candidates
    from ``all_items()``: every item of the table, sorted, for each call; it then keeps those of
    the asked partition and sorts them again by the key asked. Here, inside a Query, that list is
    the asked partition's bucket for a table Query, and the table's items unsorted for an index
    Query (moto sorts what it keeps, by the index's keys). The answer is the same; the cost of
    a table Query no longer grows with the table, and an index Query skips an O(N log N) sort of
    Python-level comparisons (an index read asks 16 shards: kernel/store/table.py INDEX_SHARDS)."""
    import inspect

    from moto.dynamodb.models.table import Table
    real_all_items, real_query = Table.all_items, Table.query
    signature = inspect.signature(real_query)

    def every(self) -> list:
        buckets = list(self.items.values())
        if self.range_key_attr:
            return [item for bucket in buckets for item in bucket.values()]
        return buckets

    def all_items(self):
        asked = getattr(_state, 'query', None)
        if asked is None or asked[0] is not self:
            return real_all_items(self)
        if asked[1] is None:   # an index Query: every item, in any order (or its key's group)
            if INDEX_GROUPS['on'] and asked[2] is not None:
                return _index_group(self, asked[2], every)
            return every(self)
        # a table Query: the partition's bucket (no defaultdict entry made)
        buckets = [self.items[asked[1]]] if asked[1] in self.items else []
        if self.range_key_attr:
            return [item for bucket in buckets for item in bucket.values()]
        return buckets

    def query(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        before = getattr(_state, 'query', None)
        index = bound.arguments.get('index_name')
        conditions = bound.arguments.get('hash_key_conditions') or []
        _state.query = (self, None if index else bound.arguments.get('hash_key'),
                        (index, *conditions[0]) if index and len(conditions) == 1 else None)
        try:
            return real_query(self, *args, **kwargs)
        finally:
            _state.query = before

    Table.all_items, Table.query = all_items, query


# The local server's index Query groups (``main`` turns them on; not the in-process moto of the
# tests, whose state is also copied in directly). moto answers an index Query by testing every
# item of the table; an index read of the API asks 16 shards (kernel/store/table.py
# INDEX_SHARDS), so a list cost 16 passes over the table, and the fuzz and chaos runs, whose
# tables grow to thousands of items, spent most of their time there. Here the items are grouped
# by the index's partition key value once, and the groups serve every index Query until the
# next request that can change an item (``serialized`` moves GENERATION: everything but the
# reads below). moto still filters and sorts what it is given: the answer is the same.
INDEX_GROUPS = {'on': False}
GENERATION = [0]
_groups: dict[tuple[int, str, str], tuple[int, Any, dict]] = {}
READS = frozenset({'Query', 'GetItem', 'BatchGetItem', 'Scan', 'TransactGetItems', 'DescribeTable', 'ListTables',
                   'DescribeTimeToLive', 'DescribeContinuousBackups', 'ListTagsOfResource', 'DescribeEndpoints'})


def _index_group(table, asked: tuple[str, str, Any], every) -> list:
    index, attr, value = asked
    key = (id(table), index, attr)
    cached = _groups.get(key)
    if cached is None or cached[0] != GENERATION[0] or cached[1] is not table:
        groups: dict[tuple[str, str], list] = {}
        for item in every(table):
            found = item.attrs.get(attr)
            if found is not None:
                groups.setdefault((found.type, str(found.value)), []).append(item)
        cached = (GENERATION[0], table, groups)
        _groups[key] = cached
    return list(cached[2].get((value.type, str(value.value)), ()))


def changes_items(environ: dict[str, Any]) -> bool:
    """Whether a request to the local moto can change an item: a DynamoDB call other than a
    read, or moto's own API (reset, state)."""
    target = environ.get('HTTP_X_AMZ_TARGET') or ''
    if target.startswith('DynamoDB_20120810.'):
        return target.split('.', 1)[1] not in READS
    return environ.get('PATH_INFO', '').startswith('/moto-api')


IDEMPOTENCY_WINDOW = 600.0   # seconds, as DynamoDB's ClientRequestToken window


def idempotent_transactions() -> None:
    """TransactWriteItems honours ``ClientRequestToken`` as DynamoDB does (moto ignores it): a
    call repeating the token of one that succeeded within 10 minutes succeeds again without being
    applied twice. Without it, a transaction whose answer was lost (a chaos ``slow`` answer past
    the client's timeout) and that the SDK retried would meet its own writes, which on AWS it
    never does (issue 16)."""
    import json
    import time

    from moto.dynamodb.responses import DynamoHandler
    real = DynamoHandler.transact_write_items
    done: dict[str, tuple[float, str, Any]] = {}

    def transact_write_items(handler):
        token = handler.body.get('ClientRequestToken')
        if not token:
            return real(handler)
        now = time.monotonic()
        for old in [t for t, (at, _, _) in done.items() if now - at > IDEMPOTENCY_WINDOW]:
            del done[old]
        # default=repr: a binary value (bytes) names the request as well as any other
        request = json.dumps(handler.body.get('TransactItems'), sort_keys=True, default=repr)
        if token in done and done[token][1] == request:
            return done[token][2]
        result = real(handler)
        done[token] = (now, request, result)
        return result

    DynamoHandler.transact_write_items = transact_write_items


def serialized(app, lock: threading.Lock | None = None):
    """The WSGI app, one request at a time (the whole body is produced under the lock)."""
    lock = lock or threading.Lock()

    def wrapped(environ, start_response):
        with lock:
            try:
                return list(app(environ, start_response))
            finally:
                if changes_items(environ):
                    GENERATION[0] += 1   # the index Query groups are read again (INDEX_GROUPS)
                if changes_state(environ):
                    DIRTY[0] = True      # the saved state is behind (SavedState)
    return wrapped


# ----------------------------------------------------------------------------- saved state
# `make run` keeps its data across restarts (docs/operations/local-state.md): the server's
# backends are pickled to one file under .local/ and loaded from it on the next start.
SAVED_SERVICES = ('dynamodb', 's3', 'sqs', 'events')
DIRTY = [False]
SQS_READS = frozenset({'ReceiveMessage', 'GetQueueAttributes', 'GetQueueUrl', 'ListQueues', 'ListQueueTags',
                       'ListDeadLetterSourceQueues'})


def changes_state(environ: dict[str, Any]) -> bool:
    """Whether a request can change what the saved state holds. Reads and the pollers' steady
    traffic (stream reads, queue receives: a receive changes only a message's visibility) do
    not, so an idle `make run` never rewrites the file."""
    if environ.get('REQUEST_METHOD') in ('GET', 'HEAD', 'OPTIONS'):
        return False
    service, _, operation = (environ.get('HTTP_X_AMZ_TARGET') or '').partition('.')
    if service == 'DynamoDB_20120810':
        return operation not in READS
    if service.startswith('DynamoDBStreams'):
        return False
    if service == 'AmazonSQS':
        return operation not in SQS_READS
    if service == 'AWSEvents':
        return not operation.startswith(('List', 'Describe'))
    return True


def _picklable_locks() -> None:
    """moto's SQS queues hold locks, which pickle refuses: a saved lock comes back as a new one
    (nothing holds it while the state is saved: saving takes the server's request lock)."""
    import copyreg  # noqa: PLC0415 - lazy: only a server that saves its state
    copyreg.pickle(type(threading.Lock()), lambda _lock: (threading.Lock, ()))
    copyreg.pickle(type(threading.RLock()), lambda _lock: (threading.RLock, ()))


class SavedState:
    """The server's data in one file: the backends of SAVED_SERVICES (every account and region),
    pickled. Why pickle rather than moto's recorder: the recorder replays every request made
    since the first start through the whole server on each start (a DynamoDB transaction of the
    API is one request; 10,000 records are tens of thousands of them), while a pickle loads
    the objects themselves (measured: bench/README.md "make run's saved state").

    Saved ``every`` seconds when a request changed something (``changes_state``) and on SIGTERM,
    under the server's request lock (a consistent snapshot), written beside the file and renamed
    over it (a crash mid-write leaves the previous file whole). Loaded before the server serves.
    The table streams' records are not kept: a restarted stream starts after them, as Lambda's
    checkpoint would (the outbox publisher had read them; records it had not read when the
    server stopped are not published again)."""

    def __init__(self, path: str, lock: threading.Lock, every: float = 2.0) -> None:
        from pathlib import Path  # noqa: PLC0415 - lazy: only a server that saves its state
        self.path = Path(path)
        self.lock = lock
        self.every = every
        self._writing = threading.Lock()
        self._stop = threading.Event()
        _picklable_locks()

    def load(self) -> int:
        """Put the saved backends in place; the number of bytes read (0: no file yet)."""
        import pickle  # noqa: PLC0415 - lazy: only a server that saves its state

        from moto.backends import get_backend
        if not self.path.exists():
            return 0
        blob = self.path.read_bytes()
        gc.disable()   # millions of small objects: the collector's passes tripled the load time
        try:
            saved = pickle.loads(blob)  # noqa: S301 - the server's own file, under .local/ (mode 600)
        finally:
            gc.enable()
        gc.freeze()    # and kept out of every later pass (the server's requests pay none for them)
        for name, accounts in saved.items():
            backends = get_backend(name)
            for account, regions in accounts.items():
                for region, backend in regions.items():
                    dict.__setitem__(backends[account], region, backend)
        return len(blob)

    @staticmethod
    def _streams() -> list[Any]:
        from moto.backends import get_backend
        return [table.stream_shard for regions in get_backend('dynamodb').values() for backend in regions.values()
                for table in backend.tables.values() if getattr(table, 'stream_shard', None) is not None]

    def _pickle(self) -> bytes:
        """The backends, their table streams saved empty (starting after the records they had)."""
        import pickle  # noqa: PLC0415 - lazy: only a server that saves its state

        from moto.backends import get_backend
        shards = [(shard, shard.items, shard.starting_sequence_number) for shard in self._streams()]
        try:
            for shard, items, start in shards:
                shard.starting_sequence_number, shard.items = start + len(items), []
            state = {name: {account: dict(regions) for account, regions in get_backend(name).items()}
                     for name in SAVED_SERVICES}
            gc.disable()
            return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
        finally:
            gc.enable()
            for shard, items, start in shards:
                shard.starting_sequence_number, shard.items = start, items

    def save(self, force: bool = False) -> bool:
        """Write the file if something changed since the last save (or ``force``)."""
        with self._writing:
            with self.lock:
                if not (DIRTY[0] or force):
                    return False
                blob = self._pickle()
                DIRTY[0] = False
            self.path.parent.mkdir(parents=True, exist_ok=True)
            part = self.path.with_name(self.path.name + '.part')
            part.write_bytes(blob)
            part.chmod(0o600)
            part.replace(self.path)
            return True

    def run(self) -> None:
        """The saver thread: the file if something changed, every ``every`` seconds or ten times
        the last save's time, whichever is longer (a save holds the request lock: it takes at
        most a tenth of the server's time, however big the state grows)."""
        pause = self.every
        while not self._stop.wait(pause):
            began = time.monotonic()
            try:
                saved = self.save()
            except Exception as exc:  # noqa: BLE001 - keep serving; the next save tries again
                print(f'moto server: saving {self.path} failed: {exc!r}', file=sys.stderr, flush=True)
                saved = True
            if saved:
                pause = max(self.every, 10 * (time.monotonic() - began))

    def start(self) -> None:
        threading.Thread(target=self.run, name='state-saver', daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        self.save()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument('-H', '--host', default='127.0.0.1')
    parser.add_argument('-p', '--port', type=int, default=5000)
    parser.add_argument('--state', help='the data file: loaded on start, saved while serving and on SIGTERM')
    args = parser.parse_args(argv)
    try:
        settings = chaos.settings_from_env(os.environ)
    except ValueError as err:
        parser.error(str(err))
    os.environ.setdefault('MOTO_PORT', str(args.port))

    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from moto.server import MotoRequestHandler
    from werkzeug.serving import run_simple

    patch_moto()
    INDEX_GROUPS['on'] = True
    serve_quickly()
    lock = threading.Lock()
    saved = SavedState(args.state, lock) if args.state else None
    if saved is not None:
        try:
            saved.load()
        except Exception as exc:  # noqa: BLE001 - any unreadable file: say so and stop
            print(f'moto server: cannot load {args.state}: {exc!r}', file=sys.stderr, flush=True)
            sys.exit(3)
        saved.start()
    app = chaos.Chaos(serialized(DomainDispatcherApplication(create_backend_app), lock), settings)

    def stop(*_: Any) -> None:
        if saved is None:
            sys.exit(0)
        saved.stop()
        sys.stderr.flush()
        # nothing else to finish: the interpreter's teardown of a big state (freeing every
        # object) took seconds more than the save itself
        os._exit(0)
    signal.signal(signal.SIGTERM, stop)

    class Quiet(MotoRequestHandler):
        def log_request(self, code: Any = '-', size: Any = '-') -> None:
            """No access log line: `make run` sends this server's output to /dev/null, and
            formatting and writing one took ~6 % of its time (errors are still logged)."""
    run_simple(args.host, args.port, app, threaded=True, request_handler=Quiet)


def serve_quickly() -> None:
    """moto's server finds the service of each request by listing moto's package folder
    (``backends.list_of_moto_modules``: ~200 ``isdir`` calls, sampled at ~6 % of the server's
    time under the fuzz run). The folder does not change while the server runs: listed once."""
    from moto import backends
    modules = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: modules


if __name__ == '__main__':
    main()
