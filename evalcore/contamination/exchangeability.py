"""Exchangeability test (Oren et al., 2024, "Proving test set contamination in black box language models").

If a model never saw a benchmark, every order of its documents is equally likely to it: the items of a
benchmark are exchangeable. A model trained on the benchmark file in its published order assigns that
order a higher log-likelihood than shuffled orders. The test concatenates a shard of documents in the
published order and in ``K`` random orders, scores each whole text with the backend's
``loglikelihood_rolling``, and reports the one-sided permutation p-value
``(1 + #{permuted >= canonical}) / (K + 1)``. A small p-value is evidence of contamination; a large one
is no proof of its absence (the test only sees order-level memorisation).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from evalcore.contamination.items import resolve_tasks, task_items
from evalcore.models.base import Backend, RollingRequest


@dataclass(frozen=True)
class ExchangeabilityResult:
    """The canonical order's log-likelihood against ``K`` shuffled orders.

    Attributes
    ----------
    documents : int
        Documents in the shard.
    canonical_logprob : float
    permuted_logprobs : tuple of float, length K
    p_value : float
        ``(1 + #{permuted >= canonical}) / (K + 1)``.
    z : float
        ``(canonical - mean(permuted)) / sd(permuted)`` (descriptive only).
    """

    documents: int
    canonical_logprob: float
    permuted_logprobs: tuple[float, ...]
    p_value: float
    z: float

    def summary(self) -> dict:
        return {
            "documents": self.documents, "permutations": len(self.permuted_logprobs),
            "canonical_logprob": self.canonical_logprob, "permuted_mean": float(np.mean(self.permuted_logprobs)),
            "permuted_max": float(np.max(self.permuted_logprobs)), "p_value": self.p_value, "z": self.z,
        }  # fmt: skip


def permutation_p_value(canonical: float, permuted: Sequence[float]) -> float:
    """One-sided permutation p-value ``(1 + #{permuted >= canonical}) / (K + 1)``."""
    permuted = np.asarray(permuted, dtype=float)
    if permuted.ndim != 1 or permuted.size == 0:
        raise ValueError("permuted log-likelihoods must be a non-empty 1-d sequence")
    return float((1 + np.count_nonzero(permuted >= canonical)) / (permuted.size + 1))


def exchangeability_test(backend: Backend, documents: Sequence[str], *, permutations: int = 39,
                         rng: np.random.Generator, separator: str = "\n\n", progress=None) -> ExchangeabilityResult:  # fmt: skip
    """Score ``documents`` joined by ``separator`` in the given order and in ``permutations`` random orders.

    Parameters
    ----------
    backend : Backend
    documents : sequence of str, length D >= 2
        The shard, in its published order.
    permutations : int
        K, the number of random orders (the smallest reachable p-value is 1 / (K + 1)).
    rng : numpy.random.Generator
        Draws the orders.
    """
    documents = [str(d) for d in documents]
    if len(documents) < 2:
        raise ValueError("an exchangeability test needs a shard of at least 2 documents")
    if isinstance(permutations, bool) or not isinstance(permutations, int) or permutations < 1:
        raise ValueError("permutations must be a positive integer")
    orders = [np.arange(len(documents))] + [rng.permutation(len(documents)) for _ in range(permutations)]
    texts = [separator.join(documents[i] for i in order) for order in orders]
    scores = [r.logprob for r in backend.loglikelihood_rolling([RollingRequest(t) for t in texts], progress=progress)]
    canonical, permuted = float(scores[0]), np.asarray(scores[1:], dtype=float)
    spread = float(permuted.std(ddof=1)) if permuted.size > 1 else 0.0
    z = (canonical - float(permuted.mean())) / spread if spread > 0 else 0.0
    return ExchangeabilityResult(len(documents), canonical, tuple(permuted.tolist()),
                                 permutation_p_value(canonical, permuted), z)  # fmt: skip


def shard_documents(task: str, *, shard_size: int = 16, include_paths=()) -> list[str]:
    """The first ``shard_size`` items of a task's evaluation split, as rendered, in published order."""
    configs = resolve_tasks([task], include_paths=include_paths)
    if len(configs) != 1:
        raise ValueError(f"{task!r} names {len(configs)} tasks; the exchangeability test takes one task")
    if shard_size < 2:
        raise ValueError("shard_size must be at least 2")
    return [item.text for item in task_items(configs[0], limit=shard_size)]
