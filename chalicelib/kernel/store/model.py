"""The single DynamoDB table as a pynamodb model, and the clients that reach it.

Nothing outside ``chalicelib/kernel/store`` imports this module (an import-linter contract says so):
services name what they want through the access patterns of ``kernel/store/table.py`` and the write
operations of ``kernel/store/repository.py``.

One client style per purpose:

* **the pynamodb model** (``Item``) for entity items: typed attributes, condition
  expressions and TransactWriteItems built from the same attribute objects, so a write and
  its conditions cannot disagree on an attribute name;
* **the low-level botocore client** under that model (``client()``) where a call's exact
  shape matters more than typing: the request gate's UpdateItem (authentication and rate
  accounting, ``ReturnValues``/``ReturnValuesOnConditionCheckFailure``) and the BatchGetItem
  read beside it (features/identity/gate.py), both on every request's hot path, and raw-item reads that
  skip pynamodb's deserialisation;
* **the boto3 Table resource** (``boto3_table()``) for operator tools, benches and tests that
  want boto3's plain values; no request path uses it (lists read keys with the low-level
  client: kernel/store/table.py). It is created on first use, never at import.

All three share the endpoint, region and timeouts of the configuration (short timeouts and
bounded retries: a request must fail inside API Gateway's 29 s, never hang).
"""
from __future__ import annotations

from functools import lru_cache

from pynamodb.attributes import MapAttribute, NumberAttribute, UnicodeAttribute
from pynamodb.indexes import GlobalSecondaryIndex, KeysOnlyProjection
from pynamodb.models import Model

from chalicelib.core.config import get_config
from chalicelib.kernel.registry import INDEX_SLOTS  # one pair of GSIs per slot below

CONNECT_TIMEOUT = 2
READ_TIMEOUT = 8
MAX_ATTEMPTS = 3
MAX_POOL = 64


def _index(name: str, hash_attr: str, range_attr: str):
    """A KEYS_ONLY GSI (every index of the table is: docs/scale.md "Projections")."""
    class Meta:
        index_name = name
        projection = KeysOnlyProjection()
    attrs = {
        'Meta': Meta,
        hash_attr: UnicodeAttribute(hash_key=True),
        range_attr: UnicodeAttribute(range_key=True),
    }
    return type(f'{name}_index', (GlobalSecondaryIndex,), attrs)()


class Item(Model):
    class Meta:
        table_name = 'platform-local'
        region = 'us-east-1'
        billing_mode = 'PAY_PER_REQUEST'
        # Fail fast inside API Gateway's 29 s: a stuck connection must not hold a request.
        connect_timeout_seconds = CONNECT_TIMEOUT
        read_timeout_seconds = READ_TIMEOUT
        max_retry_attempts = MAX_ATTEMPTS
        max_pool_connections = MAX_POOL

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    kind = UnicodeAttribute(null=True)
    data = MapAttribute(null=True)
    seq = NumberAttribute(null=True)
    org = UnicodeAttribute(null=True)
    tpk = UnicodeAttribute(null=True)
    ppk = UnicodeAttribute(null=True)
    csk = UnicodeAttribute(null=True)
    usk = UnicodeAttribute(null=True)
    nsk = UnicodeAttribute(null=True)
    cnt = NumberAttribute(null=True)
    ref = UnicodeAttribute(null=True)
    ttl = NumberAttribute(null=True)
    # equality-index slots (kernel/store/table.py value_pk): x{n} = '{family}#{tenant}#{field}={value}'
    x1 = UnicodeAttribute(null=True)
    x2 = UnicodeAttribute(null=True)
    x3 = UnicodeAttribute(null=True)
    x4 = UnicodeAttribute(null=True)
    x5 = UnicodeAttribute(null=True)
    ixv = NumberAttribute(null=True)   # 1: the item's indexed values are keyed and counted
    gv = NumberAttribute(null=True)    # 1: the record counts in its parents' guard shards (kernel/parents.py)
    dead = NumberAttribute(null=True)  # a closed guard shard (kernel/parents.py) or tally (tally.py)
    obx = MapAttribute(null=True)      # the domain event of the last one-UpdateItem write (kernel/unlocked.py)
    tb = UnicodeAttribute(null=True)   # the tally an item was put under (features/events/tally.py)
    cb = NumberAttribute(null=True)    # a closed tally's counted ids, one bit per position (tally.py)

    # Every index is KEYS_ONLY (docs/scale.md "Projections"): an entry is the record's keys, so a
    # write that changes no index key writes no index entry, and a new one costs 1 WCU, whatever
    # the record's size. Reads take the keys, then BatchGet the records they need. (tenant_all
    # and by_parent, ALL projections of the same keys, were dropped: 2 WCU per entry per write.)
    by_created = _index('by_created', 'tpk', 'csk')
    by_updated = _index('by_updated', 'tpk', 'usk')
    by_name = _index('by_name', 'tpk', 'nsk')
    parent_keys = _index('parent_keys', 'ppk', 'csk')
    # one per equality-index slot: the records with one value of one field, by createdOn
    # (KEYS_ONLY: a page walks keys, then BatchGets the page). None by updatedOn: such an entry
    # moves on every write of the record, 2 WCU per indexed value of a plain PUT, so a filtered
    # list in another order reads the value's records (docs/scale.md "Value indexes by createdOn only").
    x1_created = _index('x1_created', 'x1', 'csk')
    x2_created = _index('x2_created', 'x2', 'csk')
    x3_created = _index('x3_created', 'x3', 'csk')
    x4_created = _index('x4_created', 'x4', 'csk')
    x5_created = _index('x5_created', 'x5', 'csk')


INDEXES = ('by_created', 'by_updated', 'by_name', 'parent_keys',
           *(f'x{n}_created' for n in range(1, INDEX_SLOTS + 1)))


@lru_cache(maxsize=1)
def configure() -> type[Item]:
    """Point the model at the configured table and endpoint (once per process)."""
    cfg = get_config()
    Item.Meta.table_name = cfg.table_name
    Item.Meta.region = cfg.region
    Item.Meta.host = cfg.endpoint_url
    Item.Meta.read_timeout_seconds = cfg.read_timeout(READ_TIMEOUT)
    Item._connection = None
    for name in INDEXES:
        getattr(Item, name)._connection = None
    # the table client's session without botocore's whole endpoint table: ~50 ms off a cold
    # start (kernel/store/endpoints.py). pynamodb keeps one session per thread and makes the client
    # once, from the session of the thread that asks first: this one, unless another thread
    # gets there first (it then decodes botocore's full table, as before).
    from chalicelib.kernel.store import endpoints  # noqa: PLC0415 - lazy: with the model
    Item._get_connection().connection._local.session = endpoints.session()
    return Item


def client():
    """The botocore DynamoDB client under the model (shares its connection pool)."""
    return configure()._get_connection().connection.client


def table_name() -> str:
    return configure().Meta.table_name


@lru_cache(maxsize=1)
def boto3_table():
    """The same table through boto3's resource API (list queries with boto3 conditions)."""
    import boto3  # noqa: PLC0415 - lazy: the resource API costs ~100 ms; only lists need it
    from botocore.config import Config  # noqa: PLC0415 - lazy, with boto3
    cfg = get_config()
    client_config = Config(connect_timeout=CONNECT_TIMEOUT, read_timeout=cfg.read_timeout(READ_TIMEOUT),
                           max_pool_connections=MAX_POOL,
                           retries={'max_attempts': MAX_ATTEMPTS, 'mode': 'standard'})
    return boto3.resource('dynamodb', region_name=cfg.region, endpoint_url=cfg.endpoint_url,
                          config=client_config).Table(cfg.table_name)


def reset() -> None:
    """Forget the configured clients (tests change the environment between cases)."""
    configure.cache_clear()
    boto3_table.cache_clear()


def create_table() -> None:
    """Create the table, its GSIs and TTL if missing (local run, tests, first deploy)."""
    model = configure()
    if model.exists():
        return
    model.create_table(wait=True, billing_mode='PAY_PER_REQUEST')
    try:
        client().update_time_to_live(TableName=model.Meta.table_name,
                                     TimeToLiveSpecification={'Enabled': True, 'AttributeName': 'ttl'})
    except Exception:  # noqa: BLE001 - TTL is an optimisation (rate windows expire); never block start-up
        pass
