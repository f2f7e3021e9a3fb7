"""``python -m evalcore serve``: serve a local backend as an OpenAI-compatible endpoint (skeleton)."""

from __future__ import annotations


def register(subparsers) -> None:
    p = subparsers.add_parser("serve", help="serve a model as an OpenAI-compatible endpoint on loopback")
    p.add_argument("--model", required=True)
    p.add_argument("--model-args", default="")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.set_defaults(func=run)


def run(args) -> int:
    raise ValueError("serve is not implemented yet")
