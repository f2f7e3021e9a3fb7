"""One loaded backend behind a lock, answering validated OpenAI-style chat and completions payloads."""

from __future__ import annotations

import secrets
import threading
import time

from evalcore.cli.serve.batching import ChatBatcher
from evalcore.cli.serve.completions import complete, count_tokens
from evalcore.cli.serve.validation import (
    RequestError,
    check_model,
    completion_options,
    prompts,
    sampling,
)
from evalcore.models import ChatParams
from evalcore.models.base import validate_messages

MAX_WAITING = 32  # requests queued for the model beyond this get 503 at once


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}  # fmt: skip


class ModelService:
    """One loaded backend behind a lock, answering validated OpenAI-style payloads."""

    def __init__(self, backend, *, name: str, max_tokens_limit: int, queue_timeout: float) -> None:
        self.backend = backend
        self.name = name
        self.max_tokens_limit = max_tokens_limit
        self.queue_timeout = queue_timeout
        self.lock = threading.Lock()
        self.waiting = threading.BoundedSemaphore(MAX_WAITING)
        self.created = int(time.time())
        batchable = callable(getattr(backend, "chat_prompt_ids", None)) and callable(
            getattr(backend, "chat_context", None)
        )
        self.batcher = ChatBatcher(self) if batchable else None

    def models(self) -> dict:
        entry = {"id": self.name, "object": "model", "created": self.created, "owned_by": "podium"}
        return {"object": "list", "data": [entry]}

    def hold(self):
        """Enter the model for one request; return the function that leaves it. A backend that schedules
        its own batches (``schedules_batches``: vLLM's engine) takes concurrent requests from many threads,
        so a request only takes one of the ``MAX_WAITING`` places in flight (none free: 503 at once);
        any other backend is entered under the model lock (:meth:`acquire`)."""
        if getattr(self.backend, "schedules_batches", False):
            self._take_place()
            return self.waiting.release
        self.acquire()
        return self.lock.release

    def _take_place(self) -> None:
        """One of the ``MAX_WAITING`` places for requests in flight or waiting; none free: 503 at once."""
        if not self.waiting.acquire(blocking=False):
            raise RequestError(503, "too many requests are waiting for the model; retry later", code="busy")

    def acquire(self) -> None:
        """Take the model lock, waiting at most ``queue_timeout`` behind at most ``MAX_WAITING`` others."""
        self._take_place()
        try:
            if not self.lock.acquire(timeout=self.queue_timeout):
                raise RequestError(503, "the model is busy; retry later", code="busy")
        finally:
            self.waiting.release()

    # -- chat -----------------------------------------------------------------------------------------
    def chat(self, payload: dict):
        """Validate a chat request; return (settings, deltas). ``deltas`` holds the model (:meth:`hold`)
        until it is exhausted or closed; errors before the first delta raise :class:`RequestError`."""
        check_model(payload, self.name)
        try:
            messages = validate_messages(payload.get("messages"))
        except (ValueError, TypeError) as exc:
            raise RequestError(400, str(exc), param="messages") from None
        s = sampling(payload, default_max=min(512, self.max_tokens_limit), limit=self.max_tokens_limit)
        if not s["stream"] and self.batcher is not None and _has_template(self.backend):
            text, s["prompt_tokens"] = self.batcher.answer(
                messages, s
            )  # shares passes with concurrent requests
            return s, Answered(text)
        params = ChatParams(
            max_new_tokens=s["max_tokens"], temperature=s["temperature"], top_p=s["top_p"],
            seed=s["seed"], stop=s["stop"],
        )  # fmt: skip
        release = self.hold()
        try:
            s["prompt_tokens"] = self.chat_prompt_tokens(messages)
            deltas = iter(self.backend.stream_chat(messages, params))
            first = _first_or_error(deltas)
        except BaseException:
            release()
            raise
        return s, LockedDeltas(first, deltas, release)

    def chat_prompt_tokens(self, messages: list[dict]) -> int:
        render = getattr(self.backend, "chat_prompt_ids", None)
        return len(render(messages)) if render is not None else 0

    def chat_ending(self, text: str, settings: dict) -> tuple[str, dict]:
        """(finish_reason, usage) of a finished chat answer."""
        completion_tokens = count_tokens(self.backend, text)
        reason = "length" if completion_tokens >= settings["max_tokens"] else "stop"
        return reason, usage(settings["prompt_tokens"], completion_tokens)

    # -- completions ----------------------------------------------------------------------------------
    def completion(self, payload: dict) -> tuple[dict, list[dict], dict]:
        """Validate and run a completions request; return (settings, choices, usage)."""
        check_model(payload, self.name)
        batch = prompts(payload, vocab_size=getattr(self.backend, "vocab_size", None))
        echo, logprobs = completion_options(payload)
        s = sampling(payload, default_max=min(16, self.max_tokens_limit), limit=self.max_tokens_limit,
                     allow_zero=echo)  # fmt: skip
        if any(p == "" for p in batch) and (s["max_tokens"] == 0 or logprobs is not None):
            raise RequestError(400, "prompt must not be empty", param="prompt")
        seed = s["seed"] if s["seed"] is not None else secrets.randbelow(2**31)
        release = self.hold()
        try:
            done = [complete(self.backend, p, s, echo=echo, logprobs=logprobs, seed=seed) for p in batch]
        finally:
            release()
        choices = [{"index": i, **c.choice} for i, c in enumerate(done)]
        totals = usage(sum(c.prompt_tokens for c in done), sum(c.completion_tokens for c in done))
        return s, choices, totals


class Answered:
    """A whole answer in the shape of :class:`LockedDeltas` (one delta; nothing to release)."""

    def __init__(self, text: str) -> None:
        self.parts = iter([text] if text else [])

    def __iter__(self):
        return self.parts

    def close(self) -> None:
        pass


def _has_template(backend) -> bool:
    return bool(getattr(getattr(backend, "tokenizer", None), "chat_template", None))


class LockedDeltas:
    """Text deltas of one answer; leaves the model (``release``: the lock, or the place in flight) when
    exhausted or closed (idempotent)."""

    def __init__(self, first: str | None, deltas, release) -> None:
        self.first, self.deltas, self.release = first, deltas, release
        self.open = True

    def __iter__(self):
        return self

    def __next__(self) -> str:
        if not self.open:
            raise StopIteration
        if self.first is not None:
            first, self.first = self.first, None
            return first
        try:
            return next(self.deltas)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.open:
            self.open = False
            close = getattr(self.deltas, "close", None)
            try:
                if close is not None:
                    close()
            finally:
                self.release()


def _first_or_error(deltas):
    try:
        return next(deltas)
    except StopIteration:
        return None
    except ValueError as exc:
        raise RequestError(400, str(exc)) from None
