"""GET /api/health: for load balancers and deploy checks. No credential, not rate limited.
200 ``{status: "ok", version}`` when DynamoDB answers, 503 (the usual error body) otherwise;
it reveals nothing else."""
from __future__ import annotations

from chalice import Blueprint

from chalicelib.kernel.http import policy
from chalicelib.kernel.http.docmeta import describe, schema
from chalicelib.kernel.http.request import ANY_CONTENT

bp = Blueprint(__name__)


@bp.route(policy.public('/api/health'), methods=['GET'], name='getHealth', content_types=ANY_CONTENT)
def health():
    from chalicelib.kernel import health as service  # noqa: PLC0415 - lazy: cold start
    return service.check()


describe('getHealth', summary='Is the service up (storage answers)?', tags=['health'],
         description='No credential, not rate limited. 503 (error body) when storage does not answer.',
         responses={200: schema('Health', {
             'type': 'object', 'required': ['status', 'version'],
             'properties': {'status': {'type': 'string', 'enum': ['ok']},
                            'version': {'type': 'string', 'description': 'the deployed build'}}})},
         errors=[503])
