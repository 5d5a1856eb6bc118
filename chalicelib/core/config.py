"""Configuration, read once from the environment (set by .chalice/config.json on Lambda and
by localdev/ when running locally)."""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from functools import lru_cache

from chalicelib.core import limits

log = logging.getLogger('platform-api.config')  # a child of the service logger (core/observability.py)


@dataclass(frozen=True)
class Config:
    table_name: str
    bucket_name: str
    activity_queue_name: str
    region: str
    endpoint_url: str | None
    public_url: str | None   # the production URL listed in /v3/api-docs' servers; unset: not listed
    rate_limit_per_minute: int
    rate_limit_burst_per_second: int
    internal_service_token: str | None
    jwt_issuer: str | None
    jwt_audience: str | None
    jwt_jwks_url: str | None
    counter_shards: int
    usage_plan_id: str | None = None        # API Gateway usage plan that per-key gateway keys join
    gateway_shared_key: str | None = None   # gateway key value for callers without a per-key one
    # host names the egress fence lets reach private addresses (development and tests only)
    egress_private_host_allowlist: frozenset[str] = frozenset()
    # observability (core/observability.py)
    service_name: str = 'platform-api'
    log_level: str = 'INFO'
    metrics_enabled: bool = False
    metrics_namespace: str = 'PlatformApi'
    tracing_enabled: bool = False
    app_version: str = 'local'
    # Per-user ceiling over all of a user's API keys (and bearer tokens), on top of the per-key
    # figures above (features/identity/ratelimit.py).
    rate_limit_user_per_minute: int = 300
    rate_limit_user_burst_per_second: int = 60
    # How long a write may keep retrying a throttled or failing table before answering 503.
    store_retry_budget_seconds: float = 2.0
    # How long an AWS client (DynamoDB, S3, SQS, EventBridge) waits for an answer before giving
    # up on it; unset: each client's own (DynamoDB, SQS and EventBridge 8 s, S3 20 s). The chaos
    # run of `make test` sets 2 s, its slow answers taking 3 (docs/operations/chaos-runs.md).
    client_read_timeout_seconds: float | None = None
    # Identity provider keys older than this stop being trusted when refreshing them keeps
    # failing (core/jwt_verify.py).
    jwt_keys_max_age_seconds: int = 86_400
    # Longest support-access grant an organization manager may make (features/identity/organizations.py).
    support_access_max_days: int = 30
    # service bridges (features/bridges/proxy.py): total deadline and response cap of one call
    bridge_timeout_seconds: float = 30.0
    bridge_max_bytes: int = limits.OUTBOUND_MAX_BYTES
    # organization secrets (features/bridges/secrets.py): platform/<stage>/org/<orgId>/<name>, cached briefly
    org_secrets_prefix: str = 'platform/local/org/'
    secret_cache_seconds: float = 30.0
    # key of the HMAC that turns a UI client's address into clientIpHash (features/events/ui_events.py)
    client_ip_hash_key: str | None = None
    # `make run`'s admin key file (localdev/run.py sets LOCAL_ADMIN_KEY_FILE): an unknown key's
    # 401 names it (features/identity/service.py invalid_key); unset on AWS
    local_key_file: str | None = None
    # work orchestration (features/work/service.py): the domain-event bus
    event_bus_name: str = 'platform-local'
    # the activity queue's redrive maxReceiveCount (infra/stack.py MAX_RECEIVE_COUNT): a message
    # failing on that receive goes to the dead-letter queue (the DlqSends metric)
    activity_max_receive_count: int = 5
    # the per-organization in-flight cap (features/work/inflight.py; docs/operations/worker.md
    # "Fairness between organizations"): messages of one organization worked at once on the
    # activity queue (half its event source's MaximumConcurrency, infra/app.py) and on the OCR
    # queue (one big document's ranges in flight, FanOut.in_flight: 8 of infra/ocr_function.py's
    # 10, so one document is not slowed and a burst leaves 2 free); 0: no cap. A message over it is sent again,
    # delayed org_inflight_delay_seconds, twice as long each time it is (at most 900 s: SQS's)
    org_inflight_cap: int = 10
    org_ocr_inflight_cap: int = 8
    org_inflight_delay_seconds: int = 5
    # the MCP tool connector at <basePath>/mcp (features/mcp/): off unless MCP_ENABLED;
    # mcp_public_url is the resource identifier bearer tokens must carry in their audience
    mcp_enabled: bool = False
    mcp_public_url: str | None = None
    mcp_allowed_origins: frozenset[str] = frozenset()
    # documents (features/documents/service.py, docs/api/documents.md): upload sessions and content links
    upload_max_bytes: int = 5 * 2 ** 30
    upload_session_seconds: int = 86_400
    small_upload_max_bytes: int = limits.SMALL_UPLOAD_MAX_BYTES
    content_url_seconds: int = 300
    # the OCR function's queue (infra/stack.py OcrStarts; docs/operations/parsing.md): pages
    # without a text layer go there from the zip-packaged worker, which has no Tesseract
    ocr_queue_name: str = 'platform-local-ocr-starts'
    # the time budget of one request (core/budget.py, docs/api/limits.md); on Lambda also capped
    # by the invocation's remaining time, and never above API Gateway's 29 s
    request_budget_seconds: float = 8.0

    def read_timeout(self, default: float) -> float:
        """The read timeout of an AWS client whose own is ``default`` (client_read_timeout_seconds)."""
        return self.client_read_timeout_seconds or default


def _int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    return int(raw) if raw not in (None, '') else default


def _flag(name: str) -> bool:
    return os.environ.get(name, '').strip().lower() in ('1', 'true', 'yes', 'on')


def _float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    return float(raw) if raw not in (None, '') else default


def _host_allowlist(name: str) -> frozenset[str]:
    """Comma-separated exact host names, compared lowercased and without a trailing dot (an IPv6
    literal may be written with or without brackets). An entry with ``*`` or ``/`` would be a
    wildcard or a range, which this setting does not have: it is ignored with a warning, so a
    mistaken entry opens nothing and does not stop the service."""
    hosts: set[str] = set()
    for entry in os.environ.get(name, '').split(','):
        host = entry.strip().lower().rstrip('.')
        if host.startswith('[') and host.endswith(']'):
            host = host[1:-1]
        if not host:
            continue
        if '*' in host or '/' in host:
            log.warning('%s: ignoring %r (exact host names only, no wildcards or ranges)', name, entry)
            continue
        hosts.add(host)
    return frozenset(hosts)


@lru_cache(maxsize=1)
def get_config() -> Config:
    env = os.environ
    per_minute = _int('RATE_LIMIT_PER_MINUTE', 100)
    burst = _int('RATE_LIMIT_BURST_PER_SECOND', 20)
    return Config(
        table_name=env.get('TABLE_NAME', 'platform-local'),
        bucket_name=env.get('BUCKET_NAME', 'platform-local-documents'),
        activity_queue_name=env.get('ACTIVITY_QUEUE_NAME', 'platform-local-activity-starts'),
        ocr_queue_name=env.get('OCR_QUEUE_NAME', 'platform-local-ocr-starts'),
        region=env.get('AWS_REGION') or env.get('AWS_DEFAULT_REGION') or 'us-east-1',
        endpoint_url=env.get('AWS_ENDPOINT_URL') or None,
        public_url=(env.get('PUBLIC_API_URL') or '').strip().rstrip('/') or None,
        rate_limit_per_minute=per_minute,
        rate_limit_burst_per_second=burst,
        internal_service_token=env.get('INTERNAL_SERVICE_TOKEN') or None,
        jwt_issuer=env.get('AUTH_JWT_ISSUER') or None,
        jwt_audience=env.get('AUTH_JWT_AUDIENCE') or None,
        jwt_jwks_url=env.get('AUTH_JWT_JWKS_URL') or None,
        counter_shards=_int('COUNTER_SHARDS', 144),   # docs/scale.md: one write in 144 per shard
        usage_plan_id=env.get('USAGE_PLAN_ID') or None,
        gateway_shared_key=env.get('GATEWAY_SHARED_USAGE_KEY') or None,
        egress_private_host_allowlist=_host_allowlist('BRIDGE_EGRESS_PRIVATE_HOST_ALLOWLIST'),
        service_name=env.get('POWERTOOLS_SERVICE_NAME') or 'platform-api',
        log_level=(env.get('LOG_LEVEL') or env.get('POWERTOOLS_LOG_LEVEL') or 'INFO').upper(),
        metrics_enabled=_flag('METRICS_ENABLED'),
        metrics_namespace=env.get('METRICS_NAMESPACE') or 'PlatformApi',
        tracing_enabled=_flag('TRACING_ENABLED'),
        app_version=env.get('APP_VERSION') or 'local',
        # unset: three keys' worth (the per-key figure stays the contract's headline)
        rate_limit_user_per_minute=_int('RATE_LIMIT_USER_PER_MINUTE', 3 * per_minute),
        rate_limit_user_burst_per_second=_int('RATE_LIMIT_USER_BURST_PER_SECOND', 3 * burst),
        store_retry_budget_seconds=_float('STORE_RETRY_BUDGET_SECONDS', 2.0),
        client_read_timeout_seconds=_float('CLIENT_READ_TIMEOUT_SECONDS', 0.0) or None,
        jwt_keys_max_age_seconds=_int('AUTH_JWT_KEYS_MAX_AGE_SECONDS', 86_400),
        support_access_max_days=_int('SUPPORT_ACCESS_MAX_DAYS', 30),
        bridge_timeout_seconds=_float('BRIDGE_PROXY_TIMEOUT_SECONDS', 30.0),
        bridge_max_bytes=_int('BRIDGE_PROXY_MAX_BYTES', limits.OUTBOUND_MAX_BYTES),
        org_secrets_prefix=env.get('ORG_SECRETS_PREFIX') or 'platform/local/org/',
        secret_cache_seconds=_float('ORG_SECRET_CACHE_SECONDS', 30.0),
        client_ip_hash_key=env.get('CLIENT_IP_HASH_KEY') or None,
        local_key_file=env.get('LOCAL_ADMIN_KEY_FILE') or None,
        event_bus_name=env.get('EVENT_BUS_NAME') or 'platform-local',
        activity_max_receive_count=_int('ACTIVITY_MAX_RECEIVE_COUNT', 5),
        org_inflight_cap=_int('ORG_INFLIGHT_CAP', 10),
        org_ocr_inflight_cap=_int('ORG_OCR_INFLIGHT_CAP', 8),
        org_inflight_delay_seconds=_int('ORG_INFLIGHT_DELAY_SECONDS', 5),
        mcp_enabled=_flag('MCP_ENABLED'),
        mcp_public_url=(env.get('MCP_PUBLIC_URL') or '').strip() or None,
        mcp_allowed_origins=frozenset(o.strip().rstrip('/').lower()
                                      for o in env.get('MCP_ALLOWED_ORIGINS', '').split(',') if o.strip()),
        upload_max_bytes=_int('UPLOAD_MAX_BYTES', 5 * 2 ** 30),
        upload_session_seconds=_int('UPLOAD_SESSION_SECONDS', 86_400),
        small_upload_max_bytes=_int('SMALL_UPLOAD_MAX_BYTES', limits.SMALL_UPLOAD_MAX_BYTES),
        content_url_seconds=_int('CONTENT_URL_SECONDS', 300),
        request_budget_seconds=_float('REQUEST_BUDGET_SECONDS', 8.0),
    )


def reset_config() -> None:
    """Tests change the environment; they call this to re-read it."""
    get_config.cache_clear()
