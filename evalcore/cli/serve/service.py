"""One loaded backend behind a lock, answering validated OpenAI-style chat and completions payloads."""

from __future__ import annotations

import math
import secrets
import threading
import time

from evalcore.cli.serve.batching import ChatBatcher
from evalcore.cli.serve.completions import complete, count_tokens
from evalcore.cli.serve.validation import (
    ClientGone,
    RequestError,
    check_model,
    completion_options,
    prompts,
    sampling,
)
from evalcore.models import ChatParams
from evalcore.models.base import validate_messages

MAX_WAITING = 32  # requests queued for the model beyond this get 503 at once
GONE_POLL_SECONDS = 0.5  # how often a waiting request checks that its client is still connected
QUEUE_TIMEOUT_ENV = "PODIUM_SERVE_QUEUE_TIMEOUT"
MAX_QUEUE_TIMEOUT = 7 * 24 * 3600.0  # a week; "none" waits without a bound
MAX_RETRY_AFTER = 3600  # seconds


def parse_queue_timeout(value, source: str = "--queue-timeout") -> float | None:
    """Seconds a request may wait for the model, or None (``none``: as long as its client waits).

    A number must be finite, above 0 and at most :data:`MAX_QUEUE_TIMEOUT`; anything else is one
    ValueError naming ``source`` and the value."""
    if value is None:
        return None
    text = str(value).strip()
    if text.lower() == "none":
        return None
    try:
        seconds = float(text)
    except (TypeError, ValueError):
        seconds = math.nan
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_QUEUE_TIMEOUT):
        raise ValueError(
            f"{source} must be 'none' (wait as long as the client does) or a number of seconds above 0 and at "
            f"most {MAX_QUEUE_TIMEOUT:g}, got {str(value)[:40]!r}"
        )
    return seconds


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}  # fmt: skip


class ModelService:
    """One loaded backend behind a lock, answering validated OpenAI-style payloads."""

    def __init__(self, backend, *, name: str, max_tokens_limit: int, queue_timeout: float | None = None) -> None:
        self.backend = backend
        self.name = name
        self.max_tokens_limit = max_tokens_limit
        self.queue_timeout = parse_queue_timeout(queue_timeout, "queue_timeout")
        self.lock = threading.Lock()
        self.held_since = 0.0  # when the model lock was last taken (monotonic)
        self.typical_hold = 1.0  # seconds a turn at the model takes (moving average): the Retry-After
        self.waiting = threading.BoundedSemaphore(MAX_WAITING)
        self.changed = threading.Condition()  # notified whenever a request takes or leaves a place, or the queue moves
        self.created = int(time.time())
        batchable = callable(getattr(backend, "chat_prompt_ids", None)) and callable(
            getattr(backend, "chat_context", None)
        )
        self.batcher = ChatBatcher(self) if batchable else None

    def models(self) -> dict:
        entry = {"id": self.name, "object": "model", "created": self.created, "owned_by": "podium"}
        return {"object": "list", "data": [entry]}

    def hold(self, gone=None):
        """Enter the model for one request; return the function that leaves it. A backend that schedules
        its own batches (``schedules_batches``: vLLM's engine) takes concurrent requests from many threads,
        so a request only takes one of the ``MAX_WAITING`` places in flight (none free: 503 at once);
        any other backend is entered under the model lock (:meth:`acquire`, which ``gone`` lets leave)."""
        if getattr(self.backend, "schedules_batches", False):
            self._take_place()
            return self.waiting.release
        self.acquire(gone)
        return self.release

    def retry_after(self) -> int:
        """Seconds a refused client should wait before asking again: a turn at the model, as measured."""
        return max(1, min(MAX_RETRY_AFTER, math.ceil(self.typical_hold)))

    def notify(self) -> None:
        """Wake whoever waits in :meth:`wait_until`: a place was taken or left, or the queue moved."""
        with self.changed:
            self.changed.notify_all()

    def wait_until(self, predicate, timeout: float) -> bool:
        """Block until ``predicate()`` holds (checked at every :meth:`notify`) or ``timeout`` seconds pass;
        whether it holds. How a test or a monitor waits for a state of the queue without polling."""
        with self.changed:
            return self.changed.wait_for(predicate, timeout)

    def _take_place(self) -> None:
        """One of the ``MAX_WAITING`` places for requests in flight or waiting; none free: 503 at once."""
        if not self.waiting.acquire(blocking=False):
            raise RequestError(503, "too many requests are waiting for the model; retry later", code="busy",
                               retry_after=self.retry_after())  # fmt: skip
        self.notify()

    def acquire(self, gone=None) -> None:
        """Take the model lock behind at most ``MAX_WAITING`` others, waiting as long as the client does
        (``queue_timeout`` None) or at most ``queue_timeout`` seconds (then 503 with Retry-After).

        ``gone`` (a callable, optional) says whether the client has closed its connection; it is asked
        every ``GONE_POLL_SECONDS`` while waiting, and a client that left raises :class:`ClientGone`, so
        an abandoned request gives its place back instead of taking a turn nobody reads."""
        self._take_place()
        try:
            deadline = None if self.queue_timeout is None else time.monotonic() + self.queue_timeout
            while True:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                wait = left if gone is None else GONE_POLL_SECONDS if left is None else min(left, GONE_POLL_SECONDS)
                if self.lock.acquire(timeout=-1 if wait is None else wait):
                    break
                if gone is not None and gone():
                    raise ClientGone()
                if deadline is not None and time.monotonic() >= deadline:
                    raise RequestError(503, f"the model is busy: no turn within the server's {self.queue_timeout:g} s "
                                            "queue time-out (--queue-timeout); retry later",
                                       code="busy", retry_after=self.retry_after())  # fmt: skip
            self.held_since = time.monotonic()
        finally:
            self.waiting.release()
            self.notify()

    def release(self) -> None:
        """Leave the model lock, noting how long the turn took (for Retry-After)."""
        took = time.monotonic() - self.held_since
        self.typical_hold = 0.7 * self.typical_hold + 0.3 * took
        self.lock.release()

    # -- chat -----------------------------------------------------------------------------------------
    def chat(self, payload: dict, gone=None):
        """Validate a chat request; return (settings, deltas). ``deltas`` holds the model (:meth:`hold`)
        until it is exhausted or closed; errors before the first delta raise :class:`RequestError`, and a
        client that leaves while its request waits (``gone``, see :meth:`acquire`) :class:`ClientGone`."""
        check_model(payload, self.name)
        try:
            messages = validate_messages(payload.get("messages"))
        except (ValueError, TypeError) as exc:
            raise RequestError(400, str(exc), param="messages") from None
        s = sampling(payload, default_max=min(512, self.max_tokens_limit), limit=self.max_tokens_limit)
        if not s["stream"] and self.batcher is not None and _has_template(self.backend):
            text, s["prompt_tokens"] = self.batcher.answer(messages, s, gone)  # shares passes with concurrent requests
            return s, Answered(text)
        params = ChatParams(
            max_new_tokens=s["max_tokens"], temperature=s["temperature"], top_p=s["top_p"],
            seed=s["seed"], stop=s["stop"],
        )  # fmt: skip
        release = self.hold(gone)
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
    def completion(self, payload: dict, gone=None) -> tuple[dict, list[dict], dict]:
        """Validate and run a completions request; return (settings, choices, usage) (``gone``: see
        :meth:`acquire`)."""
        check_model(payload, self.name)
        batch = prompts(payload, vocab_size=getattr(self.backend, "vocab_size", None))
        echo, logprobs = completion_options(payload)
        s = sampling(payload, default_max=min(16, self.max_tokens_limit), limit=self.max_tokens_limit,
                     allow_zero=echo)  # fmt: skip
        if any(p == "" for p in batch) and (s["max_tokens"] == 0 or logprobs is not None):
            raise RequestError(400, "prompt must not be empty", param="prompt")
        seed = s["seed"] if s["seed"] is not None else secrets.randbelow(2**31)
        release = self.hold(gone)
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
