"""What judging costs: seconds and tokens per 1,000 judgments.

::

    metered = MeteredBackend(judge)
    with metered:                                   # wall time of the block (see below)
        grades = grade_answers(metered, protocol, items)
    cost_per_1000(seconds=metered.seconds, judgments=sum(not g.cached for g in grades),
                  prompt_tokens=metered.prompt_tokens, completion_tokens=metered.completion_tokens)

:class:`MeteredBackend` wraps any backend and forwards everything to it (``tokenizer``, ``model``,
``sends_messages``, ``scores_loglikelihood``, ``chat_context`` ...), so the judging code runs exactly as
it would on the backend itself; every request through it is timed and its tokens counted:

- ``openai`` / ``openai-chat``: the server's own counts, from the ``usage`` of every answer
  (:attr:`evalcore.models.openai_backend.OpenAIBackend.token_usage`); an answer without one (a stream
  from a hosted API) is counted with the backend's tokenizer when it has one (``tokenizer=DIR``), else
  the totals become unknown (None);
- local backends (``hf``, ``vllm``): the prompt tokens with the model's tokenizer, exactly as the
  backend encodes them (``tok_encode`` of a generation context, the token-id prompts of a log-prob
  verdict); the completion tokens are the tokens the model generated (``GenerationResult.num_tokens``).
  A log-prob verdict generates nothing: 0 completion tokens (an endpoint bills its 1-token answer).

Log-prob verdicts on ``hf`` run on the transformers model directly (batched with shared prefixes,
:mod:`evalcore.judging.logprob`), not through a backend call: the wrapper hands the model out
unchanged, so their time is counted only inside a ``with metered:`` block (whose wall time then is
``seconds``, calls inside it not counted twice), and their prompt tokens are added with
:meth:`MeteredBackend.add_tokens` and :func:`logprob_prompt_tokens`; until then ``prompt_tokens`` is
None (unknown), never a silent undercount.

Cached judgments cost nothing: divide by the judgments actually made (``not j.cached``).
"""

from __future__ import annotations

import math
import numbers
import threading
import time
from collections.abc import Iterator, Sequence

from evalcore.judging.judge import order_messages
from evalcore.judging.logprob import prompt_token_ids
from evalcore.judging.protocol import JudgeProtocol
from evalcore.judging.records import ORDERS, Judgment, PairItem
from evalcore.models.base import Backend


class MeteredBackend(Backend):
    """``backend`` with the time and tokens of every request through it counted.

    Attributes
    ----------
    seconds : float
        Time spent in requests through the wrapper, or the wall time of ``with`` blocks around them.
    calls : int
        Backend calls (one per batch of requests, or per chat).
    prompt_tokens, completion_tokens : int or None
        None when some request's tokens could not be known (see the module docs).
    direct_model_uses : int
        Times the wrapped transformers model was handed out (log-prob verdicts on ``hf``).
    """

    def __init__(self, backend: Backend):
        if not isinstance(backend, Backend):
            raise ValueError(f"MeteredBackend wraps an evalcore Backend, got {type(backend).__name__}")
        self.inner = backend
        self.name = backend.name
        self.seconds = 0.0
        self.calls = 0
        self.direct_model_uses = 0
        self._prompt = 0
        self._completion = 0
        self._unknown = False
        self._uncounted_direct = False
        self._depth = 0
        self._block_start = 0.0
        self._lock = threading.RLock()

    # -- forwarding ------------------------------------------------------------------------------
    def __getattr__(self, name: str):
        if name in ("inner", "__setstate__", "__getstate__"):  # not set yet (copy, pickle)
            raise AttributeError(name)
        value = getattr(self.inner, name)
        if name == "model" and callable(getattr(value, "get_output_embeddings", None)):
            with self._lock:
                self.direct_model_uses += 1
                self._uncounted_direct = True
        return value

    @property
    def identity(self):
        return self.inner.identity

    def __repr__(self) -> str:
        return f"MeteredBackend({self.inner!r})"

    @property
    def prompt_tokens(self) -> int | None:
        return None if self._unknown or self._uncounted_direct else self._prompt

    @property
    def completion_tokens(self) -> int | None:
        return None if self._unknown else self._completion

    def add_tokens(self, *, prompt: int = 0, completion: int = 0) -> None:
        """Add tokens of work done outside a backend call (log-prob verdicts on the model directly)."""
        for name, value in (("prompt", prompt), ("completion", completion)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
                raise ValueError(f"{name} tokens must be a non-negative integer, got {value!r}")
        with self._lock:
            self._prompt += int(prompt)
            self._completion += int(completion)
            self._uncounted_direct = False

    def as_dict(self) -> dict:
        return {"seconds": self.seconds, "calls": self.calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "direct_model_uses": self.direct_model_uses}  # fmt: skip

    # -- timing ----------------------------------------------------------------------------------
    def __enter__(self) -> MeteredBackend:
        with self._lock:
            if self._depth == 0:
                self._block_start = time.perf_counter()
            self._depth += 1
        return self

    def __exit__(self, *exc) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0:
                self.seconds += time.perf_counter() - self._block_start

    def _call(self, function, *args, **kwargs):
        """(``function``'s result, the server's usage during the call or None), the call timed."""
        before = self._usage()
        start = time.perf_counter()
        try:
            out = function(*args, **kwargs)
        finally:
            self._add_time(time.perf_counter() - start, call=True)
        return out, self._usage_since(before)

    def _add_time(self, elapsed: float, *, call: bool) -> None:
        with self._lock:
            self.calls += int(call)
            if self._depth == 0:  # inside a with block its wall time counts instead
                self.seconds += elapsed

    def _usage(self) -> dict | None:
        usage = getattr(self.inner, "token_usage", None)
        return usage if isinstance(usage, dict) else None

    def _usage_since(self, before: dict | None) -> dict | None:
        after = self._usage()
        if before is None or after is None:
            return None
        return {k: after[k] - before.get(k, 0) for k in after}

    def _count(self, usage: dict | None, prompt, completion) -> None:
        """Add a call's tokens: the server's ``usage`` when every answer carried one, else ``prompt()``
        and ``completion()`` (counted with the tokenizer; None = unknown)."""
        if usage is not None and usage.get("responses", 0) and not usage.get("responses_without_usage"):
            prompt_n, completion_n = usage["prompt_tokens"], usage["completion_tokens"]
        else:
            prompt_n, completion_n = prompt(), completion()
        with self._lock:
            if prompt_n is None or completion_n is None:
                self._unknown = True
            else:
                self._prompt += prompt_n
                self._completion += completion_n

    def _encode_len(self, text: str) -> int | None:
        encode = getattr(self.inner, "tok_encode", None)
        if callable(encode):
            return len(encode(text))
        tokenizer = getattr(self.inner, "tokenizer", None)
        if tokenizer is None:
            return None
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    def _sum_lengths(self, texts) -> int | None:
        total = 0
        for text in texts:
            n = self._encode_len(text)
            if n is None:
                return None
            total += n
        return total

    def _chat_prompt_len(self, messages) -> int | None:
        ids = getattr(self.inner, "chat_prompt_ids", None)
        if callable(ids):
            return len(ids(list(messages)))
        tokenizer = getattr(self.inner, "tokenizer", None)
        if tokenizer is None or not getattr(tokenizer, "chat_template", None):
            return None
        rendered = tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
        return len(tokenizer(rendered, add_special_tokens=False)["input_ids"])

    # -- the backend interface -------------------------------------------------------------------
    def loglikelihood(self, requests, *, progress=None):
        out, usage = self._call(self.inner.loglikelihood, requests, progress=progress)
        self._count(usage, lambda: self._sum_lengths(r.context + r.continuation for r in requests), lambda: 0)
        return out

    def loglikelihood_rolling(self, requests, *, progress=None):
        out, usage = self._call(self.inner.loglikelihood_rolling, requests, progress=progress)
        self._count(usage, lambda: self._sum_lengths(r.text for r in requests), lambda: 0)
        return out

    def generate_until(self, requests, *, progress=None):
        out, usage = self._call(self.inner.generate_until, requests, progress=progress)
        self._count(usage, lambda: self._sum_lengths(r.context for r in requests),
                    lambda: sum(r.num_tokens for r in out))  # fmt: skip
        return out

    def next_token_logprobs(self, prompts, token_ids, *, progress=None):
        out, usage = self._call(self.inner.next_token_logprobs, prompts, token_ids, progress=progress)
        self._count(usage, lambda: sum(len(p) for p in prompts), lambda: 0)
        return out

    def chat(self, messages, params=None) -> str:
        text, usage = self._call(self.inner.chat, messages, params)
        self._count(usage, lambda: self._chat_prompt_len(messages), lambda: self._encode_len(text))
        return text

    def stream_chat(self, messages, params=None) -> Iterator[str]:
        """The wrapped stream, timed while it produces (not while the caller reads)."""
        before = self._usage()
        start = time.perf_counter()
        stream = iter(self.inner.stream_chat(messages, params))
        self._add_time(time.perf_counter() - start, call=True)
        parts = []
        while True:
            start = time.perf_counter()
            try:
                part = next(stream)
            except StopIteration:
                break
            finally:
                self._add_time(time.perf_counter() - start, call=False)
            parts.append(part)
            yield part
        text = "".join(parts)
        self._count(self._usage_since(before), lambda: self._chat_prompt_len(messages), lambda: self._encode_len(text))

    def chat_context(self, messages, **template) -> str:
        return self.inner.chat_context(messages, **template)

    def chat_template_choice(self, name: str | None = None) -> dict:
        return self.inner.chat_template_choice(name)

    def close(self) -> None:
        self.inner.close()


def logprob_prompt_tokens(tokenizer, protocol: JudgeProtocol, pairs: Sequence[PairItem], *,
                          judgments: Sequence[Judgment] | None = None) -> int:  # fmt: skip
    """Prompt tokens of the log-prob judgments of ``pairs`` (both orders), built as
    :func:`evalcore.judging.judge.judge_pairs` builds them; with ``judgments``, the cached ones (which
    cost nothing) are left out."""
    if protocol.verdict.method != "logprob":
        raise ValueError(f"protocol {protocol.name!r} generates its verdict: its tokens are counted by MeteredBackend")
    cached = {(j.pair_id, j.order) for j in judgments or () if j.cached}
    return sum(
        len(prompt_token_ids(tokenizer, order_messages(protocol, pair, order), protocol.verdict.prefix))
        for pair in pairs for order in ORDERS if (pair.pair_id, order) not in cached
    )  # fmt: skip


def _count_or_none(value, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer or None, got {value!r}")
    return int(value)


def cost_per_1000(*, seconds: float, judgments: int, prompt_tokens: int | None = None,
                  completion_tokens: int | None = None) -> dict:  # fmt: skip
    """Seconds and tokens per 1,000 judgments.

    Returns
    -------
    dict
        ``judgments``, ``seconds``, ``seconds_per_1000``, ``judgments_per_second``,
        ``prompt_tokens_per_1000``, ``completion_tokens_per_1000``, ``tokens_per_1000`` (None where the
        count is unknown, or with no judgment), ``notes``.
    """
    if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real) or not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"seconds must be a finite number >= 0, got {seconds!r}")
    if isinstance(judgments, bool) or not isinstance(judgments, numbers.Integral) or judgments < 0:
        raise ValueError(f"judgments must be a non-negative integer, got {judgments!r}")
    prompt = _count_or_none(prompt_tokens, "prompt_tokens")
    completion = _count_or_none(completion_tokens, "completion_tokens")
    notes = []
    n = int(judgments)
    if n == 0:
        notes.append("no judgment was made (all cached?): no cost per judgment")

    def per_1000(value):
        return None if value is None or n == 0 else 1000.0 * value / n

    if prompt is None or completion is None:
        notes.append("some token counts are unknown (an endpoint without usage and no tokenizer, or "
                     "log-prob verdicts whose prompts were not added)")  # fmt: skip
    return {
        "judgments": n, "seconds": float(seconds),
        "seconds_per_1000": per_1000(float(seconds)),
        "judgments_per_second": n / seconds if seconds > 0 and n else None,
        "prompt_tokens_per_1000": per_1000(prompt),
        "completion_tokens_per_1000": per_1000(completion),
        "tokens_per_1000": per_1000(prompt + completion) if prompt is not None and completion is not None else None,
        "notes": notes,
    }  # fmt: skip
