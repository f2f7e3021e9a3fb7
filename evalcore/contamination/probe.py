"""Memorisation probe: does the model complete benchmark items verbatim?

The first half of an item's words go in, the model decodes greedily, and the item is a *hit* when the
next ``words`` (8) words it writes equal the item's next 8 words (trailing punctuation ignored).
The probe runs on the evaluation split and, as a control, on the training split of the same
benchmark: a model that saw the test set in training completes test items more often than train
items it saw no more often. Rates come with mid-p intervals (:func:`evalcore.stats.estimates.proportion`,
which keep above 90% coverage at the probe's small counts, where Wilson's fall to 85%), their difference
with Newcombe's hybrid construction built from the two mid-p intervals (``newcombe-mid-p``: the MOVER
interval for a difference of two proportions).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from evalcore.contamination.items import BenchmarkItem, resolve_tasks, task_items
from evalcore.models.base import Backend, GenerationRequest
from evalcore.stats.estimates import proportion

_WORD = re.compile(r"\S+")
_TRAILING = re.compile(r"[^\w]+$")


def clean_word(word: str) -> str:
    """A word without its trailing punctuation (``"eggs."`` -> ``"eggs"``)."""
    return _TRAILING.sub("", word)


def split_item(text: str, *, words: int = 8) -> tuple[str, list[str]] | None:
    """(prompt: the first half of the words, the next ``words`` words), or None if the item is too short.

    The prompt is the item's own text up to the start of word ``len // 2``, trailing whitespace
    removed (the model writes the separating space itself).
    """
    spans = [m.span() for m in _WORD.finditer(text)]
    half = len(spans) // 2
    if half == 0 or len(spans) - half < words:
        return None
    prompt = text[: spans[half][0]].rstrip()
    expected = [text[a:b] for a, b in spans[half : half + words]]
    return prompt, expected


def is_hit(generated: str, expected: Sequence[str]) -> bool:
    """Whether the first ``len(expected)`` words of ``generated`` equal ``expected`` (trailing punctuation ignored)."""
    got = generated.split()[: len(expected)]
    return len(got) == len(expected) and all(clean_word(a) == clean_word(b) for a, b in zip(got, expected))


@dataclass(frozen=True)
class ProbeRecord:
    """One probed item."""

    task: str
    split: str
    doc_id: int
    prompt: str
    expected: str
    generated: str
    hit: bool


DIFFERENCE_INTERVAL = "newcombe-mid-p"


@dataclass(frozen=True)
class SplitRate:
    """Hit rate on one split with its mid-p interval (``interval`` names the method, ``stderr`` is the
    interval's, None where it is lopsided)."""

    split: str
    n: int
    hits: int
    rate: float
    ci_low: float
    ci_high: float
    too_short: int
    interval: str = "mid-p"
    stderr: float | None = None


@dataclass(frozen=True)
class ProbeResult:
    """Test-split and train-split hit rates and their difference ``test - train`` with an interval."""

    task: str
    words: int
    level: float
    test: SplitRate
    train: SplitRate
    difference: float
    diff_ci_low: float
    diff_ci_high: float
    records: tuple[ProbeRecord, ...]

    def summary(self) -> dict:
        """Everything but the per-item records, as plain data."""
        return {
            "task": self.task, "words": self.words, "level": self.level,
            "test": self.test.__dict__, "train": self.train.__dict__,
            "difference": self.difference, "diff_ci_low": self.diff_ci_low, "diff_ci_high": self.diff_ci_high,
            "diff_interval": DIFFERENCE_INTERVAL,
        }  # fmt: skip


def newcombe_difference(a: SplitRate, b: SplitRate) -> tuple[float, float, float]:
    """``a.rate - b.rate`` with Newcombe's (1998) hybrid interval (method 10) built from the two rates' own
    intervals: ``d - sqrt((a - l_a)^2 + (u_b - b)^2)``, ``d + sqrt((u_a - a)^2 + (b - l_b)^2)``, clipped to
    [-1, 1]. With Wilson intervals it is Newcombe's method 10; with the mid-p intervals the probe gives
    the rates it is the MOVER interval for a difference (Zou & Donner 2008), ``newcombe-mid-p``."""
    d = a.rate - b.rate
    low = d - math.sqrt((a.rate - a.ci_low) ** 2 + (b.ci_high - b.rate) ** 2)
    high = d + math.sqrt((a.ci_high - a.rate) ** 2 + (b.rate - b.ci_low) ** 2)
    return d, max(-1.0, low), min(1.0, high)


def _split_rate(split: str, records: list[ProbeRecord], too_short: int, level: float) -> SplitRate:
    if not records:
        raise ValueError(f"no item of the {split} split is long enough to probe (needs twice the probe's words)")
    hits = sum(1 for r in records if r.hit)
    estimate = proportion(hits, len(records), level=level)
    return SplitRate(split, estimate.n, hits, estimate.value, estimate.ci_low, estimate.ci_high, too_short,
                     estimate.method, estimate.se)  # fmt: skip


def probe_items(backend: Backend, items: Sequence[BenchmarkItem], *, words: int = 8, max_gen_toks: int = 32,
                progress=None) -> tuple[list[ProbeRecord], int]:  # fmt: skip
    """Probe ``items`` in one batched ``generate_until`` call: (records, items too short to probe)."""
    if words < 1:
        raise ValueError("words must be at least 1")
    if max_gen_toks < words:
        raise ValueError("max_gen_toks must be at least the number of words to match")
    probes = [(item, split_item(item.text, words=words)) for item in items]
    usable = [(item, cut) for item, cut in probes if cut is not None]
    requests = [GenerationRequest(context=prompt, until=(), max_gen_toks=max_gen_toks) for _, (prompt, _) in usable]
    answers = backend.generate_until(requests, progress=progress) if requests else []
    records = [
        ProbeRecord(item.task, item.split, item.doc_id, prompt, " ".join(expected), answer.text, is_hit(answer.text, expected))
        for (item, (prompt, expected)), answer in zip(usable, answers)
    ]
    return records, len(probes) - len(usable)


def memorisation_probe(backend: Backend, tasks: Sequence[str], *, limit: int = 200, words: int = 8,
                       max_gen_toks: int = 32, level: float = 0.95, include_paths=(),
                       progress=None) -> dict[str, ProbeResult]:  # fmt: skip
    """Probe the first ``limit`` items of each task's evaluation and training splits.

    Returns
    -------
    dict
        Task name -> :class:`ProbeResult`. A task without a training split raises ValueError.
    """
    return {
        config.task: probe_task(backend, config, limit=limit, words=words, max_gen_toks=max_gen_toks, level=level,
                                progress=progress)  # fmt: skip
        for config in resolve_tasks(list(tasks), include_paths=include_paths)
    }


def probe_task(backend: Backend, config, *, limit: int = 200, words: int = 8, max_gen_toks: int = 32,
               level: float = 0.95, progress=None) -> ProbeResult:  # fmt: skip
    """The probe of one task (a resolved ``TaskConfig``); see :func:`memorisation_probe`."""
    test, test_short = probe_items(backend, task_items(config, limit=limit), words=words,
                                   max_gen_toks=max_gen_toks, progress=progress)  # fmt: skip
    train, train_short = probe_items(backend, task_items(config, split="training", limit=limit), words=words,
                                     max_gen_toks=max_gen_toks, progress=progress)  # fmt: skip
    test_rate = _split_rate(test[0].split if test else "test", test, test_short, level)
    train_rate = _split_rate(train[0].split if train else "train", train, train_short, level)
    d, low, high = newcombe_difference(test_rate, train_rate)
    return ProbeResult(config.task, words, level, test_rate, train_rate, d, low, high, tuple(test + train))
