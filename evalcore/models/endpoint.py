"""An HTTP client for OpenAI-compatible endpoints: one httpx connection pool, bounded retries
with exponential backoff, JSON answers and server-sent events.

- One :class:`httpx.Client` per backend: connections are kept alive and reused between requests
  (and shared by the threads of a ``concurrency > 1`` run; httpx's client is thread-safe).
- Retried: connection errors (refused, reset, broken before an answer) and HTTP 429 / 5xx, at most
  ``max_retries`` times (at most 10), waiting ``backoff * 2**attempt`` seconds (or the server's
  ``Retry-After`` in seconds when that is longer), never more than 60 s. The final error names the
  method, the URL, the number of attempts and the last cause.
- Not retried: other 4xx (the request itself is wrong), 3xx (redirects are never followed: one could
  carry the key to another host), and timeouts (the server may still be working on the request).
- Server-sent events follow the WHATWG rules that matter here: ``data:`` lines are joined with
  newlines until a blank line ends the event; comments (``:``) and other fields are skipped.
"""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Callable, Iterator

import httpx

MAX_RETRY_AFTER_S = 60.0  # the longest wait between two attempts
MAX_RETRIES = 10
MAX_ERROR_BODY = 65536
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
    """No answer (or no next byte of a stream) within the client's ``timeout``."""


def retry_delay(attempt: int, *, backoff: float, retry_after: str | None = None) -> float:
    """Seconds to wait before retry number ``attempt + 1``: ``backoff * 2**attempt``, or the server's
    ``Retry-After`` in seconds when that is longer, never more than 60 s; an HTTP-date Retry-After is
    ignored."""
    delay = min(backoff * (2**attempt), MAX_RETRY_AFTER_S)
    if retry_after:
        try:
            asked = float(retry_after)
        except ValueError:
            return delay
        if asked == asked:  # not NaN
            delay = max(delay, min(max(asked, 0.0), MAX_RETRY_AFTER_S))
    return delay


class EndpointClient:
    """Requests against one API root (``base_url``, e.g. ``http://127.0.0.1:8000/v1``).

    ``headers`` is called before each request (so a key is read from the environment each time and
    never stored here). ``sleep`` is how retries wait (``time.sleep``).
    """

    def __init__(
        self,
        base_url: str,
        *,
        headers: Callable[[], dict[str, str]],
        timeout: float,
        max_retries: int,
        backoff: float,
        verify: bool | str = True,
        use_env_proxies: bool = True,
        connections: int = 1,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.headers = headers
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.sleep = sleep
        tls: bool | ssl.SSLContext = verify
        if isinstance(verify, str):
            tls = ssl.create_default_context(cafile=verify)
        self.http = httpx.Client(
            timeout=httpx.Timeout(timeout),
            follow_redirects=False,
            verify=tls,
            trust_env=use_env_proxies,
            limits=httpx.Limits(max_connections=max(connections, 1), max_keepalive_connections=max(connections, 1)),
        )

    def close(self) -> None:
        self.http.close()

    # -- requests ---------------------------------------------------------------------------------------
    def send(self, method: str, path: str, payload: dict | None = None) -> httpx.Response:
        """Send a request, retrying as described in the module docstring; return the open (streamed)
        response with a 2xx status. The caller closes it."""
        url = self.base_url + path
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            retry_after = None
            try:
                request = self.http.build_request(method, url, json=payload, headers=self.headers())
                response = self.http.send(request, stream=True)
            except httpx.TimeoutException:
                raise EndpointTimeout(f"{method} {url}: no answer within {self.timeout:g} s") from None
            except httpx.TransportError as exc:
                if attempt + 1 >= attempts:
                    raise EndpointError(
                        f"cannot reach {url} ({attempts} attempt{'s' * (attempts > 1)}): {_reason(exc)}"
                    ) from None
            else:
                status = response.status_code
                if 200 <= status < 300:
                    return response
                message, retry_after = _error_message(response), response.headers.get("Retry-After")
                if not (status == 429 or status >= 500) or attempt + 1 >= attempts:
                    hint = " (is base_url the API root, e.g. http://host:port/v1?)" if status == 404 else ""
                    tries = f" after {attempts} attempts" if attempts > 1 and (status == 429 or status >= 500) else ""
                    raise EndpointError(
                        f"{method} {url} failed with HTTP {status}: {message}{hint}{tries}", status=status
                    )
            self.sleep(retry_delay(attempt, backoff=self.backoff, retry_after=retry_after))
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def json(self, method: str, path: str, payload: dict | None = None) -> dict:
        """The JSON object answered to one request."""
        response = self.send(method, path, payload)
        try:
            body = response.read()
        except httpx.TimeoutException:
            raise EndpointTimeout(f"the answer from {self.base_url} stalled for {self.timeout:g} s") from None
        except httpx.TransportError as exc:
            raise EndpointError(f"the answer from {self.base_url} broke off: {_reason(exc)}") from None
        finally:
            response.close()
        return parse_json(body.decode("utf-8", "replace"), f"{method} {path} response")

    def events(self, method: str, path: str, payload: dict) -> Iterator[str]:
        """The ``data`` of each server-sent event of a streamed answer (``[DONE]`` included)."""
        response = self.send(method, path, payload)
        try:
            yield from _sse_data(response.iter_lines())
        except httpx.TimeoutException:
            raise EndpointTimeout(f"the stream from {self.base_url} stalled for {self.timeout:g} s") from None
        except httpx.TransportError as exc:
            raise EndpointError(f"the stream from {self.base_url} broke off: {_reason(exc)}") from None
        finally:
            response.close()


def _sse_data(lines: Iterator[str]) -> Iterator[str]:
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue  # a comment, e.g. a keep-alive ": ping"
        field, _, value = line.partition(":")
        if field == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    if data:  # the stream ended without the blank line that closes the last event
        yield "\n".join(data)


def _reason(exc: Exception) -> str:
    return str(exc) or type(exc).__name__


def _error_message(response: httpx.Response) -> str:
    """The message of an error answer (OpenAI's ``{"error": {"message": ...}}`` or the raw text)."""
    try:
        raw = b""
        for chunk in response.iter_bytes():
            raw += chunk
            if len(raw) >= MAX_ERROR_BODY:
                break
    except httpx.HTTPError:
        pass
    finally:
        response.close()
    return message_of(parse_json_quietly(raw[:MAX_ERROR_BODY]))


def parse_json(text: str, what: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        raise EndpointError(f"the endpoint's {what} is not JSON: {text[:200]!r}") from None
    if not isinstance(value, dict):
        raise EndpointError(f"the endpoint's {what} is not a JSON object: {text[:200]!r}")
    return value


def parse_json_quietly(body: bytes) -> dict | str:
    try:
        value = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return body.decode("utf-8", "replace")[:300]
    return value if isinstance(value, dict) else str(value)[:300]


def message_of(body: dict | str) -> str:
    """The message of an OpenAI-style error body (``{"error": {"message": ...}}``)."""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            return str(error.get("message") or error)[:500]
        return str(error)[:500]
    return str(body)[:500] or "(empty body)"


def first_choice(body: dict) -> dict:
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise EndpointError(f"the endpoint's answer has no choices: {json.dumps(body)[:200]}")
    return choices[0]


def sum_echoed_logprobs(logprobs: dict, prompt: str, boundary: int, *, where: str) -> tuple[float, bool, int]:
    """(sum, greedy?, count) over the echoed prompt tokens that end after character ``boundary``.

    ``logprobs`` is a completion choice's legacy ``logprobs`` object (``text_offset``,
    ``token_logprobs``, ``top_logprobs``) for ``echo: true``; tokens past the prompt are generated ones
    and are ignored.
    """
    offsets = logprobs.get("text_offset")
    token_logprobs = logprobs.get("token_logprobs")
    tops = logprobs.get("top_logprobs") or []
    if not isinstance(offsets, list) or not isinstance(token_logprobs, list) or not offsets:
        raise EndpointError(
            f"{where} returned no prompt log-probabilities for echo=true, logprobs=1; "
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
