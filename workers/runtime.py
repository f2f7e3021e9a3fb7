"""The worker runtime: a per-process pool of loaded models.

Loading a model takes seconds to minutes, so each worker process keeps the models it has loaded,
keyed by their spec, and evicts the least recently used beyond ``max_models``. The pool does not
know about Django: apps' tasks hand it a spec (a hashable description) and a loader.

One engine per model per process: concurrent tasks in one process (Celery's threads pool, as the GPU
worker runs) get the same loaded model, and a vLLM engine batches their requests together. A model
that does not fit beside the loaded ones (:class:`~evalcore.models.ModelDoesNotFit`) is tried once more
after the others are closed; if it still does not fit, the task gets that error. When the worker stops,
every loaded model is closed (:func:`pool_close_on_shutdown`), so no engine outlives it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from evalcore.models.base import ModelDoesNotFit


class ModelPool:
    """Least-recently-used cache of loaded models for one worker process.

    Parameters
    ----------
    max_models : int
        How many models stay loaded at once; the least recently used is dropped first.
    """

    def __init__(self, *, max_models: int = 3):
        if max_models < 1:
            raise ValueError("max_models must be at least 1")
        self.max_models = max_models
        self._models: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.loads = 0

    def get(self, spec: Hashable, loader: Callable[[], Any]) -> Any:
        """Return the model for ``spec``, calling ``loader()`` only the first time."""
        with self._lock:
            if spec in self._models:
                self._models.move_to_end(spec)
                return self._models[spec]
            try:
                model = loader()
            except ModelDoesNotFit:
                if not self._models:
                    raise
                self._close_all()  # the loaded models' memory, then one more try
                model = loader()
            self.loads += 1
            self._models[spec] = model
            while len(self._models) > self.max_models:
                _, evicted = self._models.popitem(last=False)
                _close(evicted)
            return model

    def __contains__(self, spec: Hashable) -> bool:
        return spec in self._models

    def clear(self) -> None:
        """Drop (and close) every loaded model."""
        with self._lock:
            self._close_all()

    def _close_all(self) -> None:
        while self._models:
            _close(self._models.popitem(last=False)[1])


def _close(model: Any) -> None:
    """Release what a dropped model holds (a backend's ``close()`` frees its weights)."""
    close = getattr(model, "close", None)
    if callable(close):
        close()


# One pool per worker process (Celery's prefork children each get their own after fork).
pool = ModelPool()


def pool_close_on_shutdown(**_) -> None:
    """Celery signal handler (worker_process_shutdown, worker_shutdown): close every loaded model, so
    a stopping worker shuts its engines down instead of leaving them to the interpreter's exit."""
    pool.clear()

