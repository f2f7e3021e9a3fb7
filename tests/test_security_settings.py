"""Production transport security, login throttling and API authentication (issue 12, section 5)."""

from __future__ import annotations

import base64
import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.throttling import AnonRateThrottle

from tests.conftest import clean_env, run_manage
from tests.leaderboard import board_data

PROBE = (
    "from django.conf import settings as s; import json; print(json.dumps({k: getattr(s, k, None) for k in "
    "['SECURE_SSL_REDIRECT', 'SECURE_HSTS_SECONDS', 'SECURE_HSTS_INCLUDE_SUBDOMAINS', 'SECURE_PROXY_SSL_HEADER',"
    " 'SESSION_COOKIE_SECURE', 'CSRF_COOKIE_SECURE']}))"
)


def prod_settings(tmp_path, **overrides) -> dict:
    env = clean_env(
        PODIUM_VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="config.settings.prod", SECRET_KEY="k" * 50, **overrides
    )
    result = run_manage("shell", "-c", PROBE, env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_production_forces_https_with_hsts(tmp_path):
    found = prod_settings(tmp_path)
    assert found["SECURE_SSL_REDIRECT"] is True
    assert found["SECURE_HSTS_SECONDS"] == 31_536_000
    assert found["SECURE_HSTS_INCLUDE_SUBDOMAINS"] is True
    assert found["SESSION_COOKIE_SECURE"] is True and found["CSRF_COOKIE_SECURE"] is True
    # No proxy declared: a client's X-Forwarded-Proto must not be believed.
    assert found["SECURE_PROXY_SSL_HEADER"] is None


def test_behind_the_documented_proxy_its_https_header_is_trusted(tmp_path):
    found = prod_settings(tmp_path, TRUSTED_PROXY_COUNT="1")
    assert found["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]


def test_plain_http_deployment_turns_hsts_off(tmp_path):
    found = prod_settings(tmp_path, SECURE_SSL="false")
    assert found["SECURE_SSL_REDIRECT"] is False
    assert found["SECURE_HSTS_SECONDS"] == 0


@pytest.mark.django_db
def test_login_is_locked_after_repeated_failures(settings):
    board_data.user("owner@example.org")
    client = Client(REMOTE_ADDR="203.0.113.9")
    url = "/leaderboard/accounts/login/"
    codes = [
        client.post(url, {"username": "owner@example.org", "password": "wrong"}).status_code
        for _ in range(settings.AXES_FAILURE_LIMIT)
    ]
    # The form again with its error, until the limit-th failure locks the account for this address.
    assert codes == [200] * (settings.AXES_FAILURE_LIMIT - 1) + [429]
    # The right password no longer gets in from this address for this account...
    locked = client.post(url, {"username": "owner@example.org", "password": "a-long-passphrase-42"})
    assert locked.status_code == 429
    assert "_auth_user_id" not in client.session
    # ...but the owner is not locked out from elsewhere.
    elsewhere = Client(REMOTE_ADDR="198.51.100.7")
    response = elsewhere.post(url, {"username": "owner@example.org", "password": "a-long-passphrase-42"})
    assert response.status_code == 302
    assert "_auth_user_id" in elsewhere.session


@pytest.mark.django_db
def test_an_account_whose_username_is_not_its_email_signs_in_with_its_email():
    # The demo's admin (username "admin", email admin@localhost) could sign in only at /admin/.
    get_user_model().objects.create_superuser("admin", "admin@localhost", "a-long-passphrase-42")
    client = Client(REMOTE_ADDR="203.0.113.20")
    url = "/leaderboard/accounts/login/"
    assert client.post(url, {"username": "ADMIN@localhost", "password": "a-long-passphrase-42"}).status_code == 302
    assert client.get("/leaderboard/review/").status_code == 200
    # Two accounts sharing an address: neither is guessed; the address is tried as a username.
    get_user_model().objects.create_user("one", "twice@example.org", "a-long-passphrase-42")
    get_user_model().objects.create_user("two", "twice@example.org", "a-long-passphrase-42")
    shared = Client(REMOTE_ADDR="203.0.113.21")
    assert shared.post(url, {"username": "twice@example.org", "password": "a-long-passphrase-42"}).status_code == 200
    assert "_auth_user_id" not in shared.session


@pytest.mark.django_db
def test_basic_auth_is_off_by_default():
    owner = board_data.user("owner@example.org")
    board_data.entry(owner, "secret-model", gsm8k=[True, False], private=True)
    credentials = base64.b64encode(b"owner@example.org:a-long-passphrase-42").decode()
    response = Client().get("/api/submissions/", HTTP_AUTHORIZATION=f"Basic {credentials}")
    assert response.status_code == 200
    assert "secret-model" not in response.content.decode()  # the header authenticated nobody
    logged_in = Client()
    logged_in.force_login(owner)
    assert "secret-model" in logged_in.get("/api/submissions/").content.decode()


@pytest.mark.django_db
def test_api_is_throttled(monkeypatch):
    from django.core.cache import cache

    cache.clear()
    monkeypatch.setattr(AnonRateThrottle, "THROTTLE_RATES", {"anon": "3/minute", "user": "100/minute"})
    client = Client(REMOTE_ADDR="192.0.2.44")
    codes = [client.get("/api/scores/").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    assert "Retry-After" in client.get("/api/scores/").headers
