"""`make run`: moto server on loopback (unless AWS_ENDPOINT_URL points elsewhere), AWS
resources, bootstrap admin, then the API on http://127.0.0.1:${PORT:-8000}. Ctrl-C stops all."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def start_moto() -> tuple[subprocess.Popen, str]:
    port = int(os.environ.get('MOTO_PORT') or _free_port())
    proc = subprocess.Popen([sys.executable, '-m', 'localdev.moto_server', '-H', '127.0.0.1', '-p', str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f'http://127.0.0.1:{port}'
    import urllib.request
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f'{url}/moto-api/', timeout=1)
            return proc, url
        except Exception:  # noqa: BLE001 - not up yet
            if proc.poll() is not None:
                raise SystemExit('moto server failed to start') from None
            time.sleep(0.1)
    proc.kill()
    raise SystemExit('moto server did not start within 30 s')


def prepare_environment() -> subprocess.Popen | None:
    os.environ.setdefault('AWS_DEFAULT_REGION', 'us-east-1')
    moto = None
    if not os.environ.get('AWS_ENDPOINT_URL'):
        os.environ.setdefault('AWS_ACCESS_KEY_ID', 'local')
        os.environ.setdefault('AWS_SECRET_ACCESS_KEY', 'local')
        moto, url = start_moto()
        os.environ['AWS_ENDPOINT_URL'] = url
    return moto


def create_resources() -> None:
    import boto3

    from chalicelib.core.config import get_config
    from chalicelib.store.table import ensure_table
    cfg = get_config()
    ensure_table()
    s3 = boto3.client('s3', region_name=cfg.region, endpoint_url=cfg.endpoint_url)
    try:
        s3.create_bucket(Bucket=cfg.bucket_name)
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass
    sqs = boto3.client('sqs', region_name=cfg.region, endpoint_url=cfg.endpoint_url)
    dlq = sqs.create_queue(QueueName=f'{cfg.activity_queue_name}-dlq')['QueueUrl']
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=['QueueArn'])['Attributes']['QueueArn']
    import json
    sqs.create_queue(QueueName=cfg.activity_queue_name, Attributes={
        'RedrivePolicy': json.dumps({'deadLetterTargetArn': dlq_arn, 'maxReceiveCount': '5'})})


def main() -> None:
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    moto = prepare_environment()
    try:
        create_resources()
        from chalicelib.services.bootstrap import bootstrap
        result = bootstrap(api_key=os.environ.get('PLATFORM_ADMIN_API_KEY') or None)
        local = Path(os.environ.get('LOCAL_STATE_DIR') or ROOT / '.local')
        local.mkdir(exist_ok=True)
        key_file = local / 'admin-api-key'
        if result['apiKey'] and not os.environ.get('PLATFORM_ADMIN_API_KEY'):
            key_file.write_text(result['apiKey'] + '\n')
            key_file.chmod(0o600)
            print(f'admin API key (shown once, also in {key_file}): {result["apiKey"]}')
        elif os.environ.get('PLATFORM_ADMIN_API_KEY'):
            print('admin API key: the value of PLATFORM_ADMIN_API_KEY')
        from app import app
        from localdev.server import serve
        port = int(os.environ.get('PORT') or 8000)
        server = serve(app, '127.0.0.1', port)
        print(f'platform API on http://127.0.0.1:{port}  (storage: {os.environ["AWS_ENDPOINT_URL"]})', flush=True)
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
    finally:
        if moto is not None:
            moto.terminate()
            try:
                moto.wait(timeout=5)
            except subprocess.TimeoutExpired:
                moto.kill()


if __name__ == '__main__':
    main()
