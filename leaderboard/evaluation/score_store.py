"""Score writes, in one place for evaluation runs and re-scoring.

A metric's numbers go to :class:`Score` (one row per run and metric, overwritten); a value that
changes, or a metric no longer reported, leaves its old numbers in :class:`ScoreHistory`.
"""

from __future__ import annotations

import json
import math

from django.utils import timezone

from leaderboard.models import Score, ScoreHistory


def json_safe(value):
    """``value`` as PostgreSQL's jsonb accepts it: non-finite floats as strings, no NUL characters.

    ``float("-inf")`` reads the strings back, so re-scoring from stored records loses nothing.
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {str(k).replace("\x00", "\ufffd"): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if value is None or isinstance(value, (bool, int)):
        return value
    return json_safe(json.loads(json.dumps(value, default=str)))


def finite(x) -> float | None:
    """A float, or None for a missing or non-finite number (the Score columns hold no NaN)."""
    return float(x) if x is not None and math.isfinite(x) else None


def score_changed(old: Score, new) -> bool:
    """Whether the engine's metric value ``new`` differs from the stored ``old`` score."""
    return (old.value, old.stderr, old.ci_low, old.ci_high, old.n, old.interval, old.effective_n) != (
        finite(new.value), finite(new.stderr), finite(new.ci_low), finite(new.ci_high), new.n, new.interval,
        finite(getattr(new, "effective_n", None)),
    )  # fmt: skip


def score_history(score: Score, reason: str, code_version: dict) -> ScoreHistory:
    """An (unsaved) history row keeping ``score``'s current numbers."""
    return ScoreHistory(
        run_id=score.run_id, metric=score.metric, value=score.value, stderr=score.stderr, ci_low=score.ci_low,
        ci_high=score.ci_high, n=score.n, interval=score.interval, reason=reason, code_version=json_safe(code_version),
    )  # fmt: skip


def score_store(run, metric: str, value) -> None:
    """Write one metric's value, standard error, interval and n for ``run`` (insert or overwrite)."""
    Score.objects.update_or_create(
        run=run, metric=metric,
        defaults={
            "value": finite(value.value), "stderr": finite(value.stderr), "ci_low": finite(value.ci_low),
            "ci_high": finite(value.ci_high), "n": value.n, "higher_is_better": value.higher_is_better,
            "interval": value.interval, "effective_n": finite(getattr(value, "effective_n", None)),
        },
    )  # fmt: skip


def scores_replace(run, metrics: dict, *, reason: str, gone_reason: str, code_version: dict,
                   rewrite_unchanged: bool) -> int:  # fmt: skip
    """Make ``run``'s scores exactly ``metrics`` (name -> the engine's metric value); call inside a transaction.

    Changed scores and metrics no longer reported keep their old numbers in history (with
    ``reason`` / ``gone_reason``, stamped with ``code_version``). ``rewrite_unchanged`` writes
    unchanged scores too (a re-run: their times move). Returns how many scores changed, appeared
    or went.
    """
    old_scores = {s.metric: s for s in run.scores.all()}
    history, changed = [], 0
    for metric, value in metrics.items():
        old = old_scores.pop(metric, None)
        differs = old is None or score_changed(old, value)
        if not differs and not rewrite_unchanged:
            continue
        changed += differs
        if old is not None and differs:
            history.append(score_history(old, reason, code_version))
        score_store(run, metric, value)
    for gone in old_scores.values():
        changed += 1
        history.append(score_history(gone, gone_reason, code_version))
        gone.delete()
    ScoreHistory.objects.bulk_create(history)
    return changed


def scores_touch(run) -> None:
    """Mark ``run``'s scores as rewritten without changing their numbers (caches keyed on their times see it)."""
    Score.objects.filter(run=run).update(updated_at=timezone.now())
