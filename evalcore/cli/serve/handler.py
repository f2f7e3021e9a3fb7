"""The HTTP side of ``python -m evalcore serve``: routes, bounded JSON bodies, JSON answers and
server-sent events over one :class:`~evalcore.cli.serve.service.ModelService`."""

from __future__ import annotations

import hmac
import ipaddress
import json
import secrets
import select
import socket
import sys
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from evalcore.cli.serve.service import ModelService
from evalcore.cli.serve.validation import ClientGone, RequestError


class Handler(BaseHTTPRequestHandler):
    """OpenAI-compatible routes over one :class:`ModelService` (HTTP/1.0: one request per connection)."""

    service: ModelService
    max_body_bytes: int
    api_key: str | None = None  # when set, every route but /health needs "Authorization: Bearer <key>"
    host_names: frozenset[str] = frozenset({"localhost"})  # Host header names accepted besides IP literals
    timeout = 30  # seconds a client may take to send its request
    server_version = "podium-serve"

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        sys.stderr.write(f"{self.address_string()} {format % args}\n")

    def do_GET(self):  # noqa: N802
        route = self.path.split("?", 1)[0].rstrip("/")
        try:
            self._guard(route)
        except RequestError as exc:
            self._error(exc)
            return
        if route in ("/v1/models", "/models"):
            self._json(200, self.service.models())
        elif route == "/health":
            self._json(200, {"status": "ok"})
        else:
            self._error(RequestError(404, f"no route {self.path[:100]!r}", code="not_found"))

    def do_POST(self):  # noqa: N802
        try:
            route = self.path.split("?", 1)[0].rstrip("/")
            self._guard(route)
            if route not in ("/v1/chat/completions", "/v1/completions"):
                raise RequestError(404, f"no route {self.path[:100]!r}", code="not_found")
            payload = self._read_json()
            if route == "/v1/chat/completions":
                self._chat(payload)
            else:
                self._completion(payload)
        except RequestError as exc:
            self._error(exc)
        except ClientGone:  # it closed the connection while waiting for the model: nothing to answer
            self.close_connection = True
            self.log_message("%s", "the client left while its request waited for the model; its place is freed")
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            self.close_connection = True  # the client went away or stopped reading
        except Exception as exc:  # a bug or a model failure: answer 500, keep serving
            traceback.print_exc(file=sys.stderr)
            self._error(RequestError(500, f"internal error: {type(exc).__name__}: {str(exc)[:200]}"))

    def _method_not_allowed(self):
        try:
            self._guard(self.path.split("?", 1)[0].rstrip("/"))
        except RequestError as exc:
            self._error(exc)
            return
        self._error(RequestError(405, f"method {self.command} is not allowed here"))

    # -- who may ask ----------------------------------------------------------------------------------
    def _guard(self, route: str) -> None:
        """Refuse a Host header that names another site (DNS rebinding: a web page whose name
        resolves to this machine must not reach the model) and, with an API key, a missing or wrong
        bearer token."""
        host = host_name(self.headers.get("Host"))
        if host is None:
            raise RequestError(400, "a Host header is required", code="bad_host")
        if not _is_ip_literal(host) and host not in self.host_names:
            raise RequestError(400, f"Host {host[:100]!r} is not a name of this server", code="bad_host")
        if self.api_key is None or route == "/health":
            return
        given = self.headers.get("Authorization", "")
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), self.api_key.encode()):
            raise RequestError(401, "a valid API key is required (Authorization: Bearer KEY)",
                               code="invalid_api_key")  # fmt: skip

    do_PUT = do_DELETE = do_PATCH = _method_not_allowed

    def client_gone(self) -> bool:
        """Whether the client has closed its connection (one request per connection: after its body the
        client sends nothing, so a readable socket that yields no byte is a closed one)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):  # reset, or already closed
            return True

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
        content_type = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        if content_type != "application/json":
            raise RequestError(415, "send the body as JSON with Content-Type: application/json")
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

    def _json(self, status: int, body: dict, *, retry_after: int | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if status == 401:
            self.send_header("WWW-Authenticate", "Bearer")
        self.send_header("Content-Length", str(len(data)))
        if retry_after is not None or status in (429, 503):
            self.send_header("Retry-After", str(retry_after or 1))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, error: RequestError) -> None:
        self.close_connection = True
        try:
            self._json(error.status, error.body(), retry_after=error.retry_after)
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
        settings, deltas = self.service.chat(payload, gone=self.client_gone)
        base = {"id": f"chatcmpl-{secrets.token_hex(12)}", "created": int(time.time()), "model": self.service.name}
        if not settings["stream"]:
            try:
                text = "".join(deltas)
            finally:
                deltas.close()
            reason, usage = self.service.chat_ending(text, settings)
            choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": reason}
            self._json(200, {**base, "object": "chat.completion", "choices": [choice], "usage": usage})
            return
        chunk = {**base, "object": "chat.completion.chunk"}
        try:
            self._start_events()
            self._event({**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                               "finish_reason": None}]})  # fmt: skip
            text = self._stream_deltas(chunk, deltas)
            if text is None:
                return
            reason, usage = self.service.chat_ending(text, settings)
            self._event({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": reason}], "usage": usage})
            self._event("[DONE]")
        finally:
            deltas.close()

    def _stream_deltas(self, chunk: dict, deltas) -> str | None:
        """Send each delta as an event; return the whole text, or None after reporting an error."""
        parts: list[str] = []
        try:
            for delta in deltas:
                parts.append(delta)
                self._event({**chunk, "choices": [{"index": 0, "delta": {"content": delta},
                                                   "finish_reason": None}]})  # fmt: skip
        except ValueError as exc:
            self._event(RequestError(400, str(exc)).body())
            return None
        except OSError:
            raise  # the client went away or stopped reading: nothing more to send
        except Exception as exc:  # headers are sent: report in the stream, keep serving
            traceback.print_exc(file=sys.stderr)
            self._event(RequestError(500, f"internal error: {type(exc).__name__}").body())
            return None
        return "".join(parts)

    def _completion(self, payload: dict) -> None:
        settings, choices, usage = self.service.completion(payload, gone=self.client_gone)
        base = {"id": f"cmpl-{secrets.token_hex(12)}", "object": "text_completion", "created": int(time.time()),
                "model": self.service.name}  # fmt: skip
        if not settings["stream"]:
            self._json(200, {**base, "choices": choices, "usage": usage})
            return
        self._start_events()
        for choice in choices:  # each completion arrives as one text chunk
            self._event({**base, "choices": [{**choice, "finish_reason": None}]})
        endings = [{"index": c["index"], "text": "", "logprobs": None, "finish_reason": c["finish_reason"]}
                   for c in choices]  # fmt: skip
        self._event({**base, "choices": endings, "usage": usage})
        self._event("[DONE]")


def host_name(header: str | None) -> str | None:
    """The name in a Host header, lower-cased, without its port or IPv6 brackets (None when absent)."""
    if not header or not header.strip():
        return None
    value = header.strip().lower()
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")


def _is_ip_literal(host: str) -> bool:
    """An address typed as such: a browser sends one only when its user asked for this address, never
    after resolving a name, so it cannot come from DNS rebinding."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def make_server(service: ModelService, *, host: str, port: int, max_body_bytes: int, api_key: str | None = None,
                host_names: tuple[str, ...] = ()) -> ThreadingHTTPServer:  # fmt: skip
    """A threading HTTP server bound to ``host:port`` (port 0 picks a free one).

    ``api_key``: required as a bearer token on every route but ``/health``. ``host_names``: names a
    client may put in its Host header besides ``localhost``, the bound name and IP addresses."""
    names = frozenset({"localhost", host.lower(), *(name.lower().rstrip(".") for name in host_names)})
    attributes = {"service": service, "max_body_bytes": max_body_bytes, "api_key": api_key or None, "host_names": names}
    handler = type("BoundHandler", (Handler,), attributes)
    server_class = ThreadingHTTPServer
    if ":" in host:
        server_class = type("IPv6Server", (ThreadingHTTPServer,), {"address_family": socket.AF_INET6})
    server = server_class((host, port), handler)
    server.daemon_threads = True
    return server
