"""The single DynamoDB table, as a pynamodb model, and its key layout.

| item          | pk                          | sk        | indexes                          |
|---------------|-----------------------------|-----------|----------------------------------|
| entity        | ``{family}#{id}``           | ``#``     | tpk/ppk + csk/usk/nsk (see below)|
| unique value  | ``UQ#{family}#{scope}#{field}#{value}`` | ``#`` |                        |
| counter shard | ``CNT#{family}#{tenant}``   | shard no. |                                  |
| user ACL      | ``users#{userId}``          | ``ACL``   | (roles per org; store/credentials)|
| API key       | ``users#{userId}``          | ``KEY#{sha256(key)}`` | (store/credentials.py)|
| key pointer   | ``KEY#{sha256(key)}``       | ``#``     | keys without the user id in them |
| rate window   | ``RL#{subject}#{window}``   | ``#``     | expires by TTL                   |

Entity index attributes (removed when an entity is soft-deleted, so it leaves every list):
  tpk  ``{family}#{tenant}``  tenant partition: organization id, or ``ALL`` for global families
  ppk  ``{family}#P#{projectId}`` (project-scoped) or ``memberships#U#{userId}``
  csk  ``{createdOn}#{id}``   usk ``{updatedOn}#{id}``   nsk name sort key (see name_sort_key)

GSIs: by_created / by_updated / by_name are KEYS_ONLY (deep pages walk keys, then BatchGet the
page); tenant_all and by_parent project everything (filtered lists read items there).
"""
from __future__ import annotations

from functools import lru_cache

from pynamodb.attributes import MapAttribute, NumberAttribute, UnicodeAttribute
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex, KeysOnlyProjection
from pynamodb.models import Model

from chalicelib.core.config import get_config

ENTITY_SK = '#'


def entity_pk(family: str, id_: str) -> str:
    return f'{family}#{id_}'


def tenant_pk(family: str, tenant: str) -> str:
    return f'{family}#{tenant}'


def name_sort_key(value: object, id_: str) -> str:
    """Sort key for ordering by name: missing first, then case-insensitive text, then id.

    ``\\x01`` separates name and id so that "ab" sorts before "ab c" (it is below every
    printable character); the in-memory sort uses the same order (query/sorting.py).
    """
    if value is None or value == '':
        return f'0\x01{id_}'
    # A sort key stops at 1024 bytes: keep at most 300 characters and 900 bytes of the name.
    name = str(value).lower()[:300].encode('utf-8', 'surrogatepass')[:900].decode('utf-8', 'ignore')
    return f'1{name}\x01{id_}'


def _index(name: str, hash_attr: str, range_attr: str, keys_only: bool):
    class Meta:
        index_name = name
        projection = KeysOnlyProjection() if keys_only else AllProjection()
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
        connect_timeout_seconds = 2
        read_timeout_seconds = 8
        max_retry_attempts = 3
        max_pool_connections = 64

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

    by_created = _index('by_created', 'tpk', 'csk', keys_only=True)
    by_updated = _index('by_updated', 'tpk', 'usk', keys_only=True)
    by_name = _index('by_name', 'tpk', 'nsk', keys_only=True)
    tenant_all = _index('tenant_all', 'tpk', 'csk', keys_only=False)
    by_parent = _index('by_parent', 'ppk', 'csk', keys_only=False)


@lru_cache(maxsize=1)
def configure() -> type[Item]:
    """Point the model at the configured table and endpoint (once per process)."""
    cfg = get_config()
    Item.Meta.table_name = cfg.table_name
    Item.Meta.region = cfg.region
    Item.Meta.host = cfg.endpoint_url
    Item._connection = None
    for idx in (Item.by_created, Item.by_updated, Item.by_name, Item.tenant_all, Item.by_parent):
        idx._connection = None
    return Item


def reset() -> None:
    configure.cache_clear()


@lru_cache(maxsize=1)
def boto3_table():
    """The same table through boto3's resource API: list queries pass boto3 condition objects
    (compiled by chalicelib/query/dynamo.py) as FilterExpression."""
    import boto3
    from botocore.config import Config
    cfg = get_config()
    client_config = Config(connect_timeout=2, read_timeout=8, max_pool_connections=64,
                           retries={'max_attempts': 3, 'mode': 'standard'})
    return boto3.resource('dynamodb', region_name=cfg.region, endpoint_url=cfg.endpoint_url,
                          config=client_config).Table(cfg.table_name)


def create_table() -> None:
    """Create the table, its GSIs and TTL if missing (local run, tests, first deploy)."""
    model = configure()
    if not model.exists():
        model.create_table(wait=True, billing_mode='PAY_PER_REQUEST')
        try:
            model._get_connection().connection.client.update_time_to_live(
                TableName=model.Meta.table_name,
                TimeToLiveSpecification={'Enabled': True, 'AttributeName': 'ttl'})
        except Exception:  # TTL is an optimisation (rate windows expire); never block start-up
            pass
