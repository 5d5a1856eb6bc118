"""The schemathesis run (`make fuzz`) is part of the suite, so CI runs it with `make test`:
zero 5xx and zero responses that break the served /v3/api-docs, on a real local server.

Here with 5 random cases per operation (about 2 minutes on CI's 2 cores, still rotating 40 keys
across a minute boundary; it was 8, ~3 minutes, until `make test` passed its 15 minutes at the
stop of issues 48-50: bench/README.md "The suite at the stop of issues 48-50") so `make test`
stays within its 15 minutes; `make fuzz` runs 15 per operation and FUZZ_MAX_EXAMPLES overrides
both."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_schemathesis_finds_nothing():
    env = {**os.environ, 'PYTHONPATH': str(ROOT)}
    env.pop('AWS_ENDPOINT_URL', None)
    env.setdefault('FUZZ_MAX_EXAMPLES', '5')
    run = subprocess.run([sys.executable, str(ROOT / 'tests' / 'fuzz_api.py')], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=1200)
    tail = '\n'.join((run.stdout + run.stderr).splitlines()[-60:])
    print(tail)
    assert run.returncode == 0, tail
