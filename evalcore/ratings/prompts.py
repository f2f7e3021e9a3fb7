"""Duplicate prompts: a prompt sent far more often than others counts once (LMArena's practice).

A few prompts ("hi", a test string, a scripted attack) can be sent thousands of times; their votes
would weigh the fit toward whatever those prompts favour. Before a fit, LMArena counts how often each
prompt occurs and keeps a single vote of every prompt whose count is above the 99.9th percentile of
prompt counts. :func:`prompt_key` normalises a conversation's prompts into one key (case, Unicode form
and whitespace do not matter); :func:`duplicate_prompt_mask` says which votes stay.

The percentile is an observed count (``numpy.percentile(..., method="higher")``), so with fewer than
1,001 distinct prompts the 99.9th percentile is the largest count and nothing is dropped: the rule
only bites once there are enough prompts for its tail to mean something.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

_SPACES = re.compile(r"\s+")


def normalise_prompt(text: str) -> str:
    """``text`` in Unicode NFKC form, case-folded, with runs of white space made one space, stripped."""
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", str(text)).casefold()).strip()


def prompt_key(prompts: Sequence[str]) -> str:
    """SHA-256 (hex, 64 characters) of a conversation's normalised prompts; "" when there are none."""
    parts = [normalise_prompt(p) for p in prompts]
    if not any(parts):
        return ""
    return hashlib.sha256("\n\u241e\n".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class DuplicatePrompts:
    """Which votes a fit keeps once over-frequent prompts count once.

    Attributes
    ----------
    keep : ndarray of bool, shape (n,)
        False for every vote of an over-frequent prompt but its first.
    dropped : int
        Votes left out (``n - keep.sum()``).
    prompts : int
        Distinct over-frequent prompts.
    threshold : float
        The percentile of prompt counts; a prompt seen more often than this counts once (0 when no
        prompt was keyed).
    percentile : float
    """

    keep: np.ndarray
    dropped: int
    prompts: int
    threshold: float
    percentile: float


def duplicate_prompt_mask(keys: Sequence[str], *, percentile: float = 99.9) -> DuplicatePrompts:
    """Keep one vote (the first, in the order given) of each prompt repeated beyond ``percentile``.

    Parameters
    ----------
    keys : sequence of str, or ndarray of int, length n
        One prompt key per vote (:func:`prompt_key`, or an integer code for it), in vote-time order;
        "" or a negative code (no prompt known) is never treated as a repeat.
    percentile : float
        In (0, 100]; LMArena uses 99.9.
    """
    if not 0 < percentile <= 100:
        raise ValueError(f"percentile must be in (0, 100], got {percentile}")
    arr = np.asarray(keys)
    n = arr.shape[0]
    keep = np.ones(n, dtype=bool)
    if arr.dtype.kind in "iu":
        keyed = np.flatnonzero(arr >= 0)
        values = arr[keyed]
    else:
        keyed = np.flatnonzero(arr.astype(str) != "") if n else np.zeros(0, dtype=np.int64)
        values = arr[keyed].astype(str)
    if keyed.size == 0:
        return DuplicatePrompts(keep, 0, 0, 0.0, float(percentile))
    _, first, inverse, counts = np.unique(values, return_index=True, return_inverse=True, return_counts=True)
    threshold = float(np.percentile(counts, percentile, method="higher"))
    frequent = counts > threshold
    if frequent.any():
        repeated = frequent[inverse]
        is_first = np.zeros(keyed.size, dtype=bool)
        is_first[first] = True
        keep[keyed[repeated & ~is_first]] = False
    return DuplicatePrompts(keep, int(n - keep.sum()), int(frequent.sum()), threshold, float(percentile))
