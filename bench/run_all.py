"""`make bench`: every benchmark in turn; each prints its own table against a floor measured in
the same run. Figures, never pass/fail."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = (
    'bench_foundation.py',
    'bench_list.py',
    'bench_write_cost.py',
    'bench_family_put.py',
    'bench_bridges.py',
    'bench_work.py',
    'bench_mcp.py',
    'bench_documents.py',
    'bench_embedding.py',
    'bench_request_path.py',
    'bench_store_fs.py',
    'bench_lambda_package.py',
    'bench_parsing.py',
    'bench_parse_stage.py',
    'bench_extraction.py',
    'bench_extraction_unseen.py',
    'bench_family_reads.py',
)
for script in SCRIPTS:
    print(f'\n===== {script} =====', flush=True)
    subprocess.run([sys.executable, os.path.join(HERE, script)], check=True)
