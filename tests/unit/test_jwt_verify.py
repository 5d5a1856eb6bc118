"""core/jwt_verify.py against keys this test generates (RSA and EC), served as a JWKS document
by a real HTTP server on 127.0.0.1. Also home of the signing helpers the API tests reuse."""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from chalicelib.core import jwt_verify

ISSUER = 'https://idp.example.test/'
AUDIENCE = 'platform-api'
ROOT = Path(__file__).resolve().parents[2]


def subject_of(email: str | None) -> str:
    """The identity provider's subject of the account holding ``email`` (stable per address)."""
    if email is None:
        return 'idp|' + uuid.uuid4().hex[:8]
    return 'idp|' + hashlib.sha256(email.strip().lower().encode()).hexdigest()[:16]


class Signer:
    """A signing key of the identity provider (or of an impostor)."""

    def __init__(self, alg: str = 'RS256', kid: str | None = None) -> None:
        self.alg = alg
        self.kid = kid or f'{alg.lower()}-{uuid.uuid4().hex[:8]}'
        if alg == 'RS256':
            self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            self._jwk_alg = jwt.algorithms.RSAAlgorithm
        else:
            self.private = ec.generate_private_key(ec.SECP256R1())
            self._jwk_alg = jwt.algorithms.ECAlgorithm

    def jwk(self) -> dict:
        data = json.loads(self._jwk_alg.to_jwk(self.private.public_key()))
        data.update(kid=self.kid, use='sig', alg=self.alg)
        return data

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(serialization.Encoding.PEM,
                                                      serialization.PublicFormat.SubjectPublicKeyInfo)

    def token(self, email: str | None = 'someone@example.com', *, kid: str | None = '__own__',
              **claims) -> str:
        """A token of the identity provider's account for ``email``: the same subject for the
        same address (whichever signer), the address verified; claims override either."""
        now = int(time.time())
        payload = {'iss': ISSUER, 'aud': AUDIENCE, 'iat': now, 'nbf': now, 'exp': now + 300,
                   'sub': subject_of(email)}
        if email is not None:
            payload['email'] = email
            payload['email_verified'] = True
        payload.update(claims)
        payload = {k: v for k, v in payload.items() if v is not None}
        headers = {} if kid is None else {'kid': self.kid if kid == '__own__' else kid}
        return jwt.encode(payload, self.private, algorithm=self.alg, headers=headers)


class JwksServer:
    """The identity provider's JWKS endpoint: http.server on 127.0.0.1, in a thread."""

    def __init__(self, *signers: Signer) -> None:
        self.signers = list(signers)
        self.hits = 0
        self.fail = False
        self.delay = 0.0                      # seconds each answer waits (a slow provider)
        self.asked = threading.Event()        # set when a request arrives
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's naming
                server.hits += 1
                server.asked.set()
                time.sleep(server.delay)
                if server.fail:
                    self.send_response(503)
                    self.end_headers()
                    return
                body = json.dumps({'keys': [s.jwk() for s in server.signers]}).encode()
                self.send_response(200)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):  # quiet
                pass

        self._httpd = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        # shutdown() waits for the loop's next poll: 0.5 s by default, on every test that closes one
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={'poll_interval': 0.05},
                                        daemon=True)
        self._thread.start()
        self.url = f'http://127.0.0.1:{self._httpd.server_address[1]}/.well-known/jwks.json'

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture(scope='module')
def rsa_signer():
    return Signer('RS256')


@pytest.fixture(scope='module')
def ec_signer():
    return Signer('ES256')


@pytest.fixture
def idp(rsa_signer, ec_signer):
    server = JwksServer(rsa_signer, ec_signer)
    jwt_verify.reset_caches()
    yield server
    server.close()
    jwt_verify.reset_caches()


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fake_clock(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(jwt_verify, 'clock', clock)
    return clock


def verify(token: str, server: JwksServer, **kw):
    args = {'issuer': ISSUER, 'audience': AUDIENCE, 'jwks_url': server.url}
    args.update(kw)
    return jwt_verify.verify(token, **args)


# ----------------------------------------------------------------------------- accepted

@pytest.mark.parametrize('alg', ['RS256', 'ES256'])
def test_a_token_signed_by_a_provider_key_verifies(idp, rsa_signer, ec_signer, alg):
    signer = rsa_signer if alg == 'RS256' else ec_signer
    claims = verify(signer.token('Ann@Example.com'), idp)
    assert claims['email'] == 'Ann@Example.com' and claims['iss'] == ISSUER


def test_keys_are_cached_between_tokens(idp, rsa_signer, ec_signer):
    for _ in range(3):
        verify(rsa_signer.token(), idp)
        verify(ec_signer.token(), idp)
    assert idp.hits == 1


def test_expiry_and_not_before_allow_a_small_leeway(idp, rsa_signer):
    now = int(time.time())
    verify(rsa_signer.token(exp=now - 10), idp)            # 10 s late: within the leeway
    verify(rsa_signer.token(nbf=now + 10, iat=now), idp)   # clock skew the other way
    with pytest.raises(jwt_verify.InvalidToken, match='expired'):
        verify(rsa_signer.token(exp=now - jwt_verify.LEEWAY_SECONDS - 5), idp)
    with pytest.raises(jwt_verify.InvalidToken, match='not valid yet'):
        verify(rsa_signer.token(nbf=now + jwt_verify.LEEWAY_SECONDS + 60), idp)


# ----------------------------------------------------------------------------- refused

def test_wrong_audience_issuer_or_missing_claims_are_refused(idp, rsa_signer):
    with pytest.raises(jwt_verify.InvalidToken, match='audience'):
        verify(rsa_signer.token(aud='another-api'), idp)
    with pytest.raises(jwt_verify.InvalidToken, match='issued'):
        verify(rsa_signer.token(iss='https://evil.example/'), idp)
    with pytest.raises(jwt_verify.InvalidToken, match='exp'):
        verify(rsa_signer.token(exp=None), idp)
    with pytest.raises(jwt_verify.InvalidToken, match='aud'):
        verify(rsa_signer.token(aud=None), idp)


def test_a_token_signed_by_another_key_under_a_known_kid_is_refused(idp, rsa_signer):
    impostor = Signer('RS256', kid=rsa_signer.kid)
    with pytest.raises(jwt_verify.InvalidToken, match='signature'):
        verify(impostor.token(), idp)


def test_algorithm_confusion_is_refused(idp, rsa_signer, ec_signer):
    # HS256 "signed" with the provider's public key as the HMAC secret: the classic confusion
    # (built by hand: pyjwt itself refuses to sign with a PEM key)
    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b'=').decode()
    signing_input = b64(json.dumps({'alg': 'HS256', 'typ': 'JWT', 'kid': rsa_signer.kid}).encode()) + '.' + b64(
        json.dumps({'iss': ISSUER, 'aud': AUDIENCE, 'exp': int(time.time()) + 60,
                    'email': 'x@example.com'}).encode())
    mac = hmac.new(rsa_signer.public_pem(), signing_input.encode(), hashlib.sha256).digest()
    hs = f'{signing_input}.{b64(mac)}'
    with pytest.raises(jwt_verify.InvalidToken, match='unsupported algorithm'):
        verify(hs, idp)
    # alg "none"
    unsigned = jwt.encode({'iss': ISSUER, 'aud': AUDIENCE, 'exp': int(time.time()) + 60}, None,
                          algorithm='none', headers={'kid': rsa_signer.kid})
    with pytest.raises(jwt_verify.InvalidToken, match='unsupported algorithm'):
        verify(unsigned, idp)
    # ES256 header pointing at the RSA key
    es_token = ec_signer.token(kid=rsa_signer.kid)
    with pytest.raises(jwt_verify.InvalidToken, match='does not match'):
        verify(es_token, idp)


def test_garbage_and_oversized_tokens_are_refused(idp):
    for token in ('', 'abc', 'a.b.c', 'x' * (jwt_verify.MAX_TOKEN_BYTES + 1)):
        with pytest.raises(jwt_verify.InvalidToken):
            verify(token, idp)


# ----------------------------------------------------------------------------- key refresh

def test_unknown_kid_refetches_at_most_once_per_interval(idp, rsa_signer, fake_clock):
    verify(rsa_signer.token(), idp)
    assert idp.hits == 1
    stranger = Signer('ES256')
    for _ in range(5):
        with pytest.raises(jwt_verify.InvalidToken, match='unknown key'):
            verify(stranger.token(), idp)
        fake_clock.now += 1.5
    # one refetch for that kid in the first 10 s, then one more once 10 s have passed
    assert idp.hits == 2
    fake_clock.now += jwt_verify.UNKNOWN_KID_REFETCH_SECONDS
    with pytest.raises(jwt_verify.InvalidToken):
        verify(stranger.token(), idp)
    assert idp.hits == 3


def test_a_flood_of_made_up_kids_cannot_hammer_the_provider(idp, rsa_signer, fake_clock):
    verify(rsa_signer.token(), idp)
    for i in range(200):
        with pytest.raises(jwt_verify.InvalidToken):
            verify(rsa_signer.token(kid=f'bogus-{i}'), idp)
        fake_clock.now += 0.01
    # 2 s of fake time: at most one refetch a second on top of the first fetch
    assert idp.hits <= 1 + 3


def test_a_rotated_in_key_is_picked_up_on_its_first_token(idp, rsa_signer, fake_clock):
    verify(rsa_signer.token(), idp)
    fake_clock.now += 5
    rotated = Signer('RS256')
    idp.signers.append(rotated)
    assert verify(rotated.token('new@example.com'), idp)['email'] == 'new@example.com'
    assert idp.hits == 2


def test_provider_outage_keeps_cached_keys_and_reports_unavailable_without_them(idp, rsa_signer, fake_clock):
    verify(rsa_signer.token(), idp)
    idp.fail = True
    fake_clock.now += jwt_verify.MAX_KEYS_AGE_SECONDS + 1
    verify(rsa_signer.token(), idp)          # refresh failed: the cached keys still verify
    assert idp.hits == 2
    jwt_verify.reset_caches()
    with pytest.raises(jwt_verify.KeysUnavailable):
        verify(rsa_signer.token(), idp)


def test_no_lock_is_held_while_the_keys_are_fetched(idp, rsa_signer, fake_clock):
    """A slow refresh holds up only the caller running it: another caller with usable keys
    verifies at once, and nobody starts a second fetch meanwhile."""
    verify(rsa_signer.token(), idp)
    fake_clock.now += jwt_verify.MAX_KEYS_AGE_SECONDS + 1          # a refresh is due
    idp.delay, idp.asked = 1.5, threading.Event()
    slow = threading.Thread(target=verify, args=(rsa_signer.token(), idp))
    slow.start()
    assert idp.asked.wait(5)                                        # the refresh is on the wire
    started = time.monotonic()
    for _ in range(3):
        assert verify(rsa_signer.token('other@example.com'), idp)['email'] == 'other@example.com'
    elapsed = time.monotonic() - started
    slow.join(10)
    assert elapsed < 0.5, elapsed
    assert idp.hits == 2


def test_keys_past_the_bound_are_refused_when_the_provider_stays_down(idp, rsa_signer, fake_clock):
    verify(rsa_signer.token(), idp)
    idp.fail = True
    fake_clock.now += 3 * 3600
    verify(rsa_signer.token(), idp, max_key_age=4 * 3600)          # within the bound: still trusted
    fake_clock.now += 3600 + 1
    with pytest.raises(jwt_verify.KeysUnavailable):
        verify(rsa_signer.token(), idp, max_key_age=4 * 3600)
    idp.fail = False
    fake_clock.now += 2
    assert verify(rsa_signer.token('back@example.com'), idp, max_key_age=4 * 3600)['email'] == 'back@example.com'


def test_jwks_url_must_be_https_except_on_loopback():
    jwt_verify.reset_caches()
    with pytest.raises(jwt_verify.KeysUnavailable):
        jwt_verify.verify(Signer('ES256').token(), issuer=ISSUER, audience=AUDIENCE,
                          jwks_url='file:///etc/passwd')
    jwt_verify.reset_caches()


def test_importing_the_app_does_not_import_jwt_or_cryptography():
    code = ('import sys, app; '
            'print(sorted(m for m in sys.modules if m == "jwt" or m.startswith("cryptography")))')
    out = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True,
                         env={'PYTHONPATH': str(ROOT), 'PATH': '/usr/bin:/bin', 'AWS_DEFAULT_REGION': 'us-east-1'},
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == '[]'
