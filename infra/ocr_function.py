"""The OCR function: a container-image Lambda (infra/ocr/Dockerfile) on its own queue.

The zip-packaged worker has no Tesseract (a native program with its model, not a wheel): a page
without a text layer is handed to this function through the OCR queue (``OCR_QUEUE_NAME``), and
the function runs the same SQS worker handler (``chalicelib.front.handlers.ocr_batch``) with
``ocr=True`` (docs/operations/parsing.md). Chalice packages only zip functions, so infra/app.py
adds this one to the template beside Chalice's: ``PackageType: Image``, the image given at deploy
time as the ``OcrImageUri`` parameter (an ECR URI, pushed by ``make ocr-image`` and
``docker push``); infra/app.py then gives it what it gives every event handler (fixed name, log
group, role from infra/iam.py with its queue, errors alarm, tracing, the stage's environment).

Its queue and dead-letter queue are in the data stack (infra/stack.py ``OcrStarts``), the
visibility timeout 6 x this function's timeout, like the activity queue's.
"""
from __future__ import annotations

import copy
from typing import Any

from infra.names import Names

LOGICAL_ID = 'OcrWorker'
HANDLER = 'chalicelib.front.handlers.ocr_batch'
IMAGE_PARAMETER = 'OcrImageUri'
TIMEOUT_SECONDS = 300        # a message's pages: Tesseract takes ~2-5 s a page at 300 dpi on one core
MEMORY_MB = 2048             # one rendered page (~9 Mpx grey) + Tesseract (~300 MB); 2 GB also buys CPU
BATCH_SIZE = 1               # one message (a page range) per invocation: each gets the whole timeout
MAX_CONCURRENCY = 10         # OCR is the costly kind of work: bounded apart from the worker's 20
QUEUE_VISIBILITY_TIMEOUT = 6 * TIMEOUT_SECONDS

PARAMETER = {
    'Type': 'String',
    'AllowedPattern': (r'^[0-9]{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/[a-z0-9._/-]+'
                       r'(:[\w.-]+|@sha256:[0-9a-f]{64})$'),
    'Description': 'The OCR function\'s container image in ECR (infra/ocr/Dockerfile; make ocr-image, then docker '
                   'push): <account>.dkr.ecr.<region>.amazonaws.com/<repository>@sha256:<digest>',
}


def function(stage: str, environment: dict[str, Any]) -> dict[str, Any]:
    """The SAM function of the OCR worker; ``environment`` is the stage's (what Chalice gave its own)."""
    queue = Names(stage).ocr_queue
    return {
        'Type': 'AWS::Serverless::Function',
        'Properties': {
            'PackageType': 'Image',
            'ImageUri': {'Ref': IMAGE_PARAMETER},
            'ImageConfig': {'Command': [HANDLER]},
            'Architectures': ['x86_64'],
            'MemorySize': MEMORY_MB,
            'Timeout': TIMEOUT_SECONDS,
            'Environment': {'Variables': copy.deepcopy(environment)},
            'Events': {'OcrStarts': {'Type': 'SQS', 'Properties': {
                'Queue': {'Fn::Sub': f'arn:${{AWS::Partition}}:sqs:${{AWS::Region}}:${{AWS::AccountId}}:{queue}'},
                'BatchSize': BATCH_SIZE,
                'ScalingConfig': {'MaximumConcurrency': MAX_CONCURRENCY},
            }}},
        },
    }
