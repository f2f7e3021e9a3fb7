"""Model backends behind one interface, found by name.

``BACKENDS`` maps a name to ``"module:Class"``; the module is imported only when that backend is
asked for, so ``vllm`` is imported only on machines that use it::

    from evalcore.models import load_backend
    model = load_backend("hf", path="var/models/SmolLM2-135M-Instruct", dtype="float32")
    for delta in model.stream_chat([{"role": "user", "content": "Hi"}], {"max_new_tokens": 64}):
        print(delta, end="")
"""

from __future__ import annotations

import importlib
import re

from evalcore.models.base import (
    Backend,
    ChatParams,
    GenerationRequest,
    GenerationResult,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    ModelDoesNotFit,
    ModelIdentity,
    RollingRequest,
    RollingResult,
    loading_lock,
)

BACKENDS: dict[str, str] = {
    "hf": "evalcore.models.hf:HFBackend",
    "vllm": "evalcore.models.vllm_backend:VLLMBackend",
    "openai": "evalcore.models.openai_backend:OpenAIBackend",
    "openai-chat": "evalcore.models.openai_chat:OpenAIChatBackend",
}

__all__ = [
    "BACKENDS",
    "Backend",
    "ChatParams",
    "GenerationRequest",
    "GenerationResult",
    "LoglikelihoodRequest",
    "LoglikelihoodResult",
    "ModelDoesNotFit",
    "ModelIdentity",
    "RollingRequest",
    "RollingResult",
    "backend_class",
    "load_backend",
    "loading_lock",
    "parse_model_args",
]


def backend_class(name: str) -> type[Backend]:
    """The backend class registered under ``name`` (imports its module now)."""
    if name not in BACKENDS:
        raise ValueError(f"unknown model backend {name!r}; choose one of {sorted(BACKENDS)}")
    module_name, class_name = BACKENDS[name].split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ValueError(f"backend {name!r} needs the package {exc.name!r}, which is not installed") from exc
    return getattr(module, class_name)


def load_backend(name: str, **kwargs) -> Backend:
    """Construct the backend ``name`` with keyword arguments (e.g. ``path=``, ``dtype=``).

    One backend is built at a time in a process (:data:`~evalcore.models.base.loading_lock`: the
    imports a build makes are not thread-safe); a second thread's build waits for the first.
    """
    with loading_lock:
        return backend_class(name)(**kwargs)


def parse_model_args(text: str | None) -> dict[str, str | int | float | bool]:
    """Parse ``"path=DIR,dtype=float32,max_retries=3,verify=false"`` (the harness's --model_args form).

    Values keep their types: ``true``/``false`` (any case) become booleans, integers (``3``, ``-1``)
    ints and decimals (``0.5``, ``1e-3``) floats; anything else, and any value in double quotes
    (``model="123"``), stays a string. Keys must be identifiers and appear once.
    """
    args: dict[str, str | int | float | bool] = {}
    if not text:
        return args
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "=" not in part:
            raise ValueError(f"model argument {part!r} is not of the form key=value")
        key, value = (piece.strip() for piece in part.split("=", 1))
        if not key.isidentifier():
            raise ValueError(f"model argument name {key!r} must be an identifier such as max_retries")
        if key in args:
            raise ValueError(f"model argument {key!r} given twice")
        args[key] = _typed_value(value)
    return args


_INT = re.compile(r"[+-]?(0|[1-9][0-9]*)")
_FLOAT = re.compile(r"[+-]?([0-9]+\.[0-9]*|\.[0-9]+|[0-9]+(\.[0-9]*)?[eE][+-]?[0-9]+|[0-9]+\.[0-9]*[eE][+-]?[0-9]+)")


def _typed_value(value: str) -> str | int | float | bool:
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    if _INT.fullmatch(value):
        return int(value)
    if _FLOAT.fullmatch(value):
        return float(value)
    return value
