"""How often a tagger agrees with people who checked its tags, with a mid-p interval.

``agreement(pairs)`` takes (tagger's value, staff's value) per checked prompt of one category and
gives the share that agree, its mid-p 95% interval (:func:`evalcore.stats.estimates.proportion`: it does
not collapse to a point at 0% or 100%, and keeps above 90% coverage at the few checks a category gets,
where Wilson's falls to 85%), and the four cells of the confusion table, so a reader sees whether
disagreement is the tagger missing prompts or claiming too many.
"""

from __future__ import annotations

from collections.abc import Iterable

from evalcore.boundary.validation import check_level
from evalcore.stats.estimates import proportion


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
        ``n``, ``agree`` (count), ``value`` (share agreeing, None when n is 0), ``ci_low``, ``ci_high``,
        ``stderr`` (the interval's; None where it is lopsided), ``interval`` (``"mid-p"``), ``level``, and
        ``both_yes``, ``both_no``, ``tagger_only`` (tagger yes, staff no), ``staff_only``.
    """
    check_level(level)
    rows = [(bool(t), bool(s)) for t, s in pairs]
    counts = {
        "both_yes": sum(1 for t, s in rows if t and s),
        "both_no": sum(1 for t, s in rows if not t and not s),
        "tagger_only": sum(1 for t, s in rows if t and not s),
        "staff_only": sum(1 for t, s in rows if s and not t),
    }
    out = {"n": len(rows), "agree": counts["both_yes"] + counts["both_no"], "level": level, "interval": "mid-p",
           **counts}  # fmt: skip
    if not rows:
        return {**out, "value": None, "stderr": None, "ci_low": None, "ci_high": None}
    m = proportion(out["agree"], out["n"], level=level)
    return {**out, "value": m.value, "stderr": m.se, "ci_low": m.ci_low, "ci_high": m.ci_high}
