"""``openai``: any OpenAI-compatible HTTP endpoint (vLLM server, llama.cpp server, hosted APIs).

- :meth:`OpenAIBackend.stream_chat` posts to ``/chat/completions`` with ``stream: true`` and reads
  the server-sent events (``data: {...}`` lines, ended by ``data: [DONE]``);
- :meth:`OpenAIBackend.generate_until` posts to ``/completions`` with ``stop``;
- :meth:`OpenAIBackend.loglikelihood` and :meth:`OpenAIBackend.loglikelihood_rolling` post to
  ``/completions`` with ``echo: true, logprobs: 1`` and read the prompt's token log-probabilities
  (vLLM's server and ``python -m evalcore serve`` return them; most hosted APIs do not, and then a
  clear error says so). Without the model's tokenizer the context/continuation split is made on
  characters: the continuation's tokens are the prompt tokens that end after the context (a token
  merged across the boundary counts for the continuation, as in the harness).

Keys: ``api_key_env`` names the environment variable that holds the key; the key is read from the
environment for each request, sent as ``Authorization: Bearer``, and never stored, logged or put in
an error message. Redirects are not followed (a redirect could carry the key to another host).

Retries: connection errors, HTTP 429 and 5xx are retried ``max_retries`` times with exponential
backoff (honouring ``Retry-After`` up to 60 s); other 4xx are not retried; a timeout (no byte for
``timeout`` seconds) is raised at once as :class:`EndpointTimeout`, since the server may still be
working on the request.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence

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

MAX_RETRY_AFTER_S = 60.0
# A continuation token counts as greedy when its log-probability is the top one (up to rounding).
GREEDY_TOLERANCE = 1e-6


class EndpointError(RuntimeError):
    """The endpoint answered with an error, an unreadable body, or could not be reached.

    ``status`` is the HTTP status code when there was one.
    """

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class EndpointTimeout(EndpointError, TimeoutError):
    """No answer (or no next byte of a stream) within the backend's ``timeout``."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: D102
        return None


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _as_bool(value) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes")


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
        **unexpected,
    ) -> None:
        if "api_key" in unexpected:
            raise ValueError(
                "never pass an API key as a model argument (it would end up in logs and the database): "
                "put it in an environment variable and pass that variable's name as api_key_env=NAME"
            )
        if unexpected:
            raise ValueError(
                f"unknown openai backend argument(s) {sorted(unexpected)}; allowed: base_url, model, "
                "api_key_env, timeout, max_retries, backoff, prefix_text, concurrency, insecure_http"
            )
        parts = urllib.parse.urlsplit(str(base_url))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base_url {base_url!r} must be an http(s) URL such as http://127.0.0.1:8000/v1")
        if parts.username or parts.password:
            raise ValueError("base_url must not carry credentials; use api_key_env=NAME")
        if parts.query or parts.fragment:
            raise ValueError(f"base_url {base_url!r} must not have a query or fragment")
        self.base_url = str(base_url).rstrip("/")
        self.model = model or None
        try:
            self.timeout = float(timeout)
            self.max_retries = int(max_retries)
            self.backoff = float(backoff)
            self.concurrency = int(concurrency)
        except (TypeError, ValueError):
            raise ValueError(
                "timeout and backoff must be numbers, max_retries and concurrency integers"
            ) from None
        if not self.timeout > 0 or self.max_retries < 0 or self.backoff < 0 or self.concurrency < 1:
            raise ValueError("timeout must be > 0, max_retries >= 0, backoff >= 0 and concurrency >= 1")
        if api_key_env is not None:
            if not str(api_key_env).replace("_", "").isalnum():
                raise ValueError(f"api_key_env must be an environment variable name, got {api_key_env!r}")
            if not os.environ.get(api_key_env):
                raise ValueError(f"api_key_env names {api_key_env!r}, which is not set in the environment")
            plain_remote = parts.scheme == "http" and not _is_loopback(parts.hostname)
            if plain_remote and not _as_bool(insecure_http):
                raise ValueError(
                    f"base_url {self.base_url!r} is plain http to another host: the API key would cross the "
                    "network unencrypted; use https, or pass insecure_http=true for a trusted private network"
                )
        self.api_key_env = api_key_env
        self.prefix_text = prefix_text or None
        handlers: list = [_NoRedirect()]
        if _is_loopback(parts.hostname):
            handlers.append(urllib.request.ProxyHandler({}))  # loopback never goes through a proxy
        self._opener = urllib.request.build_opener(*handlers)

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
        response = self._open("POST", "/chat/completions", payload)
        finished = False
        try:
            for raw in _read_lines(response, self):
                line = raw.strip()
                if not line.startswith("data:"):
                    continue  # blank separators, comments (": ping"), event names
                data = line[5:].strip()
                if data == "[DONE]":
                    return
                event = _parse_json(data, "stream event")
                if event.get("error"):
                    raise EndpointError(f"the endpoint reported an error mid-stream: {_message_of(event)}")
                choices = event.get("choices") or []
                choice = choices[0] if choices and isinstance(choices[0], dict) else {}
                delta = (choice.get("delta") or {}).get("content")
                finished = finished or bool(choice.get("finish_reason"))
                if delta:
                    yield delta
        finally:
            response.close()
        if not finished:  # closed without [DONE] or a finish_reason: the answer may be cut short
            raise EndpointError(f"the stream from {self.base_url} ended before the answer was complete")

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
        choice = _first_choice(body)
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
        from concurrent.futures import ThreadPoolExecutor

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
        logprobs = _first_choice(self._json("POST", "/completions", payload)).get("logprobs") or {}
        offsets = logprobs.get("text_offset")
        token_logprobs = logprobs.get("token_logprobs")
        tops = logprobs.get("top_logprobs") or []
        if not isinstance(offsets, list) or not isinstance(token_logprobs, list) or not offsets:
            raise EndpointError(
                f"{self.base_url}/completions returned no prompt log-probabilities for echo=true, logprobs=1; "
                "loglikelihood needs a server that returns them (vLLM's server, python -m evalcore serve)"
            )
        n_prompt = sum(1 for offset in offsets if offset < len(prompt))
        total, greedy, count = 0.0, True, 0
        for i in range(n_prompt):
            end = offsets[i + 1] if i + 1 < n_prompt else len(prompt)
            if end <= boundary:
                continue
            value = token_logprobs[i]
            if value is None:
                raise EndpointError(
                    "the endpoint gave no log-probability for the first scored token (it starts the prompt); "
                    "set prefix_text so the scored text does not start the prompt"
                )
            total += float(value)
            count += 1
            top = tops[i] if i < len(tops) and isinstance(tops[i], dict) else None
            if not top or float(value) < max(float(v) for v in top.values()) - GREEDY_TOLERANCE:
                greedy = False
        if count == 0:
            raise ValueError("the continuation is empty: there is nothing to score")
        return total, greedy, count

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
        response = self._open(method, path, payload)
        try:
            body = b"".join(_read_chunks(response, self))
        finally:
            response.close()
        return _parse_json(body.decode("utf-8", "replace"), f"{method} {path} response")

    def _open(self, method: str, path: str, payload: dict | None = None):
        """Send a request, retrying connection errors, 429 and 5xx; return the open response."""
        url = self.base_url + path
        data = json.dumps(payload).encode() if payload is not None else None
        attempt = 0
        while True:
            request = urllib.request.Request(url, data=data, method=method, headers=self._headers())
            retry_after = None
            try:
                return self._opener.open(request, timeout=self.timeout)
            except urllib.error.HTTPError as exc:
                status = exc.code
                message = _message_of(_parse_json_quietly(exc.read(65536)))
                retry_after = exc.headers.get("Retry-After") if exc.headers else None
                exc.close()
                if not (status == 429 or status >= 500) or attempt >= self.max_retries:
                    hint = " (is base_url the API root, e.g. http://host:port/v1?)" if status == 404 else ""
                    raise EndpointError(
                        f"{method} {url} failed with HTTP {status}: {message}{hint}", status=status
                    ) from None
            except TimeoutError:
                raise EndpointTimeout(f"{method} {url}: no answer within {self.timeout:g} s") from None
            except urllib.error.URLError as exc:
                if isinstance(exc.reason, TimeoutError):
                    raise EndpointTimeout(f"{method} {url}: no answer within {self.timeout:g} s") from None
                if attempt >= self.max_retries:
                    raise EndpointError(f"cannot reach {url}: {exc.reason}") from None
            except (ConnectionError, http.client.HTTPException) as exc:
                if attempt >= self.max_retries:
                    raise EndpointError(f"connection to {url} failed: {exc}") from None
            delay = self.backoff * (2**attempt)
            try:
                delay = max(delay, min(float(retry_after), MAX_RETRY_AFTER_S)) if retry_after else delay
            except ValueError:
                pass  # an HTTP-date Retry-After: keep the exponential delay
            time.sleep(delay)
            attempt += 1


def _read_lines(response, backend: OpenAIBackend) -> Iterator[str]:
    try:
        for raw in response:
            yield raw.decode("utf-8", "replace")
    except TimeoutError:
        raise EndpointTimeout(
            f"the stream from {backend.base_url} stalled for {backend.timeout:g} s"
        ) from None
    except (OSError, http.client.HTTPException) as exc:
        raise EndpointError(f"the stream from {backend.base_url} broke off: {exc}") from None


def _read_chunks(response, backend: OpenAIBackend) -> Iterator[bytes]:
    try:
        while chunk := response.read(65536):
            yield chunk
    except TimeoutError:
        raise EndpointTimeout(
            f"the answer from {backend.base_url} stalled for {backend.timeout:g} s"
        ) from None
    except (OSError, http.client.HTTPException) as exc:
        raise EndpointError(f"the answer from {backend.base_url} broke off: {exc}") from None


def _parse_json(text: str, what: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        raise EndpointError(f"the endpoint's {what} is not JSON: {text[:200]!r}") from None
    if not isinstance(value, dict):
        raise EndpointError(f"the endpoint's {what} is not a JSON object: {text[:200]!r}")
    return value


def _parse_json_quietly(body: bytes) -> dict | str:
    try:
        value = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return body.decode("utf-8", "replace")[:300]
    return value if isinstance(value, dict) else str(value)[:300]


def _message_of(body: dict | str) -> str:
    """The message of an OpenAI-style error body (``{"error": {"message": ...}}``)."""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            return str(error.get("message") or error)[:500]
        return str(error)[:500]
    return str(body)[:500] or "(empty body)"


def _first_choice(body: dict) -> dict:
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise EndpointError(f"the endpoint's answer has no choices: {json.dumps(body)[:200]}")
    return choices[0]
