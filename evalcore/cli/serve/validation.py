"""Checks on OpenAI-style request bodies for ``python -m evalcore serve``: each bad field is a
:class:`RequestError` (a 4xx answer in OpenAI's error shape) naming the field."""

from __future__ import annotations

MAX_STOP_STRINGS = 16
MAX_STOP_CHARS = 256
MAX_TOP_LOGPROBS = 20
MAX_PROMPTS = 256  # prompts in one completions request


class ClientGone(Exception):
    """The client closed its connection while its request waited for the model: the request leaves the
    queue unanswered (no one would read the answer) and frees its place."""


class RequestError(Exception):
    """A client error answered with ``status`` and an OpenAI-style error body."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
                 retry_after: int | None = None):  # fmt: skip
        super().__init__(message)
        self.status, self.param, self.code = status, param, code
        self.retry_after = retry_after  # seconds, sent as Retry-After (a 503 without it says 1)

    def body(self) -> dict:
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        return {"error": {"message": str(self), "type": kind, "param": self.param, "code": self.code}}


def is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def number(payload: dict, key: str, default: float, low: float, high: float) -> float:
    value = payload.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise RequestError(400, f"{key} must be a number from {low:g} to {high:g}", param=key)
    return float(value)


def check_model(payload: dict, name: str) -> None:
    model = payload.get("model")
    if not isinstance(model, str) or not model:
        raise RequestError(400, "'model' is required (a string)", param="model")
    if model != name:
        raise RequestError(
            404, f"the model {model[:100]!r} does not exist; this server serves {name!r}",
            param="model", code="model_not_found",
        )  # fmt: skip


def sampling(payload: dict, *, default_max: int, limit: int, allow_zero: bool = False) -> dict:
    """The decoding settings of a chat or completions request (``max_tokens`` from 1, or from 0 when
    ``allow_zero``, to ``limit``)."""
    max_tokens = payload.get("max_completion_tokens")
    max_tokens = payload.get("max_tokens") if max_tokens is None else max_tokens
    max_tokens = default_max if max_tokens is None else max_tokens
    lowest = 0 if allow_zero else 1
    if not is_int(max_tokens) or not lowest <= max_tokens <= limit:
        raise RequestError(
            400, f"max_tokens must be an integer from {lowest} to {limit} (this server's limit)",
            param="max_tokens",
        )  # fmt: skip
    temperature = number(payload, "temperature", 1.0, 0.0, 2.0)
    top_p = number(payload, "top_p", 1.0, 0.0, 1.0)
    if top_p == 0:
        raise RequestError(400, "top_p must be greater than 0", param="top_p")
    seed = payload.get("seed")
    if seed is not None and (not is_int(seed) or not 0 <= seed < 2**63):
        raise RequestError(400, "seed must be a non-negative integer", param="seed")
    n = payload.get("n", 1)
    if n != 1 or isinstance(n, bool):
        raise RequestError(400, "only n=1 is supported", param="n")
    stream = payload.get("stream", False)
    if not isinstance(stream, bool):
        raise RequestError(400, "stream must be true or false", param="stream")
    return {"max_tokens": max_tokens, "temperature": temperature, "top_p": top_p, "seed": seed,
            "stop": stop_strings(payload.get("stop")), "stream": stream}  # fmt: skip


def stop_strings(stop) -> tuple[str, ...]:
    stop = [stop] if isinstance(stop, str) else ([] if stop is None else stop)
    if (
        not isinstance(stop, list)
        or len(stop) > MAX_STOP_STRINGS
        or not all(isinstance(s, str) and 0 < len(s) <= MAX_STOP_CHARS for s in stop)
    ):
        raise RequestError(
            400, f"stop must be a string or a list of at most {MAX_STOP_STRINGS} non-empty strings "
            f"of at most {MAX_STOP_CHARS} characters", param="stop",
        )  # fmt: skip
    return tuple(stop)


def prompts(payload: dict, *, vocab_size: int | None) -> list[str | list[int]]:
    """The prompts of a completions request, in any of the API's four forms: a string, a list of
    strings, a list of token ids, or a list of token-id lists. Token ids must be below ``vocab_size``
    (``None``: the backend takes text prompts only)."""
    prompt = payload.get("prompt")
    form = ("a string, a list of strings, a list of token ids or a list of token-id lists, "
            f"with at most {MAX_PROMPTS} prompts")  # fmt: skip
    if isinstance(prompt, str):
        return [prompt]
    if not isinstance(prompt, list) or not prompt:
        raise RequestError(400, f"prompt must be {form}", param="prompt")
    if all(is_int(token) for token in prompt):
        return [token_ids(prompt, vocab_size)]
    if len(prompt) > MAX_PROMPTS:
        raise RequestError(400, f"prompt has {len(prompt)} prompts; at most {MAX_PROMPTS} are accepted",
                           param="prompt")  # fmt: skip
    if all(isinstance(item, str) for item in prompt):
        return list(prompt)
    if all(isinstance(item, list) for item in prompt):
        return [token_ids(item, vocab_size) for item in prompt]
    raise RequestError(400, f"prompt must be {form} (not a mixture)", param="prompt")


def token_ids(ids: list, vocab_size: int | None) -> list[int]:
    if vocab_size is None:
        raise RequestError(400, "this server's backend takes text prompts only (no token ids)", param="prompt")
    if not ids or not all(is_int(token) for token in ids):
        raise RequestError(400, "a token-id prompt must be a non-empty list of integers", param="prompt")
    bad = next((token for token in ids if not 0 <= token < vocab_size), None)
    if bad is not None:
        raise RequestError(
            400, f"token id {bad} is out of the vocabulary (ids run from 0 to {vocab_size - 1})", param="prompt"
        )
    return ids


def completion_options(payload: dict) -> tuple[bool, int | None]:
    """(echo, logprobs) of a completions request."""
    echo = payload.get("echo", False)
    if not isinstance(echo, bool):
        raise RequestError(400, "echo must be true or false", param="echo")
    logprobs = payload.get("logprobs")
    if logprobs is not None and (not is_int(logprobs) or not 0 <= logprobs <= MAX_TOP_LOGPROBS):
        raise RequestError(400, f"logprobs must be an integer from 0 to {MAX_TOP_LOGPROBS}", param="logprobs")
    return echo, logprobs
