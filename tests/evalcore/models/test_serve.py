"""``python -m evalcore serve``: the real server on loopback with the real SmolLM2, its OpenAI wire
format, and hostile requests (each must get a 4xx JSON error in OpenAI's shape, never a crash)."""

from __future__ import annotations

import atexit
import functools
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]
MODEL_NAME = "SmolLM2-135M-Instruct"


@functools.cache
def launch_serve(model_dir: str) -> tuple[subprocess.Popen, str]:
    """Start ``python -m evalcore serve`` once per test process (not waiting); return (process, log)."""
    log = tempfile.NamedTemporaryFile("w+", prefix="serve-", suffix=".log", delete=False)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    command = [
        sys.executable, "-m", "evalcore", "serve", "--model", "hf",
        "--model-args", f"path={model_dir},dtype=float32,device=cpu,threads=1",
        "--port", "0", "--max-tokens-limit", "256", "--max-body-bytes", "65536",
    ]  # fmt: skip
    process = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=log, stderr=log)
    atexit.register(Path(log.name).unlink, missing_ok=True)
    atexit.register(_stop, process)  # atexit runs last-registered first: stop, then remove the log
    return process, log.name


@functools.cache
def serve_process(model_dir: str) -> tuple[str, int]:
    """The started server's (host, port), once it listens."""
    process, log = launch_serve(model_dir)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        match = re.search(r"at http://127\.0\.0\.1:(\d+)/v1", Path(log).read_text())
        if match:
            return "127.0.0.1", int(match.group(1))
        if process.poll() is not None:
            break
        time.sleep(0.1)
    _stop(process)
    raise RuntimeError(f"serve did not start:\n{Path(log).read_text()[-3000:]}")


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture(scope="session")
def served(smollm2_dir) -> tuple[str, int]:
    return serve_process(str(smollm2_dir))


def request(served, method: str, path: str, body=None, *, headers=None, timeout: float = 60):
    """(status, parsed JSON or raw text) of one request."""
    connection = http.client.HTTPConnection(*served, timeout=timeout)
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    sent = {"Content-Type": "application/json"} if data is not None else {}
    connection.request(method, path, body=data, headers={**sent, **(headers or {})})
    response = connection.getresponse()
    raw = response.read().decode()
    connection.close()
    try:
        return response.status, json.loads(raw)
    except json.JSONDecodeError:
        return response.status, raw


def raw_exchange(served, payload: bytes, *, timeout: float = 30) -> tuple[int, dict]:
    """Send raw bytes on a socket, read the whole answer; return (status, JSON body)."""
    with socket.create_connection(served, timeout=timeout) as sock:
        sock.sendall(payload)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def assert_openai_error(status, body, expected_status, *, param=None):
    assert status == expected_status, body
    assert set(body) == {"error"} and isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert body["error"]["type"] == "invalid_request_error"
    if param is not None:
        assert body["error"]["param"] == param


CHAT = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "What is the capital of France?"}]}


def test_models_and_plain_chat_answer(served):
    status, body = request(served, "GET", "/v1/models")
    assert status == 200 and [m["id"] for m in body["data"]] == [MODEL_NAME]
    status, body = request(
        served, "POST", "/v1/chat/completions", {**CHAT, "max_tokens": 8, "temperature": 0}
    )
    assert status == 200 and body["object"] == "chat.completion"
    choice = body["choices"][0]
    assert choice["message"]["role"] == "assistant" and "Paris" in choice["message"]["content"]
    assert choice["finish_reason"] in ("stop", "length")


def test_streamed_chat_is_server_sent_events_ending_in_done(served):
    connection = http.client.HTTPConnection(*served, timeout=60)
    body = json.dumps({**CHAT, "max_tokens": 8, "temperature": 0, "stream": True})
    connection.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    assert response.status == 200 and response.getheader("Content-Type") == "text/event-stream"
    events = [line[6:] for line in response.read().decode().split("\n\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert "Paris" in text and chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")


def test_completion_with_echo_returns_prompt_token_logprobs(served):
    prompt = "The capital of France is"
    payload = {"model": MODEL_NAME, "prompt": prompt, "max_tokens": 0, "echo": True, "logprobs": 2}
    status, body = request(served, "POST", "/v1/completions", payload)
    assert status == 200, body
    choice = body["choices"][0]
    logprobs = choice["logprobs"]
    assert choice["text"] == prompt and "".join(logprobs["tokens"]) == prompt
    assert logprobs["token_logprobs"][0] is None and all(v < 0 for v in logprobs["token_logprobs"][1:])
    assert logprobs["text_offset"][0] == 0 and all(len(top) == 2 for top in logprobs["top_logprobs"][1:])
    streamed = request(served, "POST", "/v1/completions", {**payload, "max_tokens": 3, "stream": True})[1]
    assert streamed.strip().endswith("data: [DONE]")


def test_concurrent_requests_are_served_one_after_the_other(served):
    # A client that connects and sends nothing must not block the others.
    with socket.create_connection(served, timeout=5):
        results = []

        def ask():
            results.append(request(served, "POST", "/v1/chat/completions", {**CHAT, "max_tokens": 3}))

        threads = [threading.Thread(target=ask) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert [status for status, _ in results] == [200, 200, 200]


class CountedChat:
    """The real backend, counting the deltas its chat streams yield and noting when a stream closes."""

    def __init__(self, backend) -> None:
        self.backend, self.deltas, self.closed = backend, 0, threading.Event()

    def __getattr__(self, name):
        return getattr(self.backend, name)

    def stream_chat(self, messages, params):
        try:
            for delta in self.backend.stream_chat(messages, params):
                self.deltas += 1
                yield delta
        finally:
            self.closed.set()


def test_a_client_leaving_mid_stream_stops_the_answer_and_frees_the_model(smollm2):
    from evalcore.cli.serve import ModelService, make_server

    messages = [{"role": "user", "content": "Count from 1 to 500, separated by commas."}]
    whole = sum(1 for _ in smollm2.stream_chat(messages, {"max_new_tokens": 256, "temperature": 0}))
    assert whole >= 100  # greedy: the uninterrupted answer is long
    counted = CountedChat(smollm2)
    service = ModelService(counted, name="m", max_tokens_limit=256, queue_timeout=60)
    server = make_server(service, host="127.0.0.1", port=0, max_body_bytes=65536)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        body = json.dumps({"model": "m", "messages": messages, "max_tokens": 256, "temperature": 0, "stream": True})
        head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        with socket.create_connection(server.server_address, timeout=60) as sock:
            sock.sendall(head.encode() + body.encode())
            received = b""
            while received.count(b"data: ") < 3:  # the stream has started: hang up
                chunk = sock.recv(4096)
                assert chunk, received
                received += chunk
        assert counted.closed.wait(60)  # the answer's generator was closed ...
        assert counted.deltas < whole // 2  # ... long before the answer's end
        assert service.lock.acquire(timeout=60)  # and the model is free
        service.lock.release()
    finally:
        server.shutdown()
        server.server_close()


class CountedRows:
    """The real backend, noting the conversations it generates for."""

    def __init__(self, backend) -> None:
        self.backend, self.contexts = backend, []

    def __getattr__(self, name):
        return getattr(self.backend, name)

    def generate_until(self, requests, **kwargs):
        self.contexts += [r.context for r in requests]
        return self.backend.generate_until(requests, **kwargs)


def test_a_client_that_leaves_while_waiting_frees_its_place_and_is_never_answered(smollm2):
    """A client that gives up while its request waits for the model (lm-eval's client times out and
    retries) leaves the queue: the model never generates an answer nobody reads, and the patient
    client behind it is answered."""
    from evalcore.cli.serve import MAX_WAITING, ModelService, make_server

    counted = CountedRows(smollm2)
    service = ModelService(counted, name="m", max_tokens_limit=16)
    server = make_server(service, host="127.0.0.1", port=0, max_body_bytes=65536)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    left_messages = [{"role": "user", "content": "I will hang up before you answer."}]
    stayed_messages = [{"role": "user", "content": "Say hello."}]
    service.lock.acquire()  # a long answer holds the model
    try:
        body = json.dumps({"model": "m", "messages": left_messages, "max_tokens": 8, "temperature": 0})
        head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n")  # fmt: skip
        with socket.create_connection(server.server_address, timeout=60) as sock:
            sock.sendall(head.encode() + body.encode())
            assert service.wait_until(lambda: len(service.batcher.queue) == 1, 60), "the first request never queued"
        answers = []

        def patient():
            connection = http.client.HTTPConnection(*server.server_address, timeout=120)
            connection.request("POST", "/v1/chat/completions", json.dumps(
                {"model": "m", "messages": stayed_messages, "max_tokens": 8, "temperature": 0}),
                {"Content-Type": "application/json"})  # fmt: skip
            response = connection.getresponse()
            answers.append((response.status, json.loads(response.read())))

        waiter = threading.Thread(target=patient)
        waiter.start()
        assert service.wait_until(lambda: [p.messages for p in service.batcher.queue] == [stayed_messages], 60), \
            "the request whose client left never left the queue"  # (the patient one waits in it)
        assert service.waiting._value == MAX_WAITING - 1  # the leaver's place is free again
    finally:
        service.lock.release()
    waiter.join(120)
    try:
        assert answers and answers[0][0] == 200 and answers[0][1]["choices"][0]["message"]["content"]
        assert counted.contexts == [smollm2.chat_context(stayed_messages)]  # nothing generated for the leaver
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        (b"{not json", 400, None),
        (b"\xff\xfe\x00", 400, None),
        (b"[" * 20_000 + b"]" * 20_000, 400, None),
        ([1, 2], 400, None),
        ({"messages": CHAT["messages"]}, 400, "model"),
        ({**CHAT, "model": "gpt-4"}, 404, "model"),
        ({"model": MODEL_NAME}, 400, "messages"),
        ({"model": MODEL_NAME, "messages": "hi"}, 400, "messages"),
        ({"model": MODEL_NAME, "messages": [{"role": "robot", "content": "hi"}]}, 400, "messages"),
        ({"model": MODEL_NAME, "messages": [{"role": "user", "content": 5}]}, 400, "messages"),
        ({**CHAT, "max_tokens": 10**12}, 400, "max_tokens"),
        ({**CHAT, "max_tokens": "ten"}, 400, "max_tokens"),
        ({**CHAT, "max_tokens": True}, 400, "max_tokens"),
        ({**CHAT, "max_tokens": 0}, 400, "max_tokens"),
        ({**CHAT, "temperature": 7}, 400, "temperature"),
        ({**CHAT, "temperature": "hot"}, 400, "temperature"),
        ({**CHAT, "top_p": 0}, 400, "top_p"),
        ({**CHAT, "seed": -1}, 400, "seed"),
        ({**CHAT, "stop": [1, 2]}, 400, "stop"),
        ({**CHAT, "stop": ["x"] * 100}, 400, "stop"),
        ({**CHAT, "stream": "yes"}, 400, "stream"),
        ({**CHAT, "n": 3}, 400, "n"),
    ],
)
def test_hostile_chat_requests_get_openai_errors(served, body, status, param):
    answer_status, answer = request(served, "POST", "/v1/chat/completions", body)
    assert_openai_error(answer_status, answer, status, param=param)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": MODEL_NAME}, "prompt"),
        ({"model": MODEL_NAME, "prompt": []}, "prompt"),
        ({"model": MODEL_NAME, "prompt": [1, "two"]}, "prompt"),
        ({"model": MODEL_NAME, "prompt": ["a", ["b"]]}, "prompt"),
        ({"model": MODEL_NAME, "prompt": [[1, [2]]]}, "prompt"),
        ({"model": MODEL_NAME, "prompt": [[]]}, "prompt"),
        ({"model": MODEL_NAME, "prompt": [True, 5]}, "prompt"),
        ({"model": MODEL_NAME, "prompt": [1.5]}, "prompt"),
        ({"model": MODEL_NAME, "prompt": [-1]}, "prompt"),
        ({"model": MODEL_NAME, "prompt": [[5, 10**9]]}, "prompt"),
        ({"model": MODEL_NAME, "prompt": {"text": "hi"}}, "prompt"),
        ({"model": MODEL_NAME, "prompt": 42}, "prompt"),
        ({"model": MODEL_NAME, "prompt": ["hi"] * 257}, "prompt"),
        ({"model": MODEL_NAME, "prompt": "hi", "max_tokens": -1}, "max_tokens"),
        ({"model": MODEL_NAME, "prompt": "hi", "echo": True, "max_tokens": -3}, "max_tokens"),
        ({"model": MODEL_NAME, "prompt": "hi", "logprobs": -1}, "logprobs"),
        ({"model": MODEL_NAME, "prompt": "hi", "logprobs": True}, "logprobs"),
        ({"model": MODEL_NAME, "prompt": "", "echo": True, "max_tokens": 0, "logprobs": 1}, "prompt"),
        ({"model": MODEL_NAME, "prompt": "hi", "stop": {"a": 1}}, "stop"),
        ({"model": MODEL_NAME, "prompt": "hi", "logprobs": 99}, "logprobs"),
        ({"model": MODEL_NAME, "prompt": "hi", "echo": "yes"}, "echo"),
        ({"model": MODEL_NAME, "prompt": "hi", "max_tokens": 0}, "max_tokens"),
        ({"model": MODEL_NAME, "prompt": "hi", "max_tokens": 100_000}, "max_tokens"),
    ],
)
def test_hostile_completion_requests_get_openai_errors(served, body, param):
    status, answer = request(served, "POST", "/v1/completions", body)
    assert_openai_error(status, answer, 400, param=param)


def test_oversized_missing_length_and_unknown_routes(served):
    huge = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 50000000\r\n\r\n{"
    assert_openai_error(*raw_exchange(served, huge), 413)
    no_length = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\r\n"
    assert_openai_error(*raw_exchange(served, no_length), 411)
    chunked = b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    assert_openai_error(*raw_exchange(served, chunked), 411)
    assert_openai_error(*request(served, "POST", "/v1/embeddings", {"model": MODEL_NAME}), 404)
    assert_openai_error(*request(served, "GET", "/etc/passwd"), 404)
    assert_openai_error(*request(served, "DELETE", "/v1/models"), 405)
    # Still serving after all of that.
    assert request(served, "GET", "/v1/models")[0] == 200


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "example.com", "::"])
def test_refuses_a_non_loopback_host_without_allow_remote(tmp_path, capsys, host):
    from evalcore.cli import main

    # Refused before the model is loaded (the folder is empty).
    argv = ["serve", "--model", "hf", "--model-args", f"path={tmp_path}", "--port", "0", "--host", host]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert "not a loopback address" in error and "--allow-remote" in error


def test_a_busy_model_answers_503_instead_of_queueing_forever():
    from evalcore.cli.serve import MAX_WAITING, ModelService, RequestError  # the package's public names

    service = ModelService(None, name="m", max_tokens_limit=8, queue_timeout=0.05)
    service.acquire()  # a long answer holds the model
    with pytest.raises(RequestError, match="busy") as error:
        service.acquire()
    assert error.value.status == 503 and error.value.retry_after >= 1
    for _ in range(MAX_WAITING):
        service.waiting.acquire()  # the queue is full
    with pytest.raises(RequestError, match="too many requests") as error:
        service.acquire()
    assert error.value.retry_after >= 1


def test_by_default_a_request_waits_for_its_turn_however_long():
    """No queue time-out unless one is set: a request behind a long answer gets its turn, never a 503."""
    from evalcore.cli.serve import MAX_WAITING, ModelService

    service = ModelService(None, name="m", max_tokens_limit=8)
    assert service.queue_timeout is None
    service.acquire()  # a long answer holds the model
    outcome = []

    def wait_for_turn():
        try:
            service.acquire()
            outcome.append("turn")
            service.release()
        except Exception as exc:  # a 503 would land here
            outcome.append(exc)

    waiter = threading.Thread(target=wait_for_turn)
    waiter.start()
    assert service.wait_until(lambda: service.waiting._value < MAX_WAITING, 60)  # it waits in the queue
    waiter.join(0.5)  # it keeps waiting: a time-out would have answered by now
    assert outcome == []
    service.release()
    waiter.join(60)
    assert outcome == ["turn"]


def test_a_queue_timeout_503_carries_retry_after_over_http():
    from evalcore.cli.serve import ModelService, make_server

    service = ModelService(None, name="m", max_tokens_limit=8, queue_timeout=0.05)
    service.typical_hold = 7.2  # turns at the model have taken about 7 s
    server = make_server(service, host="127.0.0.1", port=0, max_body_bytes=65536)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    service.acquire()  # the model is busy
    try:
        connection = http.client.HTTPConnection(*server.server_address[:2], timeout=60)
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
        connection.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        answer = json.loads(response.read())
        connection.close()
    finally:
        service.release()
        server.shutdown()
        server.server_close()
    assert response.status == 503 and answer["error"]["code"] == "busy"
    assert "queue time-out" in answer["error"]["message"]
    assert response.getheader("Retry-After") == "8"


def test_eight_concurrent_clients_all_complete_without_5xx(served):
    """Eight clients at once on the CPU server (default settings: no queue time-out), different prompts
    (so they do not all share one batch): every request is answered 200, none refused."""
    results = []

    def ask(i):
        chat = {"model": MODEL_NAME, "messages": [{"role": "user", "content": f"Question {i}: name a number."}]}
        results.append(request(served, "POST", "/v1/chat/completions", {**chat, "max_tokens": 2}, timeout=600))

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [status for status, _ in results] == [200] * 8, results
    assert all(body["choices"][0]["message"]["content"] is not None for _, body in results)


@pytest.mark.parametrize("value", ["nan", "-5", "0", "never", "inf"])
def test_a_hostile_queue_timeout_from_the_environment_is_one_clear_error(tmp_path, capsys, monkeypatch, value):
    from evalcore.cli import main

    monkeypatch.setenv("PODIUM_SERVE_QUEUE_TIMEOUT", value)
    assert main(["serve", "--model", "hf", "--model-args", f"path={tmp_path}", "--port", "0"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "$PODIUM_SERVE_QUEUE_TIMEOUT must be 'none'" in error and repr(value) in error


def test_the_queue_timeout_setting_parses_none_and_seconds(monkeypatch):
    from evalcore.cli.serve import parse_queue_timeout

    assert [parse_queue_timeout(v) for v in (None, "none", " NONE ", "600", "0.5", 30)] == [None, None, None, 600.0, 0.5, 30.0]
