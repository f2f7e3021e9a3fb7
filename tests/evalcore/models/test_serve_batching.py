"""``python -m evalcore serve`` answers concurrent non-streamed chat requests in one batched call: each
gets the answer it gets alone (greedy, the real SmolLM2), its own usage, and a bad one among them
fails alone."""

from __future__ import annotations

import json
import threading

from tests.evalcore.models.test_serve import MODEL_NAME, request, serve_process

QUESTIONS = ["What is 2 + 2?", "Name a colour.", "Say hello in French.", "What is the capital of Italy?"]


def chat_body(question: str, **extra) -> dict:
    return {"model": MODEL_NAME, "messages": [{"role": "user", "content": question}], "max_tokens": 12,
            "temperature": 0, **extra}  # fmt: skip


def test_concurrent_chat_requests_get_their_lone_answers(smollm2_dir):
    served = serve_process(str(smollm2_dir))
    alone = {}
    for question in QUESTIONS:  # one at a time, streamed: the one-request path
        status, raw = request(served, "POST", "/v1/chat/completions", chat_body(question, stream=True))
        assert status == 200
        alone[question] = raw
    answers: dict[str, tuple] = {}
    bad = chat_body("word " * 8000, max_tokens=256)  # over the 8192-token window with max_tokens

    def ask(key, body):
        answers[key] = request(served, "POST", "/v1/chat/completions", body, timeout=300)

    threads = [threading.Thread(target=ask, args=(q, chat_body(q))) for q in QUESTIONS]
    threads.append(threading.Thread(target=ask, args=("bad", bad)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    status, body = answers.pop("bad")
    assert status == 400 and "token window" in body["error"]["message"]
    for question, (status, body) in answers.items():
        assert status == 200, body
        text = body["choices"][0]["message"]["content"]
        streamed = "".join(
            json.loads(event[6:])["choices"][0]["delta"].get("content", "")
            for event in alone[question].split("\n\n")
            if event.startswith("data: {") and '"delta"' in event
        )
        assert text == streamed and text, question
        assert body["usage"]["completion_tokens"] >= 1 and body["usage"]["prompt_tokens"] > 10
