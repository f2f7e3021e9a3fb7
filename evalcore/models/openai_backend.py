"""``openai``: any OpenAI-compatible HTTP endpoint (vLLM server, llama.cpp server, hosted APIs).

- :meth:`OpenAIBackend.stream_chat` posts to ``/chat/completions`` with ``stream: true`` and reads
  the server-sent events (``data: {...}`` lines, ended by ``data: [DONE]``);
- :meth:`OpenAIBackend.generate_until` posts to ``/completions`` with ``stop``;
- :meth:`OpenAIBackend.loglikelihood` and :meth:`OpenAIBackend.loglikelihood_rolling` post to
  ``/completions`` with ``echo: true, logprobs: 1`` and read the prompt's token log-probabilities
  (vLLM's server and ``python -m evalcore serve`` return them; most hosted APIs do not, and then a
  clear error says so). Without the model's tokenizer the context/continuation split is made on
  characters: the continuation's tokens are the prompt tokens that end after the context (a token
  merged across the boundary counts for the continuation, as in the harness);
- :meth:`OpenAIBackend.next_token_logprobs` (log-prob judge verdicts) posts token-id prompts to
  ``/completions`` with ``logprobs: top_logprobs`` (:mod:`evalcore.models.next_token`); it needs the
  model's tokenizer (``tokenizer=DIR``).

Keys: ``api_key_env`` names the environment variable that holds the key; the key is read from the
environment for each request, sent as ``Authorization: Bearer``, and never stored, logged or put in
an error message. Redirects are not followed (a redirect could carry the key to another host).

HTTP goes through :class:`evalcore.models.endpoint.EndpointClient` (httpx): one connection pool per
backend, connection errors, HTTP 429 and 5xx retried ``max_retries`` times with exponential backoff
(honouring ``Retry-After`` up to 60 s); other 4xx are not retried; a timeout (no byte for ``timeout``
seconds) is raised at once as :class:`EndpointTimeout`, since the server may still be working on the
request. Model arguments may arrive typed (``max_retries=3``, ``verify=false`` from
:func:`evalcore.models.parse_model_args`) or as strings (older callers); booleans are refused where a
number is expected.

Token usage: every answer's ``usage`` (``prompt_tokens``, ``completion_tokens``; in a stream, the chunk
that carries it) is added to a running total, :attr:`OpenAIBackend.token_usage`, which also counts the
answers that came without one (most hosted APIs send none in a stream unless asked): what judging
costs in tokens (:mod:`evalcore.judging.cost`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

from evalcore.boundary.netutil import is_loopback
from evalcore.models.base import (
    Backend,
    ChatParams,
    GenerationRequest,
    GenerationResult,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    ModelIdentity,
    RollingRequest,
    RollingResult,
    cut_at_stop,
    validate_messages,
)
from evalcore.models.endpoint import (
    MAX_RETRIES,
    EndpointClient,
    EndpointError,
    EndpointTimeout,
    first_choice,
    message_of,
    parse_json,
    sum_echoed_logprobs,
)
from evalcore.models.endpoint_args import as_bool, as_number, check_base_url, check_key_env
from evalcore.models.next_token import DEFAULT_TOP_LOGPROBS, endpoint_next_token_logprobs, load_tokenizer

__all__ = ["EndpointError", "EndpointTimeout", "OpenAIBackend"]

ARGUMENTS = ("base_url", "model", "api_key_env", "timeout", "max_retries", "backoff", "prefix_text",
             "concurrency", "insecure_http", "verify", "tokenizer", "top_logprobs")  # fmt: skip


class OpenAIBackend(Backend):
    """An OpenAI-compatible chat and completions endpoint.

    Parameters
    ----------
    base_url : str
        The API root including its version path, as in OpenAI's SDK: ``http://127.0.0.1:8000/v1``.
    model : str, optional
        The served model's name; default the only model listed by ``GET /models``.
    api_key_env : str, optional
        Name of the environment variable holding the API key (never the key itself).
    timeout : float
        Seconds to wait for the connection and for each read (default 60).
    max_retries : int
        Retries on connection errors, 429 and 5xx, with exponential backoff (default 2).
    backoff : float
        First backoff delay in seconds, doubled on each retry (default 0.5).
    prefix_text : str, optional
        Text of the model's prefix token (its BOS, else EOS: ``<|im_start|>`` for SmolLM2), put
        before an empty context and before a rolling text so that their first token is scored;
        without it those requests fail.
    concurrency : int
        Benchmark requests (loglikelihood, rolling, generate_until) in flight at once (default 1);
        results keep request order. A vLLM server batches concurrent requests.
    insecure_http : bool
        Allow sending the key over plain http to a non-loopback host (refused by default).
    verify : bool or str
        Check the server's TLS certificate (default true); a string is the path of a CA bundle.
        ``false`` is for a self-signed test server only.
    tokenizer : str, optional
        Folder with the served model's tokenizer files: log-prob judges build their prompts with it.
    top_logprobs : int
        Next-token candidates asked for by :meth:`next_token_logprobs` (default 20, 1 to 100).
    """

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str,
        model: str | None = None,
        api_key_env: str | None = None,
        timeout: float | str = 60.0,
        max_retries: int | str = 2,
        backoff: float | str = 0.5,
        prefix_text: str | None = None,
        concurrency: int | str = 1,
        insecure_http: bool | str = False,
        verify: bool | str = True,
        tokenizer: str | None = None,
        top_logprobs: int | str = DEFAULT_TOP_LOGPROBS,
        **unexpected,
    ) -> None:
        if "api_key" in unexpected:
            raise ValueError(
                "never pass an API key as a model argument (it would end up in logs and the database): "
                "put it in an environment variable and pass that variable's name as api_key_env=NAME"
            )
        if unexpected:
            raise ValueError(
                f"unknown openai backend argument(s) {sorted(unexpected)}; allowed: {', '.join(ARGUMENTS)}"
            )
        host = check_base_url(base_url)
        self.base_url = str(base_url).rstrip("/")
        self.model = str(model) if model not in (None, "") else None
        self.timeout = as_number(timeout, "timeout", float)
        self.max_retries = as_number(max_retries, "max_retries", int)
        self.backoff = as_number(backoff, "backoff", float)
        self.concurrency = as_number(concurrency, "concurrency", int)
        self.top_logprobs = as_number(top_logprobs, "top_logprobs", int)
        if not self.timeout > 0 or not 0 <= self.max_retries <= MAX_RETRIES or self.backoff < 0 or self.concurrency < 1:
            raise ValueError(
                f"timeout must be > 0, max_retries from 0 to {MAX_RETRIES}, backoff >= 0 and concurrency >= 1"
            )
        if not 1 <= self.top_logprobs <= 100:
            raise ValueError(f"top_logprobs must be from 1 to 100, got {self.top_logprobs}")
        self.tokenizer = load_tokenizer(tokenizer) if tokenizer not in (None, "") else None
        if isinstance(verify, str) and verify.strip().lower() in ("1", "0", "true", "false", "yes", "no"):
            verify = as_bool(verify, "verify")
        if isinstance(verify, str) and not os.path.isfile(verify):
            raise ValueError(f"verify must be true, false or the path of a CA bundle file, got {verify!r}")
        if not isinstance(verify, bool | str):
            raise ValueError(f"verify must be true, false or the path of a CA bundle file, got {verify!r}")
        insecure = as_bool(insecure_http, "insecure_http")
        if api_key_env is not None:
            check_key_env(str(api_key_env), self.base_url, plain_remote=self.base_url.startswith("http:")
                           and not is_loopback(host), insecure=insecure)  # fmt: skip
        self.api_key_env = api_key_env
        self.prefix_text = str(prefix_text) if prefix_text else None
        self._usage_lock = threading.Lock()
        self._usage = {"prompt_tokens": 0, "completion_tokens": 0, "responses": 0, "responses_without_usage": 0}
        self._client = EndpointClient(
            self.base_url, headers=self._headers, timeout=self.timeout, max_retries=self.max_retries,
            backoff=self.backoff, verify=verify, use_env_proxies=not is_loopback(host),
            connections=self.concurrency,
        )  # fmt: skip

    # ----------------------------------------------------------------------------------------------
    @property
    def identity(self) -> ModelIdentity:
        return ModelIdentity(
            backend=self.name,
            name=self.model_name,
            weights_sha256="",  # a remote endpoint does not show its weights
            dtype="remote",
            batch_size="1",
            extra={"base_url": self.base_url},
        )

    @property
    def model_name(self) -> str:
        """The model name sent with every request (asked from ``GET /models`` when not given)."""
        if self.model is None:
            listed = [
                m.get("id") for m in self._json("GET", "/models").get("data", []) if isinstance(m, dict)
            ]
            if len(listed) != 1:
                raise ValueError(
                    f"the endpoint serves {len(listed)} models {listed[:10]}; choose one with model=NAME"
                )
            self.model = str(listed[0])
        return self.model

    def __repr__(self) -> str:
        return f"OpenAIBackend(base_url={self.base_url!r}, model={self.model!r})"

    @property
    def token_usage(self) -> dict:
        """Running totals over every generation, scoring and chat answer so far: ``prompt_tokens`` and
        ``completion_tokens`` (summed from the answers' ``usage``), ``responses``, and
        ``responses_without_usage`` (answers that carried no usage: their tokens are not in the sums)."""
        with self._usage_lock:
            return dict(self._usage)

    def _count_usage(self, usage) -> None:
        counts = {}
        if isinstance(usage, dict):
            for key in ("prompt_tokens", "completion_tokens"):
                value = usage.get(key)
                if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                    counts[key] = value
        with self._usage_lock:
            self._usage["responses"] += 1
            if len(counts) < 2:
                self._usage["responses_without_usage"] += 1
                return
            for key, value in counts.items():
                self._usage[key] += value

    # ----------------------------------------------------------------------------------------------
    def stream_chat(self, messages: Sequence[dict], params: ChatParams | dict | None = None) -> Iterator[str]:
        params = ChatParams.from_mapping(params)
        messages = validate_messages(messages)
        if params.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be at least 1")
        if params.system_prompt and messages[0]["role"] != "system":
            messages = [{"role": "system", "content": params.system_prompt}, *messages]
        payload = {
            "model": self.model_name,
            "messages": messages,
            "max_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "stream": True,
        }
        if params.seed is not None:
            payload["seed"] = params.seed
        if params.stop:
            payload["stop"] = list(params.stop)
        return self._stream_deltas(payload)

    def _stream_deltas(self, payload: dict) -> Iterator[str]:
        events = self._client.events("POST", "/chat/completions", payload)
        finished = False
        reason = None  # the finish_reason the endpoint gave ("length": cut at max_tokens), returned
        usage = None
        try:
            for data in events:
                if data.strip() == "[DONE]":
                    self._count_usage(usage)
                    usage = False  # counted
                    return reason
                event = parse_json(data, "stream event")
                usage = event.get("usage") or usage
                if event.get("error"):
                    raise EndpointError(f"the endpoint reported an error mid-stream: {message_of(event)}")
                choices = event.get("choices") or []
                choice = choices[0] if choices and isinstance(choices[0], dict) else {}
                delta = (choice.get("delta") or {}).get("content")
                finished = finished or bool(choice.get("finish_reason"))
                if isinstance(choice.get("finish_reason"), str):
                    reason = choice["finish_reason"]
                if delta:
                    yield delta
        finally:
            events.close()
        if usage is not False:
            self._count_usage(usage)
        if not finished:  # closed without [DONE] or a finish_reason: the answer may be cut short
            raise EndpointError(f"the stream from {self.base_url} ended before the answer was complete")
        return reason

    def generate_until(
        self, requests: Sequence[GenerationRequest], *, progress=None
    ) -> list[GenerationResult]:
        if any(request.max_gen_toks < 1 for request in requests):
            raise ValueError("max_gen_toks must be at least 1")
        return self._map(self._generate_one, requests, progress)

    def _generate_one(self, request: GenerationRequest) -> GenerationResult:
        sampled = request.do_sample and request.temperature > 0
        payload = {
            "model": self.model_name,
            "prompt": request.context,
            "max_tokens": request.max_gen_toks,
            "temperature": request.temperature if sampled else 0.0,
            "top_p": request.top_p if sampled else 1.0,
            "seed": request.seed,
        }
        if request.until:
            payload["stop"] = list(request.until)
        body = self._json("POST", "/completions", payload)
        choice = first_choice(body)
        text, stopped = cut_at_stop(str(choice.get("text") or ""), request.until)
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        reason = "stop" if stopped or choice.get("finish_reason") == "stop" else "length"
        return GenerationResult(text, int(usage.get("completion_tokens") or 0), reason)

    def loglikelihood(
        self, requests: Sequence[LoglikelihoodRequest], *, progress=None
    ) -> list[LoglikelihoodResult]:
        prompts = []
        for request in requests:
            context, continuation = request.context, request.continuation
            n_spaces = len(context) - len(context.rstrip())
            if n_spaces and context.strip():  # the harness moves trailing whitespace to the continuation
                continuation = context[-n_spaces:] + continuation
                context = context[:-n_spaces]
            if not context:
                context = self._prefix_or_fail("a loglikelihood request with an empty context")
            prompts.append((context + continuation, len(context)))
        scored = self._map(lambda prompt: self._score(*prompt), prompts, progress)
        return [LoglikelihoodResult(logprob, greedy, count) for logprob, greedy, count in scored]

    def loglikelihood_rolling(
        self, requests: Sequence[RollingRequest], *, progress=None
    ) -> list[RollingResult]:
        if any(r.max_length is not None or r.stride is not None for r in requests):
            raise ValueError(
                "the openai backend has no tokenizer to cut sliding windows: it scores each text in one "
                "request within the server's window; drop max_length/stride or use the hf or vllm backend"
            )
        prefix = self._prefix_or_fail("loglikelihood_rolling") if requests else ""
        scored = self._map(lambda r: self._score(prefix + r.text, len(prefix)), requests, progress)
        return [RollingResult(logprob, count) for logprob, _, count in scored]

    def next_token_logprobs(self, prompts, token_ids, *, progress=None) -> list[list[float] | Exception]:
        return endpoint_next_token_logprobs(self, prompts, token_ids, progress=progress)

    def _map(self, function, items: Sequence, progress) -> list:
        """``function`` over ``items`` in order, ``concurrency`` requests in flight at a time."""
        if items:
            self.model_name  # noqa: B018 - resolve the model once, before any thread starts
        if self.concurrency == 1 or len(items) < 2:
            results = []
            for item in items:
                results.append(function(item))
                if progress is not None:
                    progress(1)
            return results
        results = []
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            for result in pool.map(function, items):  # progress is reported from this thread
                results.append(result)
                if progress is not None:
                    progress(1)
        return results

    def _prefix_or_fail(self, what: str) -> str:
        if not self.prefix_text:
            raise ValueError(
                f"{what} needs the model's prefix token to score the first token: pass "
                "prefix_text=<its text>, the text of its BOS token (EOS when it has none), e.g. <|im_start|> for SmolLM2 or <s> for Llama 2"
            )
        return self.prefix_text

    def _score(self, prompt: str, boundary: int) -> tuple[float, bool, int]:
        """Sum the log-probabilities of the prompt tokens ending after character ``boundary``."""
        payload = {
            "model": self.model_name,
            "prompt": prompt,
            "max_tokens": 1,
            "temperature": 0.0,
            "echo": True,
            "logprobs": 1,
        }
        logprobs = first_choice(self._json("POST", "/completions", payload)).get("logprobs") or {}
        return sum_echoed_logprobs(logprobs, prompt, boundary, where=f"{self.base_url}/completions")

    # ----------------------------------------------------------------------------------------------
    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise ValueError(f"the environment variable {self.api_key_env!r} (api_key_env) is not set")
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _json(self, method: str, path: str, payload: dict | None = None) -> dict:
        body = self._client.json(method, path, payload)
        if method == "POST":  # an answer (GET /models is not one)
            self._count_usage(body.get("usage") if isinstance(body, dict) else None)
        return body

    def close(self) -> None:
        self._client.close()
