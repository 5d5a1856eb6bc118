"""The code's own rules, checked on every `make test`: the layer contracts of `.importlinter`
(api -> services -> store | query -> domain -> core; services reach AWS only through store/)
and ruff's rules of `ruff.toml` (imports at the top of modules unless a comment says why)."""
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
