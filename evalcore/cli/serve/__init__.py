"""``python -m evalcore serve``: serve a local backend as an OpenAI-compatible endpoint on loopback.

::

    python -m evalcore serve --model hf --model-args path=var/models/SmolLM2-135M-Instruct --port 8011

Endpoints (under ``/v1``): ``GET /models``, ``POST /chat/completions`` (``stream`` true or false;
server-sent events with ``choices[0].delta.content`` and a final ``data: [DONE]``) and
``POST /completions`` (``prompt`` in any of the API's forms: a string, a list of strings, a list of
token ids or a list of token-id lists, one choice per prompt with its ``index``; ``max_tokens`` (0
with ``echo``), ``temperature``, ``top_p``, ``seed``, ``stop``, ``stream``, and ``echo`` +
``logprobs`` for the prompt's token log-probabilities, which the ``openai`` backend's loglikelihood
and lm-evaluation-harness's ``local-completions`` read). Every answer carries ``usage``
(``prompt_tokens``, ``completion_tokens``, ``total_tokens``; a stream in its last chunk). A streamed
completion arrives as one text chunk per prompt.

Modules: :mod:`.validation` (request checks), :mod:`.completions` (one prompt through the backend),
:mod:`.service` (the model behind its lock), :mod:`.batching` (concurrent chat requests in one
call), :mod:`.handler` (HTTP and server-sent events).

Who may ask: the server binds to loopback unless ``--allow-remote``; with ``--api-key`` (or the
``PODIUM_SERVE_API_KEY`` environment variable) every route but ``/health`` needs ``Authorization:
Bearer KEY``; a Host header must be an IP address, ``localhost``, the bound name or a name given with
``--host-name`` (a web page on another site that resolves to this machine is refused: DNS
rebinding); request bodies must be ``Content-Type: application/json``. Model calls are
serialised by a lock (one model, one call at a time); a request waits for its turn as long as its
client does, unless ``--queue-timeout SECONDS`` (or ``PODIUM_SERVE_QUEUE_TIMEOUT``) bounds the wait
(then 503 with ``Retry-After``, the measured length of a turn); non-streamed chat requests that wait for it
together are answered in one batched call (:mod:`.batching`: concurrent benchmark clients share
forward passes and few-shot prefixes); on the vllm backend no request takes the lock (chat, streamed
or not, and completions): each goes to the engine as it arrives, at most ``MAX_WAITING`` in flight (its
continuous batching shares decode steps); bad requests get
4xx answers in OpenAI's error shape (``{"error": {"message", "type", "param", "code"}}``), never a
crash.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from evalcore.boundary.netutil import is_loopback
from evalcore.cli.serve.handler import Handler, make_server
from evalcore.cli.serve.service import MAX_WAITING, QUEUE_TIMEOUT_ENV, ModelService, parse_queue_timeout
from evalcore.cli.serve.validation import RequestError
from evalcore.models import backend_class, parse_model_args

API_KEY_ENV = "PODIUM_SERVE_API_KEY"

__all__ = ["MAX_WAITING", "QUEUE_TIMEOUT_ENV", "Handler", "ModelService", "RequestError", "is_loopback", "make_server",
           "parse_queue_timeout", "register", "run"]  # fmt: skip


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
    p.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --host (set --api-key too)")
    p.add_argument("--api-key", default=None, help=f"require this bearer token (default: ${API_KEY_ENV} if set)")
    p.add_argument("--host-name", action="append", default=[], metavar="NAME",
                   help="a name clients may use in the Host header (repeatable; IP addresses and localhost always)")
    p.add_argument("--served-model-name", default=None, help="name clients send (default: folder name)")
    p.add_argument("--max-tokens-limit", type=int, default=1024, help="largest max_tokens accepted")
    p.add_argument("--max-body-bytes", type=int, default=1 << 20, help="largest request body accepted")
    p.add_argument("--queue-timeout", default=None, metavar="SECONDS|none",
                   help=f"seconds a request may wait for the model before a 503 with Retry-After; 'none' (the "
                        f"default, also from ${QUEUE_TIMEOUT_ENV}) waits as long as the client does")  # fmt: skip
    p.set_defaults(func=run)


def run(args) -> int:
    if not is_loopback(args.host) and not args.allow_remote:
        raise ValueError(
            f"--host {args.host} is not a loopback address; the server binds to loopback only (127.0.0.1, ::1, "
            "localhost) unless you pass --allow-remote (and give it an --api-key)"
        )
    if not 0 <= args.port <= 65535:
        raise ValueError(f"--port {args.port} must be from 0 to 65535")
    if args.max_tokens_limit < 1 or args.max_body_bytes < 1024:
        raise ValueError("--max-tokens-limit >= 1 and --max-body-bytes >= 1024 are required")
    if args.queue_timeout is not None:
        queue_timeout = parse_queue_timeout(args.queue_timeout, "--queue-timeout")
    else:
        queue_timeout = parse_queue_timeout(os.environ.get(QUEUE_TIMEOUT_ENV), f"${QUEUE_TIMEOUT_ENV}")
    api_key = args.api_key if args.api_key is not None else os.environ.get(API_KEY_ENV) or None
    if api_key is not None and len(api_key) < 16:
        raise ValueError(f"the API key must be at least 16 characters (--api-key or ${API_KEY_ENV})")
    model_args = parse_model_args(args.model_args)
    backend = backend_class(args.model)(**model_args)
    name = args.served_model_name or (Path(str(model_args["path"])).name if "path" in model_args else None)
    name = str(name or model_args.get("model") or args.model)
    service = ModelService(backend, name=name, max_tokens_limit=args.max_tokens_limit,
                           queue_timeout=queue_timeout)  # fmt: skip
    try:
        server = make_server(service, host=args.host, port=args.port, max_body_bytes=args.max_body_bytes,
                             api_key=api_key, host_names=tuple(args.host_name))  # fmt: skip
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
