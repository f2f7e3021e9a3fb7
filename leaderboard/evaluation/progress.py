"""Requests done per task, reported while a submission runs, without changing the engine.

:class:`CountingBackend` wraps a model backend: the engine hands it each task's requests in one
call, so the total is known at once; the backend reports each finished batch, and the wrapper
passes the running count to ``report`` at most every ``every_s`` seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from evalcore.models.base import Backend


class CountingBackend(Backend):
    """``backend`` with its request progress sent to ``report(done, total)``."""

    def __init__(self, backend: Backend, report: Callable[[int, int], None], *, every_s: float = 2.0):
        self.inner = backend
        self.name = backend.name
        self.report = report
        self.every_s = every_s
        self.done = 0
        self.total = 0
        self._last = 0.0

    def reset(self) -> None:
        """A new task starts: count from zero."""
        self.done = self.total = 0
        self._last = 0.0

    def _advance(self, n: int) -> None:
        self.done = min(self.total, self.done + int(n))
        now = time.monotonic()
        if now - self._last >= self.every_s:
            self._last = now
            self.report(self.done, self.total)

    def _run(self, method, requests, progress):
        self.total += len(requests)
        self.report(self.done, self.total)

        def tick(n: int) -> None:
            self._advance(n)
            if progress is not None:
                progress(n)

        results = method(requests, progress=tick)
        self.done = self.total  # calls run one after another: everything asked so far is answered
        return results

    @property
    def identity(self):
        return self.inner.identity

    def loglikelihood(self, requests, *, progress=None):
        return self._run(self.inner.loglikelihood, requests, progress)

    def loglikelihood_rolling(self, requests, *, progress=None):
        return self._run(self.inner.loglikelihood_rolling, requests, progress)

    def generate_until(self, requests, *, progress=None):
        return self._run(self.inner.generate_until, requests, progress)

    def stream_chat(self, messages, params=None):
        return self.inner.stream_chat(messages, params)

    def chat_context(self, messages, **template) -> str:
        return self.inner.chat_context(messages, **template)

    def chat_template_choice(self, name: str | None = None) -> dict:
        return self.inner.chat_template_choice(name)

    # What the engine asks of a backend beyond its methods: the wrapped one's answer (a chat-only endpoint
    # gets conversations, not plain prompts; its log-likelihood tasks are refused up front).
    @property
    def sends_messages(self) -> bool:
        return bool(getattr(self.inner, "sends_messages", False))

    @property
    def scores_loglikelihood(self) -> bool:
        return bool(getattr(self.inner, "scores_loglikelihood", True))

    def close(self) -> None:
        self.inner.close()
