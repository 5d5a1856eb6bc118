"""The schemathesis run (`make fuzz`) is part of the suite, so CI runs it with `make test`:
zero 5xx and zero responses that break the served /v3/api-docs, on a real local server.

Here with 8 random cases per operation and 25 stateful scenarios (about 2 minutes, still rotating
40 keys across a minute boundary) so `make test` stays within its 15 minutes; `make fuzz` runs 15
cases per operation and 80 stateful scenarios (the stateful phase took ~165 s of the run's ~240 s
at 80: bench/README.md "The suite at this stop"). FUZZ_MAX_EXAMPLES and FUZZ_STATEFUL_EXAMPLES
override both."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_schemathesis_finds_nothing():
    env = {**os.environ, 'PYTHONPATH': str(ROOT)}
    env.pop('AWS_ENDPOINT_URL', None)
    env.setdefault('FUZZ_MAX_EXAMPLES', '8')
    env.setdefault('FUZZ_STATEFUL_EXAMPLES', '25')
    run = subprocess.run([sys.executable, str(ROOT / 'tests' / 'fuzz_api.py')], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=1200)
    tail = '\n'.join((run.stdout + run.stderr).splitlines()[-60:])
    print(tail)
    assert run.returncode == 0, tail
