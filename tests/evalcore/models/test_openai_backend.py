"""The openai backend against real servers: ``python -m evalcore serve`` with the real SmolLM2 (its
answers and scores must equal the hf backend's), and tiny local http.server instances that answer
503, 429, 400, stall, or record headers (retries, timeouts, keys)."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from evalcore.models import (
    GenerationRequest,
    LoglikelihoodRequest,
    RollingRequest,
    load_backend,
    parse_model_args,
)
from evalcore.models.endpoint import retry_delay
from evalcore.models.openai_backend import EndpointError, EndpointTimeout
from tests.conftest import FLOAT32_ATOL
from tests.evalcore.models.test_serve import MODEL_NAME, launch_serve, serve_process

SMOLLM2_BOS = "<|im_start|>"  # the hf backend's prefix token for SmolLM2 (its BOS)


@pytest.fixture(scope="module")
def pair(smollm2_dir):
    """(openai backend talking to serve, in-process hf backend) over the same SmolLM2 weights."""
    launch_serve(str(smollm2_dir))  # starts loading in the background while hf loads here
    from tests.evalcore.models._shared import smollm2_backend

    local = smollm2_backend(str(smollm2_dir))
    host, port = serve_process(str(smollm2_dir))
    remote = load_backend(
        "openai", base_url=f"http://{host}:{port}/v1", prefix_text=SMOLLM2_BOS, timeout="60"
    )
    return remote, local


def test_streamed_chat_equals_the_hf_backend_greedy(pair):
    remote, local = pair
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    params = {"max_new_tokens": 10, "temperature": 0}
    deltas = list(remote.stream_chat(messages, params))
    assert len(deltas) > 1  # it really streams
    assert "".join(deltas) == "".join(local.stream_chat(messages, params))
    with_system = {**params, "system_prompt": "Answer in French.", "max_new_tokens": 5}
    assert remote.chat(messages, with_system) == local.chat(messages, with_system)
    assert remote.identity.name == MODEL_NAME and remote.identity.backend == "openai"


def test_loglikelihood_through_the_server_matches_hf(pair):
    remote, local = pair
    requests = [
        LoglikelihoodRequest("The capital of France is", " Paris"),
        LoglikelihoodRequest("The capital of France is", " a small village in the mountains"),
        LoglikelihoodRequest("Question: 2+2?\nAnswer: ", "4"),  # trailing space moves to the continuation
        LoglikelihoodRequest("", "Hello world"),  # empty context: scored after the prefix token
    ]
    got_all = remote.loglikelihood(requests)
    for got, want in zip(got_all, local.loglikelihood(requests)):
        assert got.logprob == pytest.approx(want.logprob, abs=FLOAT32_ATOL)
        assert (got.is_greedy, got.num_tokens) == (want.is_greedy, want.num_tokens)
    parallel = load_backend("openai", base_url=remote.base_url, prefix_text=SMOLLM2_BOS, concurrency="3")
    ticks = []
    assert parallel.loglikelihood(requests, progress=ticks.append) == got_all  # same order, same numbers
    assert ticks == [1] * len(requests)
    text = [RollingRequest("The quick brown fox jumps over the lazy dog. It barked.")]
    (got,), (want,) = remote.loglikelihood_rolling(text), local.loglikelihood_rolling(text)
    assert got.logprob == pytest.approx(want.logprob, abs=FLOAT32_ATOL) and got.num_tokens == want.num_tokens


def test_generate_until_stops_like_hf(pair):
    remote, local = pair
    requests = [
        GenerationRequest("Count: 1, 2, 3,", until=(",",), max_gen_toks=8),
        GenerationRequest("Count: 1, 2, 3,", max_gen_toks=5),
    ]
    got, want = remote.generate_until(requests), local.generate_until(requests)
    assert [(g.text, g.finish_reason) for g in got] == [(w.text, w.finish_reason) for w in want]
    assert got[0].finish_reason == "stop" and "," not in got[0].text and got[1].finish_reason == "length"


def test_rolling_and_empty_context_need_the_prefix_text(pair):
    remote, _ = pair
    bare = load_backend("openai", base_url=remote.base_url, model=MODEL_NAME)
    with pytest.raises(ValueError, match="prefix_text"):
        bare.loglikelihood_rolling([RollingRequest("Hello")])
    with pytest.raises(ValueError, match="prefix_text"):
        bare.loglikelihood([LoglikelihoodRequest("", "Hello")])
    with pytest.raises(ValueError, match="sliding windows"):
        remote.loglikelihood_rolling([RollingRequest("Hello", max_length=16, stride=8)])


# -- tiny real servers for the failure paths ----------------------------------------------------------
class Script:
    """Answers to give in turn (status, JSON body, headers); records each request's headers, body and
    client port (one port for two requests means one reused connection)."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.seen: list[tuple[dict, dict | None]] = []
        self.ports: list[int] = []
        self.release = threading.Event()  # a stalled answer waits for this (set at teardown)


def tiny_server(script: Script):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, so that connection reuse is visible

        def log_message(self, *args):
            pass

        def _answer(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            script.seen.append((dict(self.headers), body))
            script.ports.append(self.client_address[1])
            status, payload, headers = script.answers.pop(0) if len(script.answers) > 1 else script.answers[0]
            if status in ("stall-stream", "events"):
                self.close_connection = True
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
            if status == "stall-stream":
                event = {"choices": [{"delta": {"content": "Hel"}}]}
                self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                self.wfile.flush()
                script.release.wait(30)
                return
            if status == "events":
                self.wfile.write("".join(f"data: {e}\n\n" for e in payload).encode())
                return
            data = json.dumps(payload).encode()
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _answer

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


@pytest.fixture
def scripted():
    servers = []

    def start(*answers):
        script = Script(*answers)
        server, url = tiny_server(script)
        servers.append((server, script))
        return script, url

    yield start
    for server, script in servers:
        script.release.set()
        server.shutdown()
        server.server_close()


OK_COMPLETION = (
    200,
    {"choices": [{"text": " 4", "finish_reason": "stop"}], "usage": {"completion_tokens": 2}},
    None,
)
BUSY = (503, {"error": {"message": "overloaded"}}, None)


def test_retries_5xx_and_429_with_exponential_backoff_then_succeeds(scripted):
    script, url = scripted(
        BUSY, (429, {"error": {"message": "slow down"}}, {"Retry-After": "0.3"}), OK_COMPLETION
    )
    backend = load_backend("openai", base_url=url, model="m", max_retries=2, backoff=0.05)
    waits = []
    backend._client.sleep = waits.append  # record the backoff instead of sleeping through it
    (result,) = backend.generate_until([GenerationRequest("2+2=", max_gen_toks=3)])
    assert result.text == " 4" and result.num_tokens == 2 and len(script.seen) == 3
    assert waits == [0.05, 0.3]  # backoff 0.05 s, then Retry-After (0.3 s) beats 0.1 s
    script, url = scripted(BUSY)
    backend = load_backend("openai", base_url=url, model="m", max_retries=2, backoff=0.01)
    with pytest.raises(EndpointError, match=r"HTTP 503: overloaded after 3 attempts") as error:
        backend.generate_until([GenerationRequest("x", max_gen_toks=1)])
    assert error.value.status == 503 and len(script.seen) == 3 and url in str(error.value)


def test_retry_delays_double_and_honour_retry_after_within_bounds():
    assert [retry_delay(n, backoff=0.5) for n in range(4)] == [0.5, 1.0, 2.0, 4.0]
    assert retry_delay(0, backoff=0.5, retry_after="3") == 3.0
    assert retry_delay(3, backoff=0.5, retry_after="1") == 4.0  # the longer of the two
    assert retry_delay(0, backoff=0.5, retry_after="86400") == 60.0  # capped
    assert retry_delay(1, backoff=0.5, retry_after="Wed, 21 Oct 2015 07:28:00 GMT") == 1.0
    assert retry_delay(0, backoff=0.5, retry_after="nan") == 0.5
    assert retry_delay(10, backoff=0.5) == 60.0  # every wait is bounded


def test_one_backend_reuses_its_connection(scripted):
    script, url = scripted(OK_COMPLETION)
    backend = load_backend("openai", base_url=url, model="m")
    requests = [GenerationRequest("a", max_gen_toks=1), GenerationRequest("b", max_gen_toks=1)]
    assert [r.text for r in backend.generate_until(requests)] == [" 4", " 4"]
    assert len(script.ports) == 2 and script.ports[0] == script.ports[1]  # one keep-alive connection
    backend.close()


def test_model_args_keep_their_types_from_the_command_line(scripted):
    text = "base_url=http://127.0.0.1:9/v1,max_retries=3,verify=false,temperature=0.5,model=\"7\""
    args = parse_model_args(text)
    assert args == {"base_url": "http://127.0.0.1:9/v1", "max_retries": 3, "verify": False,
                    "temperature": 0.5, "model": "7"}  # fmt: skip
    assert type(args["max_retries"]) is int and type(args["verify"]) is bool and type(args["temperature"]) is float
    _, url = scripted(OK_COMPLETION)
    typed = parse_model_args(f"base_url={url},max_retries=3,verify=false,timeout=2.5,backoff=0,model=m")
    backend = load_backend("openai", **typed)
    assert (backend.max_retries, backend.timeout, backend.backoff) == (3, 2.5, 0.0)
    assert backend.generate_until([GenerationRequest("a", max_gen_toks=1)])[0].text == " 4"
    with pytest.raises(ValueError, match="max_retries must be a number"):
        load_backend("openai", base_url=url, max_retries=True)
    with pytest.raises(ValueError, match="max_retries must be an integer"):
        load_backend("openai", base_url=url, max_retries=2.5)
    with pytest.raises(ValueError, match="verify must be"):
        load_backend("openai", base_url=url, verify="/no/such/ca.pem")


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_client_errors_are_not_retried(scripted, status):
    script, url = scripted((status, {"error": {"message": "bad request body"}}, None))
    backend = load_backend("openai", base_url=url, model="m", max_retries="5", backoff="0.01")
    with pytest.raises(EndpointError, match=f"HTTP {status}: bad request body") as error:
        backend.chat([{"role": "user", "content": "hi"}])
    assert error.value.status == status and len(script.seen) == 1


def test_redirects_are_not_followed(scripted):
    script, url = scripted((302, {}, {"Location": "http://example.invalid/steal"}))
    backend = load_backend("openai", base_url=url, model="m")
    with pytest.raises(EndpointError, match="HTTP 302"):
        backend.chat([{"role": "user", "content": "hi"}])
    assert len(script.seen) == 1


def test_a_server_that_never_answers_times_out_and_is_not_retried():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # the kernel accepts connections; nobody reads them or answers
    try:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
        backend = load_backend("openai", base_url=url, model="m", timeout="0.5", max_retries="3")
        with pytest.raises(EndpointTimeout, match="no answer within 0.5 s"):
            backend.chat([{"role": "user", "content": "hi"}])
        listener.setblocking(False)
        connections = []
        while True:  # the connections the backend opened wait in the listen queue
            try:
                connections.append(listener.accept()[0])
            except BlockingIOError:
                break
        assert len(connections) == 1  # one attempt: timeouts are not retried
        for connection in connections:
            connection.close()
    finally:
        listener.close()


def test_a_stalled_stream_times_out(scripted):
    _, url = scripted(("stall-stream", None, None))
    backend = load_backend("openai", base_url=url, model="m", timeout="0.5")
    stream = backend.stream_chat([{"role": "user", "content": "hi"}])
    assert next(stream) == "Hel"
    with pytest.raises(EndpointTimeout, match="stalled"):
        next(stream)


def test_connection_refused_is_retried_then_reported():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    url = f"http://127.0.0.1:{port}/v1"
    backend = load_backend("openai", base_url=url, model="m", backoff="0.01", max_retries=2)
    waits = []
    backend._client.sleep = waits.append
    with pytest.raises(EndpointError, match=r"cannot reach .*/v1/chat/completions \(3 attempts\)"):
        backend.chat([{"role": "user", "content": "hi"}])
    assert waits == [0.01, 0.02]


def test_the_key_comes_from_the_named_environment_variable_and_is_never_shown(scripted, monkeypatch):
    secret = "sk-test-do-not-log-1234"
    monkeypatch.setenv("PODIUM_TEST_KEY", secret)
    script, url = scripted((401, {"error": {"message": "invalid key"}}, None))
    backend = load_backend("openai", base_url=url, model="m", api_key_env="PODIUM_TEST_KEY")
    with pytest.raises(EndpointError) as error:
        backend.chat([{"role": "user", "content": "hi"}])
    headers, body = script.seen[0]
    assert headers["Authorization"] == f"Bearer {secret}"
    assert body["model"] == "m" and body["stream"] is True
    assert secret not in str(error.value) and secret not in repr(backend) and secret not in str(vars(backend))
    with pytest.raises(ValueError, match="api_key_env"):
        load_backend("openai", base_url=url, api_key=secret)
    with pytest.raises(ValueError, match="not set"):
        load_backend("openai", base_url=url, api_key_env="PODIUM_TEST_KEY_MISSING")
    with pytest.raises(ValueError, match="unencrypted"):
        load_backend("openai", base_url="http://10.0.0.5:8000/v1", api_key_env="PODIUM_TEST_KEY")
    load_backend(
        "openai", base_url="http://10.0.0.5:8000/v1", api_key_env="PODIUM_TEST_KEY", insecure_http="true"
    )
    load_backend("openai", base_url="https://api.example.com/v1", api_key_env="PODIUM_TEST_KEY")


def test_stream_events_errors_and_model_discovery(scripted):
    events = [json.dumps({"choices": [{"delta": {"content": c}}]}) for c in ("Hel", "lo")]
    events[1] = '{"choices": [{"delta":\ndata: {"content": "lo"}}]}'  # one event over two data lines
    _, url = scripted((200, {"data": [{"id": "only-model"}]}, None), ("events", [*events, "[DONE]"], None))
    backend = load_backend("openai", base_url=url)
    assert backend.chat([{"role": "user", "content": "hi"}]) == "Hello"
    assert backend.model == "only-model"
    _, url = scripted(("events", [events[0], json.dumps({"error": {"message": "engine died"}})], None))
    with pytest.raises(EndpointError, match="engine died"):
        load_backend("openai", base_url=url, model="m").chat([{"role": "user", "content": "hi"}])
    _, url = scripted(("events", events, None))  # the connection closes with no [DONE]
    with pytest.raises(EndpointError, match="ended before the answer was complete"):
        load_backend("openai", base_url=url, model="m").chat([{"role": "user", "content": "hi"}])


def test_a_server_without_prompt_logprobs_gives_a_clear_error(scripted):
    _, url = scripted((200, {"choices": [{"text": "x", "logprobs": None}]}, None))
    backend = load_backend("openai", base_url=url, model="m")
    with pytest.raises(EndpointError, match="no prompt log-probabilities"):
        backend.loglikelihood([LoglikelihoodRequest("a", " b")])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"base_url": "ftp://host/v1"}, "http"),
        ({"base_url": "http://user:pw@host/v1"}, "credentials"),
        ({"base_url": "http://h/v1", "timeout": "soon"}, "numbers"),
        ({"base_url": "http://h/v1", "max_retries": "-1"}, "max_retries"),
        ({"base_url": "http://h/v1", "max_retries": 1000}, "max_retries from 0 to 10"),
        ({"base_url": "http://h/v1", "temperature": "0"}, "unknown"),
        ({"base_url": "http://h/v1", "api_key_env": "not a name"}, "environment variable name"),
    ],
)
def test_argument_validation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        load_backend("openai", **kwargs)
