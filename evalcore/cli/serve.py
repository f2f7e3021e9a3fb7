"""``python -m evalcore serve``: serve a local backend as an OpenAI-compatible endpoint on loopback.

::

    python -m evalcore serve --model hf --model-args path=var/models/SmolLM2-135M-Instruct --port 8011

Endpoints (under ``/v1``): ``GET /models``, ``POST /chat/completions`` (``stream`` true or false;
server-sent events with ``choices[0].delta.content`` and a final ``data: [DONE]``) and
``POST /completions`` (``prompt``, ``max_tokens``, ``temperature``, ``top_p``, ``seed``, ``stop``,
``stream``, and ``echo`` + ``logprobs`` for the prompt's token log-probabilities, which the
``openai`` backend's loglikelihood reads). A streamed completion arrives as one text chunk.

The server has no authentication: it binds to loopback unless ``--allow-remote``. Model calls are
serialised by a lock (one model, one request at a time); bad requests get 4xx answers in OpenAI's
error shape (``{"error": {"message", "type", "param", "code"}}``), never a crash.
"""

from __future__ import annotations

import ipaddress
import json
import secrets
import socket
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from evalcore.models import ChatParams, GenerationRequest, backend_class, parse_model_args
from evalcore.models.base import validate_messages

MAX_STOP_STRINGS = 16
MAX_STOP_CHARS = 256
MAX_TOP_LOGPROBS = 20
MAX_WAITING = 32  # requests queued for the model beyond this get 503 at once


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "serve",
        help="serve a model as an OpenAI-compatible endpoint (loopback only by default)",
        description=__doc__.splitlines()[0],
    )
    p.add_argument("--model", required=True, metavar="BACKEND", help="backend name (hf, vllm, openai)")
    p.add_argument("--model-args", default="", metavar="K=V,...", help="backend arguments, e.g. path=DIR")
    p.add_argument("--port", type=int, required=True, help="TCP port (0 picks a free one)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --host (no auth!)")
    p.add_argument("--served-model-name", default=None, help="name clients send (default: folder name)")
    p.add_argument("--max-tokens-limit", type=int, default=1024, help="largest max_tokens accepted")
    p.add_argument("--max-body-bytes", type=int, default=1 << 20, help="largest request body accepted")
    p.add_argument("--queue-timeout", type=float, default=120.0, help="seconds to wait for the model")
    p.set_defaults(func=run)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback IP address."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class RequestError(Exception):
    """A client error answered with ``status`` and an OpenAI-style error body."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.param, self.code = status, param, code

    def body(self) -> dict:
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        return {"error": {"message": str(self), "type": kind, "param": self.param, "code": self.code}}


class ModelService:
    """One loaded backend behind a lock, answering validated OpenAI-style payloads."""

    def __init__(self, backend, *, name: str, max_tokens_limit: int, queue_timeout: float) -> None:
        self.backend = backend
        self.name = name
        self.max_tokens_limit = max_tokens_limit
        self.queue_timeout = queue_timeout
        self.lock = threading.Lock()
        self.waiting = threading.BoundedSemaphore(MAX_WAITING)
        self.created = int(time.time())

    def models(self) -> dict:
        entry = {"id": self.name, "object": "model", "created": self.created, "owned_by": "podium"}
        return {"object": "list", "data": [entry]}

    def acquire(self) -> None:
        """Take the model lock, waiting at most ``queue_timeout`` behind at most ``MAX_WAITING`` others."""
        if not self.waiting.acquire(blocking=False):
            raise RequestError(503, "too many requests are waiting for the model; retry later", code="busy")
        try:
            if not self.lock.acquire(timeout=self.queue_timeout):
                raise RequestError(503, "the model is busy; retry later", code="busy")
        finally:
            self.waiting.release()

    # -- validation ---------------------------------------------------------------------------------
    def check_model(self, payload: dict) -> None:
        model = payload.get("model")
        if not isinstance(model, str) or not model:
            raise RequestError(400, "'model' is required (a string)", param="model")
        if model != self.name:
            raise RequestError(
                404, f"the model {model[:100]!r} does not exist; this server serves {self.name!r}",
                param="model", code="model_not_found",
            )  # fmt: skip

    def sampling(self, payload: dict, *, default_max: int, allow_zero: bool = False) -> dict:
        max_tokens = payload.get("max_completion_tokens")
        max_tokens = payload.get("max_tokens") if max_tokens is None else max_tokens
        max_tokens = default_max if max_tokens is None else max_tokens
        lowest = 0 if allow_zero else 1
        if not _is_int(max_tokens) or not lowest <= max_tokens <= self.max_tokens_limit:
            raise RequestError(
                400, f"max_tokens must be an integer from {lowest} to {self.max_tokens_limit} (this server's limit)",
                param="max_tokens",
            )  # fmt: skip
        temperature = _number(payload, "temperature", 1.0, 0.0, 2.0)
        top_p = _number(payload, "top_p", 1.0, 0.0, 1.0)
        if top_p == 0:
            raise RequestError(400, "top_p must be greater than 0", param="top_p")
        seed = payload.get("seed")
        if seed is not None and (not _is_int(seed) or not 0 <= seed < 2**63):
            raise RequestError(400, "seed must be a non-negative integer", param="seed")
        n = payload.get("n", 1)
        if n != 1 or isinstance(n, bool):
            raise RequestError(400, "only n=1 is supported", param="n")
        stream = payload.get("stream", False)
        if not isinstance(stream, bool):
            raise RequestError(400, "stream must be true or false", param="stream")
        stop = payload.get("stop")
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
        return {"max_tokens": max_tokens, "temperature": temperature, "top_p": top_p, "seed": seed,
                "stop": tuple(stop), "stream": stream}  # fmt: skip

    # -- chat -----------------------------------------------------------------------------------------
    def chat(self, payload: dict):
        """Validate a chat request; return (settings, deltas). ``deltas`` holds the model lock until
        it is exhausted or closed; errors before the first delta raise :class:`RequestError`."""
        self.check_model(payload)
        try:
            messages = validate_messages(payload.get("messages"))
        except (ValueError, TypeError) as exc:
            raise RequestError(400, str(exc), param="messages") from None
        s = self.sampling(payload, default_max=min(512, self.max_tokens_limit))
        params = ChatParams(
            max_new_tokens=s["max_tokens"], temperature=s["temperature"], top_p=s["top_p"],
            seed=s["seed"], stop=s["stop"],
        )  # fmt: skip
        self.acquire()
        try:
            deltas = iter(self.backend.stream_chat(messages, params))
            first = _first_or_error(deltas)
        except BaseException:
            self.lock.release()
            raise
        return s, _LockedDeltas(first, deltas, self.lock)

    def finish_reason(self, text: str, max_tokens: int) -> str:
        encode = getattr(self.backend, "tok_encode", None)
        if encode is None:
            return "stop"
        return "length" if len(encode(text)) >= max_tokens else "stop"

    # -- completions ----------------------------------------------------------------------------------
    def completion(self, payload: dict) -> tuple[dict, dict]:
        """Validate and run a completion; return (sampling settings, choice dict)."""
        self.check_model(payload)
        prompt = payload.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        if not isinstance(prompt, str):
            raise RequestError(400, "prompt must be one string (token-id and batched prompts are not supported)",
                               param="prompt")  # fmt: skip
        echo = payload.get("echo", False)
        if not isinstance(echo, bool):
            raise RequestError(400, "echo must be true or false", param="echo")
        logprobs = payload.get("logprobs")
        if logprobs is not None and (not _is_int(logprobs) or not 0 <= logprobs <= MAX_TOP_LOGPROBS):
            raise RequestError(
                400, f"logprobs must be an integer from 0 to {MAX_TOP_LOGPROBS}", param="logprobs"
            )
        s = self.sampling(payload, default_max=min(16, self.max_tokens_limit), allow_zero=echo)
        if not prompt and (s["max_tokens"] == 0 or logprobs is not None):
            raise RequestError(400, "prompt must not be empty", param="prompt")
        sampled = s["temperature"] > 0
        seed = s["seed"] if s["seed"] is not None else secrets.randbelow(2**31)
        self.acquire()
        try:
            text, reason, count = "", "length", 0
            if s["max_tokens"] > 0:
                request = GenerationRequest(
                    context=prompt, until=s["stop"], max_gen_toks=s["max_tokens"], do_sample=sampled,
                    temperature=s["temperature"] if sampled else 0.0, top_p=s["top_p"], seed=seed,
                )  # fmt: skip
                result = _call(self.backend.generate_until, [request])[0]
                text, reason, count = result.text, result.finish_reason, result.num_tokens
            scored = None
            if logprobs is not None:
                scored = _call(token_logprobs, self.backend, prompt + text, top_n=logprobs)
        finally:
            self.lock.release()
        choice = {
            "index": 0,
            "text": prompt + text if echo else text,
            "logprobs": None,
            "finish_reason": reason,
        }
        if scored is not None:
            start = 0 if echo else len(prompt)
            keep = [i for i, offset in enumerate(scored["text_offset"]) if offset >= start or echo]
            choice["logprobs"] = {
                "tokens": [scored["tokens"][i] for i in keep],
                "token_logprobs": [scored["token_logprobs"][i] for i in keep],
                "top_logprobs": [scored["top_logprobs"][i] for i in keep],
                "text_offset": [scored["text_offset"][i] - start for i in keep],
            }
        s["completion_tokens"] = count
        return s, choice


class _LockedDeltas:
    """Text deltas of one answer; releases the model lock when exhausted or closed (idempotent)."""

    def __init__(self, first: str | None, deltas, lock: threading.Lock) -> None:
        self.first, self.deltas, self.lock = first, deltas, lock
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
        except StopIteration:
            self.close()
            raise
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
                self.lock.release()


def token_logprobs(backend, text: str, *, top_n: int) -> dict:
    """Per-token log-probabilities of ``text`` (OpenAI's legacy ``logprobs`` layout).

    A backend may provide ``prompt_token_logprobs(text, top_n=)``; transformers backends (with
    ``model``, ``tokenizer`` and ``max_length``) are scored here with one forward pass. The first
    token has no log-probability (``None``) unless the backend prepends BOS.
    """
    own = getattr(backend, "prompt_token_logprobs", None)
    if own is not None:
        return own(text, top_n=top_n)
    if not all(hasattr(backend, a) for a in ("model", "tokenizer", "max_length", "device")):
        raise RequestError(400, f"the {backend.name} backend cannot return prompt log-probabilities",
                           param="logprobs")  # fmt: skip
    import torch

    from evalcore.models.scoring import run_base

    tokenizer = backend.tokenizer
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = list(encoded["input_ids"])
    offsets = [start for start, _ in encoded["offset_mapping"]]
    ends = [end for _, end in encoded["offset_mapping"]]
    pieces = [text[s:e] for s, e in zip(offsets, ends)]
    if getattr(backend, "add_bos_token", False) and tokenizer.bos_token_id is not None:
        ids, offsets, pieces = [tokenizer.bos_token_id, *ids], [0, *offsets], ["", *pieces]
    if len(ids) > backend.max_length:
        raise ValueError(
            f"the text is {len(ids)} tokens, longer than the model's {backend.max_length}-token window"
        )
    token_lps: list = [None]
    tops: list = [None]
    model = backend.model
    base = getattr(model, model.base_model_prefix)
    head = model.get_output_embeddings()
    with torch.inference_mode():
        hidden, _ = run_base(base, input_ids=torch.tensor([ids], device=backend.device), use_cache=False)
        for start in range(0, len(ids) - 1, 256):
            stop = min(start + 256, len(ids) - 1)
            logprobs = torch.log_softmax(head(hidden[0, start:stop]).float(), dim=-1)
            targets = torch.tensor(ids[start + 1 : stop + 1], device=logprobs.device)
            chosen = logprobs.gather(1, targets.view(-1, 1)).view(-1).tolist()
            token_lps.extend(chosen)
            if top_n > 0:
                values, indices = logprobs.topk(top_n, dim=-1)
                for row_values, row_indices in zip(values.tolist(), indices.tolist()):
                    tops.append({tokenizer.decode([i]): v for i, v in zip(row_indices, row_values)})
            else:
                tops.extend([None] * (stop - start))
    return {"tokens": pieces, "token_logprobs": token_lps, "top_logprobs": tops, "text_offset": offsets}


def _call(function, *args, **kwargs):
    """Run a model call; a ValueError from the backend is the client's fault (400)."""
    try:
        return function(*args, **kwargs)
    except ValueError as exc:
        raise RequestError(400, str(exc)) from None


def _first_or_error(deltas):
    try:
        return next(deltas)
    except StopIteration:
        return None
    except ValueError as exc:
        raise RequestError(400, str(exc)) from None


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(payload: dict, key: str, default: float, low: float, high: float) -> float:
    value = payload.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise RequestError(400, f"{key} must be a number from {low:g} to {high:g}", param=key)
    return float(value)


class Handler(BaseHTTPRequestHandler):
    """OpenAI-compatible routes over one :class:`ModelService` (HTTP/1.0: one request per connection)."""

    service: ModelService
    max_body_bytes: int
    timeout = 30  # seconds a client may take to send its request
    server_version = "podium-serve"

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        sys.stderr.write(f"{self.address_string()} {format % args}\n")

    def do_GET(self):  # noqa: N802
        route = self.path.split("?", 1)[0].rstrip("/")
        if route in ("/v1/models", "/models"):
            self._json(200, self.service.models())
        elif route == "/health":
            self._json(200, {"status": "ok"})
        else:
            self._error(RequestError(404, f"no route {self.path[:100]!r}", code="not_found"))

    def do_POST(self):  # noqa: N802
        try:
            route = self.path.split("?", 1)[0].rstrip("/")
            if route not in ("/v1/chat/completions", "/v1/completions"):
                raise RequestError(404, f"no route {self.path[:100]!r}", code="not_found")
            payload = self._read_json()
            if route == "/v1/chat/completions":
                self._chat(payload)
            else:
                self._completion(payload)
        except RequestError as exc:
            self._error(exc)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            self.close_connection = True  # the client went away or stopped reading
        except Exception as exc:  # a bug or a model failure: answer 500, keep serving
            traceback.print_exc(file=sys.stderr)
            self._error(RequestError(500, f"internal error: {type(exc).__name__}: {str(exc)[:200]}"))

    def _method_not_allowed(self):
        self._error(RequestError(405, f"method {self.command} is not allowed here"))

    do_PUT = do_DELETE = do_PATCH = _method_not_allowed

    # -- request and response plumbing ----------------------------------------------------------------
    def _read_json(self) -> dict:
        if self.headers.get("Transfer-Encoding"):
            raise RequestError(411, "send the body with a Content-Length (chunked bodies are not accepted)")
        length = self.headers.get("Content-Length")
        if length is None:
            raise RequestError(411, "a Content-Length header is required")
        if not length.isdigit():
            raise RequestError(400, "Content-Length must be a non-negative integer")
        if int(length) > self.max_body_bytes:
            raise RequestError(
                413, f"the request body is over this server's {self.max_body_bytes}-byte limit"
            )
        try:
            raw = self.rfile.read(int(length))
        except TimeoutError:
            raise RequestError(408, "the request body did not arrive in time") from None
        if len(raw) < int(length):
            raise RequestError(400, "the request body is shorter than its Content-Length")
        try:
            payload = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            raise RequestError(400, "the request body is not valid UTF-8 JSON") from None
        if not isinstance(payload, dict):
            raise RequestError(400, "the request body must be a JSON object")
        return payload

    def _json(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if status == 503:
            self.send_header("Retry-After", "1")
        self.end_headers()
        self.wfile.write(data)

    def _error(self, error: RequestError) -> None:
        self.close_connection = True
        try:
            self._json(error.status, error.body())
        except OSError:
            pass

    def _start_events(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()

    def _event(self, body: dict | str) -> None:
        data = body if isinstance(body, str) else json.dumps(body)
        self.wfile.write(f"data: {data}\n\n".encode())
        self.wfile.flush()

    # -- routes -----------------------------------------------------------------------------------------
    def _chat(self, payload: dict) -> None:
        settings, deltas = self.service.chat(payload)
        ident = f"chatcmpl-{secrets.token_hex(12)}"
        base = {"id": ident, "created": int(time.time()), "model": self.service.name}
        if not settings["stream"]:
            try:
                text = "".join(deltas)
            finally:
                deltas.close()
            reason = self.service.finish_reason(text, settings["max_tokens"])
            message = {"role": "assistant", "content": text}
            self._json(200, {**base, "object": "chat.completion",
                             "choices": [{"index": 0, "message": message, "finish_reason": reason}]})  # fmt: skip
            return
        chunk = {**base, "object": "chat.completion.chunk"}
        parts: list[str] = []
        try:
            self._start_events()
            self._event({**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                               "finish_reason": None}]})  # fmt: skip
            try:
                for delta in deltas:
                    parts.append(delta)
                    self._event({**chunk, "choices": [{"index": 0, "delta": {"content": delta},
                                                       "finish_reason": None}]})  # fmt: skip
            except ValueError as exc:
                self._event(RequestError(400, str(exc)).body())
                return
            except OSError:
                raise  # the client went away or stopped reading: nothing more to send
            except Exception as exc:  # headers are sent: report in the stream, keep serving
                traceback.print_exc(file=sys.stderr)
                self._event(RequestError(500, f"internal error: {type(exc).__name__}").body())
                return
            reason = self.service.finish_reason("".join(parts), settings["max_tokens"])
            self._event({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
            self._event("[DONE]")
        finally:
            deltas.close()

    def _completion(self, payload: dict) -> None:
        settings, choice = self.service.completion(payload)
        ident = f"cmpl-{secrets.token_hex(12)}"
        base = {
            "id": ident,
            "object": "text_completion",
            "created": int(time.time()),
            "model": self.service.name,
        }
        usage = {"completion_tokens": settings["completion_tokens"]}
        if not settings["stream"]:
            self._json(200, {**base, "choices": [choice], "usage": usage})
            return
        self._start_events()
        self._event({**base, "choices": [{**choice, "finish_reason": None}]})
        self._event({**base, "choices": [{"index": 0, "text": "", "logprobs": None,
                                          "finish_reason": choice["finish_reason"]}]})  # fmt: skip
        self._event("[DONE]")


def make_server(service: ModelService, *, host: str, port: int, max_body_bytes: int) -> ThreadingHTTPServer:
    """A threading HTTP server bound to ``host:port`` (port 0 picks a free one)."""
    handler = type("BoundHandler", (Handler,), {"service": service, "max_body_bytes": max_body_bytes})
    server_class = ThreadingHTTPServer
    if ":" in host:
        server_class = type("IPv6Server", (ThreadingHTTPServer,), {"address_family": socket.AF_INET6})
    server = server_class((host, port), handler)
    server.daemon_threads = True
    return server


def run(args) -> int:
    if not is_loopback(args.host) and not args.allow_remote:
        raise ValueError(
            f"--host {args.host} is not a loopback address; the server has no authentication, so it binds "
            "to loopback only (127.0.0.1, ::1, localhost) unless you pass --allow-remote"
        )
    if not 0 <= args.port <= 65535:
        raise ValueError(f"--port {args.port} must be from 0 to 65535")
    if args.max_tokens_limit < 1 or args.max_body_bytes < 1024 or args.queue_timeout <= 0:
        raise ValueError(
            "--max-tokens-limit >= 1, --max-body-bytes >= 1024 and --queue-timeout > 0 are required"
        )
    model_args = parse_model_args(args.model_args)
    backend = backend_class(args.model)(**model_args)
    name = args.served_model_name or (Path(model_args["path"]).name if "path" in model_args else None)
    name = name or model_args.get("model") or args.model
    service = ModelService(backend, name=name, max_tokens_limit=args.max_tokens_limit,
                           queue_timeout=args.queue_timeout)  # fmt: skip
    try:
        server = make_server(service, host=args.host, port=args.port, max_body_bytes=args.max_body_bytes)
    except OSError as exc:
        raise ValueError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    host, port = server.server_address[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"serving {name!r} ({args.model} backend) at http://{shown}:{port}/v1", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        backend.close()
    return 0
