"""The kernel: the generic engine every resource family uses, and nothing feature-specific.

* ``registry`` (with ``fields``, ``models``, ``shapes/``, ``embeds``): what a family's declaration
  says, and the families installed (each feature declares its own: chalicelib/features/*/declarations.py).
* ``crud`` (with ``unlocked``, ``records``, ``references``, ``parents``, ``hooks``): create, get,
  update and delete with the contract's update semantics and locking; the items a write touches.
* ``access``: the one table of roles and permissions and the checks every path calls.
* ``listing`` (with ``filtering``, ``query/``, ``embedding``, ``org_reads``): lists, filters,
  sort, paging and embedded references.
* ``store/``: the single DynamoDB table (the only place holding a client, an index name or a key
  condition).
* ``http/``: request parsing, route policies, the generic REST routes, the OpenAPI document, /docs.

May import ``chalicelib.core`` only: never a feature (features plug in through ``hooks``).
"""
