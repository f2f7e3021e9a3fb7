"""Why a chat answer stopped (item 9 of the README demo's issue: an arena answer cut at the token limit
carried no mark): every backend's stream_chat returns its finish reason, ChatStream keeps it."""

from __future__ import annotations

import json

import pytest

from evalcore.models import load_backend
from evalcore.models.base import ChatStream
from tests.evalcore.models.test_openai_backend import scripted  # noqa: F401  (the scripted endpoint)

HI = [{"role": "user", "content": "hi"}]


def deltas(*parts, reason):
    yield from parts
    return reason


@pytest.mark.parametrize(("reason", "cut"), [("length", True), ("stop", False), (None, False), ("LENGTH", False)])
def test_the_stream_keeps_the_reason_its_generator_returned(reason, cut):
    stream = ChatStream(deltas("a", "b", reason=reason))
    assert stream.finish_reason is None and not stream.cut  # not known while it runs
    assert "".join(stream) == "ab"
    assert (stream.finish_reason, stream.cut) == (reason, cut)


def test_a_plain_iterator_says_nothing():
    stream = ChatStream(iter(["x", "y"]))
    assert list(stream) == ["x", "y"] and stream.finish_reason is None and not stream.cut


def events_with(finish_reason):
    chunks = [json.dumps({"choices": [{"delta": {"content": c}, "finish_reason": None}]}) for c in ("Hel", "lo")]
    chunks.append(json.dumps({"choices": [{"delta": {}, "finish_reason": finish_reason}]}))
    return [*chunks, "[DONE]"]


@pytest.mark.parametrize(
    ("finish_reason", "expected", "cut"),
    [("length", "length", True), ("stop", "stop", False), (7, None, False), ({"x": 1}, None, False)],
)
def test_an_endpoints_finish_reason_comes_through(scripted, finish_reason, expected, cut):  # noqa: F811
    _, url = scripted(("events", events_with(finish_reason), None))
    backend = load_backend("openai", base_url=url, model="m")
    stream = ChatStream(backend.stream_chat(HI, {"max_new_tokens": 2}))
    assert "".join(stream) == "Hello"
    assert (stream.finish_reason, stream.cut) == (expected, cut)


@pytest.mark.slow
def test_the_hf_backend_says_when_max_new_tokens_ran_out(smollm2):
    messages = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
    short = ChatStream(smollm2.stream_chat(messages, {"max_new_tokens": 2, "temperature": 0}))
    text = "".join(short)
    assert text and short.cut and short.finish_reason == "length"
    whole = ChatStream(smollm2.stream_chat(messages, {"max_new_tokens": 200, "temperature": 0}))
    answer = "".join(whole)
    assert "Paris" in answer and whole.finish_reason == "stop" and not whole.cut  # ended by the model
    stopped = ChatStream(smollm2.stream_chat(messages, {"max_new_tokens": 200, "temperature": 0, "stop": ["Paris"]}))
    assert "Paris" not in "".join(stopped) and stopped.finish_reason == "stop"
