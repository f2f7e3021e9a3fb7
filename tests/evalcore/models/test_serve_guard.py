"""``python -m evalcore serve``: who may ask. An optional API key, Host headers checked against the
server's names (DNS rebinding), and JSON bodies only (issue 12, section 5)."""

from __future__ import annotations

import http.client
import json
import threading

import pytest

from evalcore.cli import main
from evalcore.cli.serve import ModelService, make_server
from evalcore.cli.serve.handler import host_name
from evalcore.models import load_backend

KEY = "k3y-" + "x" * 28


@pytest.fixture(scope="module")
def guarded(smollm2):
    service = ModelService(smollm2, name="m", max_tokens_limit=16, queue_timeout=60)
    server = make_server(service, host="127.0.0.1", port=0, max_body_bytes=65536, api_key=KEY,
                         host_names=("models.internal",))  # fmt: skip
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[:2]
    server.shutdown()
    server.server_close()


def ask(address, method, path, *, body=None, headers=None):
    connection = http.client.HTTPConnection(*address, timeout=60)
    connection.putrequest(method, path, skip_host=True)
    sent = {"Host": f"127.0.0.1:{address[1]}", **(headers or {})}
    data = json.dumps(body).encode() if body is not None else b""
    for name, value in sent.items():
        if value is not None:
            connection.putheader(name, value)
    if body is not None:
        connection.putheader("Content-Length", str(len(data)))
    connection.endheaders(data if body is not None else None)
    response = connection.getresponse()
    answer = response.status, dict(response.getheaders()), json.loads(response.read() or b"null")
    connection.close()
    return answer


AUTH = {"Authorization": f"Bearer {KEY}"}


def test_api_key_is_required_on_every_route_but_health(guarded):
    status, headers, body = ask(guarded, "GET", "/v1/models")
    assert status == 401 and headers["WWW-Authenticate"] == "Bearer"
    assert body["error"]["code"] == "invalid_api_key"
    assert ask(guarded, "GET", "/v1/models", headers={"Authorization": "Bearer wrong"})[0] == 401
    assert ask(guarded, "GET", "/v1/models", headers={"Authorization": f"Basic {KEY}"})[0] == 401
    assert ask(guarded, "POST", "/v1/completions", body={"model": "m", "prompt": "Hi"})[0] == 401
    assert ask(guarded, "GET", "/v1/models", headers=AUTH)[0] == 200
    assert ask(guarded, "GET", "/health")[0] == 200


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("evil.example", 400),
        ("evil.example:8011", 400),
        ("127.0.0.1.evil.example", 400),
        (None, 400),
        ("", 400),
        ("localhost:8011", 200),
        ("LOCALHOST", 200),
        ("models.internal", 200),
        ("[::1]:8011", 200),
        ("10.1.2.3", 200),
    ],
)
def test_host_header_must_name_this_server(guarded, host, status):
    got, _, body = ask(guarded, "GET", "/v1/models", headers={**AUTH, "Host": host})
    assert got == status, body
    if status == 400:
        assert body["error"]["code"] == "bad_host"


def test_bodies_must_be_json(guarded):
    request = {"model": "m", "prompt": "Hi", "max_tokens": 1, "temperature": 0}
    for content_type in (None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
        status, _, body = ask(guarded, "POST", "/v1/completions", body=request,
                              headers={**AUTH, "Content-Type": content_type})  # fmt: skip
        assert status == 415 and "Content-Type: application/json" in body["error"]["message"]
    status, _, body = ask(guarded, "POST", "/v1/completions", body=request,
                          headers={**AUTH, "Content-Type": "application/json; charset=utf-8"})  # fmt: skip
    assert status == 200 and body["usage"]["completion_tokens"] == 1


def test_the_openai_backend_sends_the_key(guarded, monkeypatch):
    monkeypatch.setenv("PODIUM_TEST_SERVE_KEY", KEY)
    base_url = f"http://127.0.0.1:{guarded[1]}/v1"
    backend = load_backend("openai", base_url=base_url, model="m", api_key_env="PODIUM_TEST_SERVE_KEY")
    try:
        text = "".join(backend.stream_chat([{"role": "user", "content": "Hi"}], {"max_new_tokens": 2}))
    finally:
        backend.close()
    assert isinstance(text, str)
    monkeypatch.setenv("PODIUM_TEST_SERVE_KEY", "wrong-key-wrong-key")
    backend = load_backend("openai", base_url=base_url, model="m", api_key_env="PODIUM_TEST_SERVE_KEY", max_retries=0)
    try:
        with pytest.raises(Exception, match="401"):
            "".join(backend.stream_chat([{"role": "user", "content": "Hi"}], {"max_new_tokens": 2}))
    finally:
        backend.close()


def test_short_api_key_is_refused_before_loading_the_model(capsys, monkeypatch):
    assert main(["serve", "--model", "hf", "--model-args", "path=/nonexistent", "--port", "0", "--api-key", "short"]) == 2
    assert "at least 16 characters" in capsys.readouterr().err
    monkeypatch.setenv("PODIUM_SERVE_API_KEY", "also-short")
    assert main(["serve", "--model", "hf", "--model-args", "path=/nonexistent", "--port", "0"]) == 2
    assert "PODIUM_SERVE_API_KEY" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("header", "name"),
    [("a.example:80", "a.example"), ("[::1]:8011", "::1"), ("::1", "::1"), ("Example.ORG.", "example.org"),
     (None, None), ("  ", None)],
)
def test_host_name_parsing(header, name):
    assert host_name(header) == name
