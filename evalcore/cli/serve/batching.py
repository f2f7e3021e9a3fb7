"""Non-streamed chat requests that wait for the model are answered together, as vLLM's server batches.

Each request renders its conversation with the model's chat template, joins the queue, then waits
for the model lock (:meth:`ModelService.acquire`, with its bounds and 503s). Whoever holds the lock
takes the queued requests (at most ``max_batch``) and answers them with one
``backend.generate_until`` call, so concurrent clients share forward passes, and rows that share a
prefix (the same few-shot examples) share its computation. On the CPU only requests that share at
least half of the first one's prompt join its batch (:meth:`ChatBatcher._joins`); the others wait
for the next. A request answered by another's batch
finds its answer when its own turn at the lock comes, and leaves at once. A lone request is a batch
of one. Streamed requests, and backends without a chat template, keep the one-request path (under
the model lock, except on a backend that schedules its own batches: ``ModelService.hold``).

A backend that schedules its own batches (``schedules_batches``: the vllm backend, whose engine adds
each request to the running batch at its next step) takes no lock and no queue: every request goes
to the engine as it arrives, from its own thread, so concurrent clients share decode steps whatever
their prompts (continuous batching, as vLLM's own server does). At most ``MAX_WAITING`` such
requests are in flight; more get 503 at once.

Greedy answers are the same text either way (tests/evalcore/models/test_serve.py compares the two
paths); a sampled answer follows its request's ``seed`` (random when none is given) whatever its batch.
"""

from __future__ import annotations

import os
import random
import threading
from dataclasses import dataclass, field

from evalcore.cli.serve.validation import ClientGone, RequestError
from evalcore.models.base import GenerationRequest

MAX_BATCH = 16


@dataclass
class Pending:
    messages: list[dict]
    settings: dict
    done: threading.Event = field(default_factory=threading.Event)
    text: str | None = None
    prompt_tokens: int = 0
    error: BaseException | None = None
    gone: object = None  # callable: whether the client has closed its connection (its answer is then not made)


class ChatBatcher:
    """Answers chat conversations in batches under one service's model lock (backends with a chat
    template and ``chat_prompt_ids``: the transformers backend)."""

    def __init__(self, service, *, max_batch: int = MAX_BATCH) -> None:
        self.service = service
        self.max_batch = max_batch
        self.queue: list[Pending] = []
        self.queue_lock = threading.Lock()
        self.abandoned = 0  # requests dropped from a batch because their client had left

    def answer(self, messages: list[dict], settings: dict, gone=None) -> tuple[str, int]:
        """(generated text, prompt tokens) for one conversation under ``settings`` (validated).

        ``gone`` (optional) says whether the client has left: such a request leaves the queue (ClientGone)
        and a batch never generates for it."""
        mine = Pending(messages, settings, gone=gone)
        if getattr(self.service.backend, "schedules_batches", False):
            return self._answer_in_engine(mine)
        with self.queue_lock:
            self.queue.append(mine)
        self.service.notify()
        try:
            self.service.acquire(gone)
        except (RequestError, ClientGone):
            with self.queue_lock:
                if mine in self.queue:  # nobody took it: leave the queue with the 503 (or unanswered)
                    self.queue.remove(mine)
                    self.service.notify()
                    raise
            mine.done.wait()  # a batch holds it: its answer is coming
        else:
            try:
                while not mine.done.is_set():
                    self._run_batch()
            finally:
                self.service.release()
        if mine.error is not None:
            raise mine.error
        return mine.text or "", mine.prompt_tokens

    def _answer_in_engine(self, mine: Pending) -> tuple[str, int]:
        """One request straight to a backend that batches concurrent calls itself (no model lock)."""
        backend = self.service.backend
        request = self._request(backend, mine)
        if request is None:
            raise mine.error
        release = self.service.hold()  # a place in flight, no lock: the engine batches concurrent calls
        try:
            (result,) = backend.generate_until([request])
        except ValueError as exc:  # the engine refused it (too long, bad parameters)
            raise RequestError(400, str(exc)) from None
        finally:
            release()
        return result.text, mine.prompt_tokens

    def _run_batch(self) -> None:
        with self.queue_lock:
            taken, self.queue = self.queue[: self.max_batch], self.queue[self.max_batch :]
        self.service.notify()
        left = [p for p in taken if p.gone is not None and p.gone()]
        for pending in left:  # their clients closed the connection while waiting: nobody would read it
            pending.error = ClientGone()
            pending.done.set()
        taken = [p for p in taken if p not in left]
        self.abandoned += len(left)
        backend = self.service.backend
        batch, ready = [], []
        try:
            for pending in taken:
                request = self._request(backend, pending)
                if request is None or not ready or self._joins(backend, ready[0][1].context, request.context):
                    batch.append(pending)
                    if request is not None:
                        ready.append((pending, request))
            later = [p for p in taken if p not in batch]
            if later:  # back to the front of the queue, in order, for the next batch
                with self.queue_lock:
                    self.queue[:0] = later
            results = backend.generate_until([r for _, r in ready]) if ready else []
            for (pending, _), result in zip(ready, results, strict=True):
                pending.text = result.text
        except BaseException as exc:  # a model failure: every request of the batch gets it
            for pending in batch or taken:
                pending.error = pending.error or exc
            batch = batch or taken
        finally:
            for pending in batch:
                pending.done.set()

    @staticmethod
    def _joins(backend, first: str, other: str) -> bool:
        """Whether ``other`` joins ``first``'s batch. On a GPU every row does. On the CPU a pass costs
        about as much per row as alone, so a batch pays only through a shared prefix (computed once:
        the same few-shot examples) and costs the lone row's prompt-lookup speculation: rows join
        when they share at least half of the first row's prompt (docs/PERFORMANCE.md, "Chat
        benchmarks")."""
        device = getattr(getattr(backend, "device", None), "type", "cpu")
        if device != "cpu":
            return True
        return len(os.path.commonprefix([first, other])) * 2 >= len(first)

    @staticmethod
    def _request(backend, pending: Pending) -> GenerationRequest | None:
        """The generation request of one conversation, or None after recording why it cannot run."""
        s = pending.settings
        try:
            context = backend.chat_context(pending.messages)
            pending.prompt_tokens = len(backend.chat_prompt_ids(pending.messages))
        except ValueError as exc:
            pending.error = RequestError(400, str(exc))
            return None
        limit = getattr(backend, "max_length", None)
        if limit is not None and pending.prompt_tokens + s["max_tokens"] > limit:
            pending.error = RequestError(
                400, f"the conversation is {pending.prompt_tokens} tokens; with max_tokens={s['max_tokens']} it "
                f"exceeds the model's {limit}-token window: shorten it or lower max_tokens", param="messages",
            )  # fmt: skip
            return None
        seed = s["seed"] if s["seed"] is not None else random.SystemRandom().randrange(2**31)
        return GenerationRequest(
            context=context, until=tuple(s["stop"]), max_gen_toks=s["max_tokens"], do_sample=s["temperature"] > 0,
            temperature=s["temperature"], top_p=s["top_p"], seed=seed,
        )  # fmt: skip
