"""The one interface every model backend implements.

Three benchmark request kinds (the same as EleutherAI's lm-evaluation-harness) plus chat
streaming for the arena:

- :meth:`Backend.loglikelihood`: log P(continuation | context) and whether the continuation is the
  greedy one;
- :meth:`Backend.loglikelihood_rolling`: the log-likelihood of a whole text (perplexity);
- :meth:`Backend.generate_until`: generated text, cut at the first stop sequence;
- :meth:`Backend.stream_chat`: text deltas of an answer to a chat conversation.

Requests and results are frozen dataclasses, results come back in request order.
"""

from __future__ import annotations

import abc
import hashlib
import json
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

# Models are built one at a time in a process (``load_backend`` and the reward classifier hold this).
# Building one imports transformers' lazily loaded modules (vLLM imports them too), and those imports
# are not thread-safe: two threads of one threads-pool worker building two models at once get
# "cannot import name 'AutoModelForCausalLM' from 'transformers'" (an evaluation and a judge starting
# together in `PODIUM_DEMO_BACKEND=vllm make demo`). Requests to built models are not serialised.
loading_lock = threading.RLock()


class ModelDoesNotFit(ValueError):
    """A model's weights and caches do not fit the memory it may use (raised before anything is allocated)."""


@dataclass(frozen=True)
class LoglikelihoodRequest:
    """Score ``continuation`` given ``context`` (plain strings, no chat template)."""

    context: str
    continuation: str


@dataclass(frozen=True)
class LoglikelihoodResult:
    """Sum of the continuation's token log-probabilities and whether greedy decoding yields it."""

    logprob: float
    is_greedy: bool
    num_tokens: int = 0


@dataclass(frozen=True)
class RollingRequest:
    """Score a whole ``text``; ``stride`` < window length gives a sliding window."""

    text: str
    max_length: int | None = None
    stride: int | None = None


@dataclass(frozen=True)
class RollingResult:
    """Total log-probability of every token of the text, each scored exactly once."""

    logprob: float
    num_tokens: int


@dataclass(frozen=True)
class GenerationRequest:
    """Generate after ``context`` until a stop sequence, EOS, or ``max_gen_toks`` new tokens.

    ``until`` are stop strings applied on the decoded text; the returned text ends before the
    first of them. ``seed`` makes sampling reproducible per request, whatever the batch.
    ``messages`` ((role, content) pairs) is the same prompt as a chat conversation, for backends
    that send conversations rather than text (``openai-chat``); the others read ``context``.
    """

    context: str
    until: tuple[str, ...] = ()
    max_gen_toks: int = 256
    do_sample: bool = False
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    messages: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class GenerationResult:
    """Generated text (stop sequence excluded), its token count and why generation ended."""

    text: str
    num_tokens: int
    finish_reason: str  # "stop" (stop string or EOS) or "length" (max_gen_toks reached)


@dataclass(frozen=True)
class ChatParams:
    """Decoding settings for :meth:`Backend.stream_chat`."""

    max_new_tokens: int = 512
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    system_prompt: str | None = None

    @classmethod
    def from_mapping(cls, params: ChatParams | dict | None) -> ChatParams:
        """Accept a ChatParams, a dict (None values dropped, ``max_tokens`` read as
        ``max_new_tokens``, unknown keys rejected) or None."""
        if params is None:
            return cls()
        if isinstance(params, ChatParams):
            return params
        if not isinstance(params, dict):
            raise ValueError(f"chat params must be a dict or ChatParams, got {type(params).__name__}")
        allowed = set(cls.__dataclass_fields__)
        params = {k: v for k, v in params.items() if v is not None}
        if "max_tokens" in params and "max_new_tokens" not in params:
            params["max_new_tokens"] = params.pop("max_tokens")
        unknown = sorted(set(params) - allowed)
        if unknown:
            raise ValueError(f"unknown chat parameter(s) {unknown}; allowed: {sorted(allowed)}")
        values = dict(params)
        if "stop" in values:
            stop = values["stop"]
            values["stop"] = (stop,) if isinstance(stop, str) else tuple(stop or ())
        return cls(**values)


@dataclass(frozen=True)
class ModelIdentity:
    """What a score is attached to: the weights' hash and how they were run."""

    backend: str
    name: str
    weights_sha256: str
    dtype: str
    batch_size: str
    extra: dict = field(default_factory=dict)

    @property
    def key(self) -> str:
        """A short string that changes whenever any identity field changes."""
        payload = json.dumps(self.as_dict(), sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:32]

    def as_dict(self) -> dict:
        return {
            "backend": self.backend,
            "name": self.name,
            "weights_sha256": self.weights_sha256,
            "dtype": self.dtype,
            "batch_size": self.batch_size,
            **({"extra": self.extra} if self.extra else {}),
        }


def validate_messages(messages: Sequence[dict]) -> list[dict]:
    """Check a chat conversation: a non-empty list of {"role", "content"} dicts."""
    if not isinstance(messages, Sequence) or isinstance(messages, str) or not messages:
        raise ValueError("messages must be a non-empty list of {'role': ..., 'content': ...} dicts")
    checked = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or "role" not in message or "content" not in message:
            raise ValueError(f"message {i} must be a dict with 'role' and 'content'")
        if message["role"] not in ("system", "user", "assistant"):
            raise ValueError(f"message {i} has role {message['role']!r}; use system, user or assistant")
        if not isinstance(message["content"], str):
            raise ValueError(f"message {i} content must be a string")
        checked.append({"role": message["role"], "content": message["content"]})
    return checked


def cut_at_stop(text: str, until: Sequence[str]) -> tuple[str, bool]:
    """Cut ``text`` before the earliest stop string; return (text, whether one was found)."""
    cut = len(text)
    for stop in until:
        if stop:
            index = text.find(stop)
            if index != -1:
                cut = min(cut, index)
    return text[:cut], cut < len(text)


FINISH_LENGTH = "length"  # stream_chat stopped because max_new_tokens ran out (OpenAI's finish_reason)


class ChatStream:
    """The text deltas of a :meth:`Backend.stream_chat` stream, and why it stopped once it has.

    A backend's ``stream_chat`` generator may ``return`` its finish reason (OpenAI's words: ``"length"``
    when ``max_new_tokens`` ran out, ``"stop"`` when the model ended or a stop string was met); iterating
    this wrapper yields the same deltas and keeps that value in :attr:`finish_reason` (None while the
    stream runs, and for a stream that does not say). Callers that only want text iterate the stream as
    before; the arena marks an answer cut at the token limit (:attr:`cut`).
    """

    def __init__(self, deltas: Iterator[str]):
        self._deltas = deltas
        self.finish_reason: str | None = None

    def __iter__(self) -> Iterator[str]:
        self.finish_reason = yield from self._deltas

    @property
    def cut(self) -> bool:
        """Whether the answer stopped at ``max_new_tokens`` (as far as the backend could tell)."""
        return self.finish_reason == FINISH_LENGTH


class Backend(abc.ABC):
    """A model that answers the three benchmark request kinds and streams chat answers.

    Subclasses set ``name`` (the registry key) and implement the four methods. Every method takes
    a sequence of requests and returns one result per request, in request order.
    """

    name: str = "base"

    @property
    @abc.abstractmethod
    def identity(self) -> ModelIdentity:
        """The model identity recorded with every result and used as the request-cache key."""

    @abc.abstractmethod
    def loglikelihood(
        self, requests: Sequence[LoglikelihoodRequest], *, progress=None
    ) -> list[LoglikelihoodResult]:
        """Score continuations; see :class:`LoglikelihoodRequest`."""

    def loglikelihood_tokens(
        self, pairs: Sequence[tuple[Sequence[int], Sequence[int]]], *, progress=None
    ) -> list[LoglikelihoodResult]:
        """Score (context ids, continuation ids) pairs of the backend's ``tokenizer`` as given: no text is
        re-tokenised and no whitespace moved, so the caller decides exactly which tokens are scored (the
        DPO implicit reward does). Backends that cannot score token ids refuse with a ValueError."""
        raise ValueError(f"the {self.name!r} backend cannot score token ids")

    @abc.abstractmethod
    def loglikelihood_rolling(
        self, requests: Sequence[RollingRequest], *, progress=None
    ) -> list[RollingResult]:
        """Score whole texts; see :class:`RollingRequest`."""

    @abc.abstractmethod
    def generate_until(
        self, requests: Sequence[GenerationRequest], *, progress=None
    ) -> list[GenerationResult]:
        """Generate text; see :class:`GenerationRequest`."""

    def chat_context(self, messages: Sequence[dict], *, chat_template: str | None = None) -> str:
        """The conversation as one prompt string, rendered with the model's chat template and ending
        where the assistant's answer begins. Used to evaluate benchmarks "with the chat template".
        ``chat_template`` names one of the tokenizer's templates (``--apply-chat-template NAME``;
        :mod:`evalcore.models.chat_templates`).

        Backends that cannot see the model's tokenizer (an HTTP endpoint) refuse with a ValueError.
        """
        raise ValueError(f"the {self.name!r} backend cannot apply a chat template to benchmark prompts")

    def chat_template_choice(self, name: str | None = None) -> dict:
        """Which template :meth:`chat_context` renders with, as the protocol records it: ``template_name``,
        ``template_used``, ``template_sha256``. Backends that render with a tokenizer say so and refuse a
        name the tokenizer lacks; others record nothing and refuse any name."""
        if name is not None:
            raise ValueError(f"the {self.name!r} backend cannot choose a chat template by name")
        return {}

    def next_token_logprobs(
        self, prompts: Sequence[Sequence[int]], token_ids: Sequence[int], *, progress=None
    ) -> list[list[float] | Exception]:
        """Log-probabilities of each of ``token_ids`` as the token that follows each prompt.

        Prompts are token ids of the backend's ``tokenizer``. Returns, per prompt, one log-probability
        per id (in ``token_ids`` order), or the exception that failed that prompt (an endpoint error,
        an id left out by the server's top-k cut): the caller records that item as failed. Backends
        that cannot read next-token probabilities refuse with a ValueError.
        """
        raise ValueError(f"the {self.name!r} backend cannot read next-token log-probabilities")

    @abc.abstractmethod
    def stream_chat(self, messages: Sequence[dict], params: ChatParams | dict | None = None) -> Iterator[str]:
        """Yield text deltas of the assistant's answer to ``messages`` (OpenAI-style dicts); a generator
        may return its finish reason (``"length"``, ``"stop"``), read through :class:`ChatStream`."""

    def chat(self, messages: Sequence[dict], params: ChatParams | dict | None = None) -> str:
        """The whole answer of :meth:`stream_chat` as one string."""
        return "".join(self.stream_chat(messages, params))

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (GPU memory, HTTP sessions)."""
