"""The invariant checker as a test fixture: ``pytestmark = pytest.mark.usefixtures('table_invariants')``
in a module runs `chalicelib.ops.check_table` over the in-process moto table after each of its
tests (fault and concurrency tests: nothing they do may leave the table inconsistent)."""
from __future__ import annotations

import pytest


@pytest.fixture
def table_invariants(aws):
    yield
    from chalicelib.kernel.store.model import configure
    from chalicelib.ops import check_table
    if not configure().exists():
        return   # the test made no table (a unit test in the module)
    violations, snap = check_table.run()
    assert not violations, check_table.report(violations, snap, check_table.CHECKS)
