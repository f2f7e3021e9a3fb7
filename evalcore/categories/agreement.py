"""How often a tagger agrees with people who checked its tags, with a Wilson interval.

``agreement(pairs)`` takes (tagger's value, staff's value) per checked prompt of one category and
gives the share that agree, its Wilson 95% interval (it does not collapse to a point at 0% or 100%),
and the four cells of the confusion table, so a reader sees whether disagreement is the tagger
missing prompts or claiming too many.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from evalcore.stats.intervals import mean_interval
from evalcore.validation import check_level


def agreement(pairs: Iterable[tuple[bool, bool]], *, level: float = 0.95) -> dict:
    """Agreement of a tagger with staff on one category.

    Parameters
    ----------
    pairs : iterable of (bool, bool)
        (tagger said in the category, staff said in the category), one per checked prompt.
    level : float
        The interval's coverage.

    Returns
    -------
    dict
        ``n``, ``agree`` (count), ``value`` (share agreeing, None when n is 0), ``ci_low``, ``ci_high``
        (Wilson), ``level``, and ``both_yes``, ``both_no``, ``tagger_only`` (tagger yes, staff no),
        ``staff_only``.
    """
    check_level(level)
    rows = [(bool(t), bool(s)) for t, s in pairs]
    counts = {
        "both_yes": sum(1 for t, s in rows if t and s),
        "both_no": sum(1 for t, s in rows if not t and not s),
        "tagger_only": sum(1 for t, s in rows if t and not s),
        "staff_only": sum(1 for t, s in rows if s and not t),
    }
    out = {"n": len(rows), "agree": counts["both_yes"] + counts["both_no"], "level": level, **counts}
    if not rows:
        return {**out, "value": None, "ci_low": None, "ci_high": None}
    values = np.array([t == s for t, s in rows], dtype=float)
    m = mean_interval(values, level=level, method="wilson")
    return {**out, "value": m.mean, "ci_low": max(0.0, m.ci_low), "ci_high": min(1.0, m.ci_high)}
