"""``openai-chat``: benchmarks through an OpenAI-compatible **chat** endpoint (lm-evaluation-harness's
``local-chat-completions``): a hosted chat API, ``vllm serve``, ``python -m evalcore serve``.

Generation tasks arrive as conversations (:class:`~evalcore.models.base.GenerationRequest`'s
``messages``, built by the runner as the harness builds them: :mod:`evalcore.engine.chat`) and are
posted to ``/chat/completions``; the endpoint applies the model's chat template. A request without
messages (a judge prompt, a contamination probe) is sent as one user message. The payload is the
harness's: ``messages``, ``model``, ``max_tokens``, ``temperature`` (0 unless the task samples, then
``top_p`` too), ``stop`` (the first 4 stop strings, the API's limit; every stop string is also
applied to the answer here) and ``seed``.

Log-likelihood requests need prompt log-probabilities, which chat endpoints do not return: they are
refused (as the harness refuses them) unless ``completions_logprobs=true`` says that the same server
also answers ``/completions`` with ``echo`` and ``logprobs`` (vLLM's server, ``evalcore serve``); then
they are scored there exactly as the ``openai`` backend scores them.

Everything else is the ``openai`` backend's (:mod:`evalcore.models.openai_backend`): one httpx
connection pool kept alive across requests, ``concurrency`` requests in flight (results in request
order), retries of connection errors, 429 and 5xx with backoff, keys only from ``api_key_env``.
"""

from __future__ import annotations

from collections.abc import Sequence

from evalcore.models.base import (
    GenerationRequest,
    GenerationResult,
    ModelIdentity,
    cut_at_stop,
    validate_messages,
)
from evalcore.models.chat_templates import NAMED_TEMPLATE_REFUSED
from evalcore.models.chat_templates import chat_template_choice as template_choice
from evalcore.models.endpoint import EndpointError, first_choice
from evalcore.models.endpoint_args import as_bool
from evalcore.models.openai_backend import OpenAIBackend

MAX_API_STOPS = 4  # OpenAI's chat API takes at most 4 stop strings (the harness sends stop[:4] too)
CHAT_ARGUMENTS = ("completions_logprobs", "think_end_token")


class OpenAIChatBackend(OpenAIBackend):
    """An OpenAI-compatible chat endpoint for benchmarks.

    Parameters
    ----------
    completions_logprobs : bool
        The server also answers ``/completions`` with prompt log-probabilities: log-likelihood tasks
        are scored there (default false: they are refused).
    think_end_token : str, optional
        A reasoning model's end-of-thinking marker: only the text after it is the answer (the
        harness's option of the same name).
    **kwargs
        The ``openai`` backend's arguments (``base_url``, ``model``, ``api_key_env``, ``timeout``,
        ``max_retries``, ``backoff``, ``concurrency``, ``verify``, ``tokenizer``, ...).
    """

    name = "openai-chat"
    sends_messages = True  # the runner sends generation prompts as conversations

    def __init__(
        self, *, completions_logprobs: bool | str = False, think_end_token: str | None = None, **kwargs
    ) -> None:
        self.completions_logprobs = as_bool(completions_logprobs, "completions_logprobs")
        if think_end_token is not None and (not isinstance(think_end_token, str) or not think_end_token):
            raise ValueError(f"think_end_token must be a non-empty string, got {think_end_token!r}")
        self.think_end_token = think_end_token
        try:
            super().__init__(**kwargs)
        except ValueError as exc:
            if "unknown openai backend argument" in str(exc):
                raise ValueError(f"{str(exc).replace('openai backend', 'openai-chat backend')}, "
                                 f"{', '.join(CHAT_ARGUMENTS)}") from None  # fmt: skip
            raise

    @property
    def scores_loglikelihood(self) -> bool:
        return self.completions_logprobs

    @property
    def cache_chunk(self) -> int:
        """Answers committed to a request cache at a time (the requests in flight together): an endpoint
        failing mid-run loses none that it answered, and a rerun resumes after them."""
        return self.concurrency

    @property
    def identity(self) -> ModelIdentity:
        base = super().identity
        extra = {**base.extra, "api": "chat/completions"}
        if self.think_end_token:
            extra["think_end_token"] = self.think_end_token
        return ModelIdentity(base.backend, base.name, base.weights_sha256, base.dtype, base.batch_size, extra)

    def __repr__(self) -> str:
        return f"OpenAIChatBackend(base_url={self.base_url!r}, model={self.model!r})"

    # ----------------------------------------------------------------------------------------------
    def chat_context(self, messages, *, chat_template: str | None = None) -> str:
        """The conversation rendered with the served model's template, for log-likelihood tasks run
        with ``--apply-chat-template`` through ``/completions``; needs ``tokenizer=DIR``. A template name
        is refused: the endpoint renders the generation prompts with its own template."""
        if chat_template is not None:
            raise ValueError(NAMED_TEMPLATE_REFUSED)
        messages = validate_messages(messages)
        if self.tokenizer is None or not getattr(self.tokenizer, "chat_template", None):
            raise ValueError(
                "openai-chat sends generation prompts as messages and the endpoint applies the chat template; "
                "to render the template here (log-likelihood tasks with --apply-chat-template), pass "
                "tokenizer=DIR, a folder with the served model's tokenizer and its chat template"
            )
        if messages[-1]["role"] == "assistant":
            return self.tokenizer.apply_chat_template(messages, tokenize=False, continue_final_message=True)
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def chat_template_choice(self, name: str | None = None) -> dict:
        if name is not None:
            raise ValueError(NAMED_TEMPLATE_REFUSED)
        return template_choice(self.tokenizer) if getattr(self.tokenizer, "chat_template", None) else {}

    def generate_until(
        self, requests: Sequence[GenerationRequest], *, progress=None
    ) -> list[GenerationResult]:
        if any(request.max_gen_toks < 1 for request in requests):
            raise ValueError("max_gen_toks must be at least 1")
        return self._map(self._chat_one, requests, progress)

    def chat_payload(self, request: GenerationRequest) -> dict:
        """The JSON body posted to ``/chat/completions`` for one request."""
        pairs = request.messages or (("user", request.context),)
        messages = validate_messages([{"role": role, "content": content} for role, content in pairs])
        sampled = request.do_sample and request.temperature > 0
        payload = {
            "model": self.model_name,
            "messages": messages,
            "max_tokens": request.max_gen_toks,
            "temperature": request.temperature if sampled else 0.0,
            "seed": request.seed,
        }
        if sampled and request.top_p < 1.0:
            payload["top_p"] = request.top_p
        stops = [s for s in request.until if s]
        if stops:
            payload["stop"] = stops[:MAX_API_STOPS]
        return payload

    def _chat_one(self, request: GenerationRequest) -> GenerationResult:
        body = self._json("POST", "/chat/completions", self.chat_payload(request))
        choice = first_choice(body)
        message = choice.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            raise EndpointError(
                f"{self.base_url}/chat/completions answered without a text message (finish_reason "
                f"{choice.get('finish_reason')!r}, message {str(message)[:200]!r}); a content filter or a "
                "reasoning-only answer gives none"
            )
        if self.think_end_token:
            content = content.split(self.think_end_token)[-1].lstrip()
        text, stopped = cut_at_stop(content, request.until)
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        tokens = usage.get("completion_tokens")
        reason = "stop" if stopped or choice.get("finish_reason") == "stop" else "length"
        return GenerationResult(
            text, tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else 0, reason
        )

    # ----------------------------------------------------------------------------------------------
    def loglikelihood(self, requests, *, progress=None):
        self._refuse_scoring()
        return super().loglikelihood(requests, progress=progress)

    def loglikelihood_rolling(self, requests, *, progress=None):
        self._refuse_scoring()
        return super().loglikelihood_rolling(requests, progress=progress)

    def next_token_logprobs(self, prompts, token_ids, *, progress=None):
        self._refuse_scoring()
        return super().next_token_logprobs(prompts, token_ids, progress=progress)

    def _refuse_scoring(self) -> None:
        if not self.completions_logprobs:
            raise ValueError(
                "log-likelihoods are not available from a chat-completions endpoint (lm-evaluation-harness's "
                "local-chat-completions refuses them too): use the openai backend (completions) against a "
                "server that returns prompt log-probabilities, or pass completions_logprobs=true if this "
                "endpoint also serves /completions with echo and logprobs"
            )
