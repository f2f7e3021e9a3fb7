"""Judge panels: several judge configs of one kind combined (``evalcore.judging.panel``).

A single-answer panel averages each judge's standardised grades (z-scores over everything that judge
graded, so a lenient or wide-ranging judge does not dominate); a pairwise panel fits one
Bradley-Terry model over every judge's judgments. Each judge's agreement with the rest of the panel
is reported with its interval, and the judge that disagrees most is named. The report is recomputed
from the stored grades and judgments (no model call) whenever a member's run finishes, and by the
admin's "Refresh" action.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from evalcore.judging.panel import panel_grades, panel_pairwise
from leaderboard.models import JudgeConfig, JudgeGrade, JudgePanel, JudgeRun, Judgment

log = logging.getLogger(__name__)

ROUNDS = 1000
SEED = 0


def _latest_runs(config: JudgeConfig) -> list[JudgeRun]:
    """Each model's latest finished run under the config's current protocol and questions."""
    latest: dict[int, JudgeRun] = {}
    runs = JudgeRun.objects.filter(config=config, status=JudgeRun.Status.FINISHED, protocol_sha256=config.protocol_sha256,
                                   instructions_sha256=config.instructions_sha256).select_related("model").order_by("id")  # fmt: skip
    for run in runs:
        latest[run.model_id] = run
    return list(latest.values())


def _grades_of(config: JudgeConfig) -> dict[str, dict[str, float | None]]:
    """model name -> "question/tN" -> grade (None: a failed grade)."""
    runs = {run.pk: run.model.name for run in _latest_runs(config)}
    out: dict[str, dict[str, float | None]] = {name: {} for name in runs.values()}
    rows = JudgeGrade.objects.filter(run_id__in=runs).values_list("run_id", "question_id", "turn", "score", "ok")
    for run_id, question_id, turn, score, ok in rows.iterator(chunk_size=2000):
        out[runs[run_id]][f"{question_id}/t{turn}"] = score if ok else None
    return out


def _preferences_of(config: JudgeConfig) -> list[tuple[str, str, str, float | None]]:
    """(model, baseline, instruction index, P(model's answer better)) per instruction: the swap average
    of both orders (``ab`` shows the baseline first); None when an order failed."""
    runs = {run.pk: run.model.name for run in _latest_runs(config)}
    baseline = config.baseline.name if config.baseline_id else ""
    orders: dict[tuple[int, int], dict[str, float | None]] = {}
    for run_id, idx, order, p_first, winner, ok in Judgment.objects.filter(run_id__in=runs).values_list(
        "run_id", "idx", "order", "p_first", "winner", "ok"
    ).iterator(chunk_size=2000):  # fmt: skip
        first = p_first if p_first is not None else {"A": 1.0, "B": 0.0, "tie": 0.5}.get(winner)
        orders.setdefault((run_id, idx), {})[order] = first if ok else None
    out = []
    for (run_id, idx), pair in sorted(orders.items()):
        ab, ba = pair.get("ab"), pair.get("ba")
        score = None if ab is None or ba is None else ((1 - ab) + ba) / 2
        out.append((runs[run_id], baseline, str(idx), score))
    return out


def panel_report(panel: JudgePanel) -> dict:
    """The panel's report from its members' stored results; ``error`` when it cannot be formed."""
    members = list(panel.members.select_related("baseline").order_by("id"))
    if not members:
        return {"error": "the panel has no judges"}
    kinds = {m.kind for m in members}
    if len(kinds) > 1:
        return {"error": "a panel combines judges of one kind: these mix pairwise and single-answer judges"}
    kind = kinds.pop()
    if kind == JudgeConfig.Kind.SINGLE:
        report = panel_grades({m.name: _grades_of(m) for m in members}, rounds=ROUNDS, seed=SEED)
    else:
        report = panel_pairwise({m.name: _preferences_of(m) for m in members}, rounds=ROUNDS, seed=SEED)
    return {**report, "kind": kind, "members": [m.name for m in members], "rounds": ROUNDS, "seed": SEED}


def panel_refresh(panel_id: int) -> JudgePanel | None:
    """Recompute and store one panel's report (serialised per panel)."""
    with transaction.atomic():
        panel = JudgePanel.objects.select_for_update().filter(pk=panel_id).first()
        if panel is None:
            return None
        try:
            panel.report = panel_report(panel)
        except ValueError as exc:  # a member's stored results the panel cannot combine
            log.warning("panel %s: %s", panel_id, exc)
            panel.report = {"error": str(exc)}
        panel.refreshed_at = timezone.now()
        panel.save(update_fields=["report", "refreshed_at"])
    return panel


def panels_refresh_after_run(run_id: int) -> int:
    """A judge run finished: refresh every panel its config sits on; how many were refreshed."""
    config_id = JudgeRun.objects.values_list("config_id", flat=True).get(pk=run_id)
    ids = list(JudgePanel.objects.filter(members__pk=config_id).values_list("pk", flat=True).distinct())
    for panel_id in ids:
        panel_refresh(panel_id)
    return len(ids)
