"""The code's own rules, checked on every `make test` and `make check`: the contracts of
`.importlinter` (front | ops -> features -> kernel -> core, features independent but for declared
edges, AWS only through storage modules, core free of Chalice; docs/architecture.md) and ruff's
rules of `ruff.toml` (imports at the top of modules unless a comment says why)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, 'PYTHONPATH': str(ROOT)})


def test_layer_contracts_are_kept():
    result = _run(str(BIN / 'lint-imports'), '--no-cache')
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'BROKEN' not in result.stdout and ' broken.' in result.stdout


def test_ruff_finds_nothing():
    result = _run(str(BIN / 'ruff'), 'check', '--no-cache', '.')
    assert result.returncode == 0, result.stdout + result.stderr


def test_import_app_loads_no_mcp_module():
    """The MCP connector's types (~0.25 s with mcp_types, ~1.3 s through the SDK's mcp.types)
    load on the first /mcp call, never at the cold start of the REST routes. Of the features, the
    cold start loads their routes (with work's route texts), the authorizer and their families'
    declarations with the shapes they name (pure data and checks, installed into the kernel's
    registry: chalicelib/features/__init__.py)."""
    code = ('import sys, app; print(sorted(m for m in sys.modules if m.split(".")[0] in ("mcp", "mcp_types", '
            '"httpx", "httpx2", "starlette", "anyio") or (m.startswith("chalicelib.features.") and m.count(".") > 2 '
            'and not m.endswith(("routes", ".authorizer", ".declarations", ".route_docs", "_shapes", ".shapes")))))')
    out = _run(sys.executable, '-c', code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == '[]'
