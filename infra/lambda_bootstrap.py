"""A stand-in for Lambda's Python runtime loop, for the deploy rehearsal (infra/rehearsal.py).

Run as ``python3.11 -I -S lambda_bootstrap.py <fd>`` with ``LAMBDA_TASK_ROOT`` (the unpacked
deployment.zip) and ``_HANDLER`` in the environment, as Lambda sets them. It uses the standard
library only, and puts only the task root on ``sys.path``: what the package does not carry
cannot be imported. It imports the handler (the init phase), writes ``{"init_ms"}`` or
``{"init_error"}`` to file descriptor ``<fd>``, then answers one invocation per line of stdin
(``{"event", "trace_id", "timeout_ms"}``) with one line ``{"result", "ms"}`` or ``{"error", ...}``
on that descriptor. The handler's own stdout and stderr (its log lines) go where the parent
sends them. Like Lambda's runtime, it sets ``_X_AMZN_TRACE_ID`` for each invocation.

Not a copy of AWS's runtime interface client (``awslambdaric``): that one speaks HTTP to the
Runtime API of a real Lambda sandbox; this one needs a pipe only, and must run with nothing but
the standard library.
"""
import importlib
import json
import os
import sys
import time
import traceback
import uuid


class Context:
    """What a handler may read of Lambda's context object."""

    def __init__(self, timeout_ms: int) -> None:
        self.function_name = os.environ.get('AWS_LAMBDA_FUNCTION_NAME', '')
        self.function_version = os.environ.get('AWS_LAMBDA_FUNCTION_VERSION', '$LATEST')
        self.memory_limit_in_mb = os.environ.get('AWS_LAMBDA_FUNCTION_MEMORY_SIZE', '')
        self.invoked_function_arn = f'arn:aws:lambda:{os.environ.get("AWS_REGION")}:000000000000:function:' \
                                    f'{self.function_name}'
        self.log_group_name = f'/aws/lambda/{self.function_name}'
        self.log_stream_name = 'rehearsal'
        self.aws_request_id = str(uuid.uuid4())
        self._deadline = time.monotonic() + timeout_ms / 1000

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def _error(exc: BaseException) -> dict:
    return {'error': type(exc).__name__, 'message': str(exc)[:2000],
            'trace': ''.join(traceback.format_exception(exc))[-6000:]}


def main() -> None:
    out = os.fdopen(int(sys.argv[1]), 'w', buffering=1)
    task = os.environ['LAMBDA_TASK_ROOT']
    sys.path.insert(0, task)
    os.chdir(task)
    module_name, _, attribute = os.environ['_HANDLER'].rpartition('.')
    started = time.perf_counter()
    try:
        handler = getattr(importlib.import_module(module_name), attribute)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, as Lambda's init error
        out.write(json.dumps({'init_error': _error(exc)}) + '\n')
        return
    out.write(json.dumps({'init_ms': (time.perf_counter() - started) * 1000}) + '\n')
    for line in sys.stdin:
        request = json.loads(line)
        os.environ['_X_AMZN_TRACE_ID'] = request['trace_id']
        started = time.perf_counter()
        try:
            result = handler(request['event'], Context(request['timeout_ms']))
            answer = {'result': result}
        except BaseException as exc:  # noqa: BLE001 - an invocation error, as Lambda reports it
            answer = _error(exc)
        answer['ms'] = (time.perf_counter() - started) * 1000
        out.write(json.dumps(answer, default=str) + '\n')


if __name__ == '__main__':
    main()
