"""The judge column's data: each model's latest judged score under the board's judge (read-only).

The board's judge is the first active judge config. A model's cell is its latest finished run under
that config's current protocol and instruction set: the length-controlled win rate against the
baseline with its 95% interval (``delta-mid-p``; the plain win rate with its mid-p interval at the
effective size when LC could not be fitted), the method in ``interval``, over ``n`` pairs.
"""

from __future__ import annotations

from django.db.models import F, Subquery

from common.sqltext import text_of
from leaderboard.models import JudgeConfig, JudgeRun


def board_judge() -> JudgeConfig | None:
    """The judge whose scores the board shows: the first active config."""
    return JudgeConfig.objects.filter(active=True).select_related("baseline").order_by("id").first()


def judge_fingerprint_sql() -> str:
    """A scalar SQL expression (text) that changes whenever a run is stored or refreshed, or a config
    changes: part of the board's fingerprint (its kept set is rebuilt then), read in the board's one
    fingerprint query."""
    config, run = JudgeConfig._meta.db_table, JudgeRun._meta.db_table
    values = text_of(
        "count(DISTINCT c.id)", "max(c.updated_at)", "count(DISTINCT c.id) FILTER (WHERE c.active)",
        "count(DISTINCT r.id)", "coalesce(sum(r.id), 0)", "max(r.updated_at)",
    )  # fmt: skip
    return f"(SELECT {values} FROM {config} c LEFT JOIN {run} r ON r.config_id = c.id)"


def grade_cell(run: JudgeRun) -> dict:
    """A single-answer run's cell: the mean grade (1-10) with its 95% interval (cluster-robust t over
    questions; ``bootstrap`` for runs stored before it replaced the percentile bootstrap)."""
    r = run.results or {}
    return {
        "value": r.get("score"), "ci_low": r.get("ci_low"), "ci_high": r.get("ci_high"), "lc": False, "run_id": run.pk,
        "interval": r.get("interval", "bootstrap"), "win_rate_ci_low": None, "win_rate_ci_high": None, "kind": "single", "win_rate": None, "n": r.get("n", 0), "config_id": run.config_id, "standard_error": None,
        "lc_standard_error": None, "bradley_terry": None, "bradley_terry_style": None, "failed_pairs": r.get("failed", 0),
        "by_category": r.get("by_category") or {}, "by_turn": r.get("by_turn") or {}, "cost": r.get("cost"),
    }  # fmt: skip


def judge_cell(run: JudgeRun) -> dict:
    r = run.results or {}
    if r.get("kind") == "single":
        return grade_cell(run)
    lc = r.get("lc_win_rate")
    raw = r.get("win_rate"), r.get("win_rate_ci_low"), r.get("win_rate_ci_high"), r.get("win_rate_interval")
    if raw[0] is not None and raw[1] is None and r.get("standard_error") is not None and "win_rate_interval" not in r:
        # A run stored before the win rate carried its own interval: the normal one it was shown with then.
        se = r["standard_error"]
        raw = raw[0], raw[0] - 1.959963984540054 * se, raw[0] + 1.959963984540054 * se, "normal"
    if lc is not None:
        value, low, high, interval = lc, r.get("lc_ci_low"), r.get("lc_ci_high"), r.get("lc_interval") or "normal"
    else:
        value, low, high, interval = raw
    return {
        "value": value, "ci_low": low, "ci_high": high, "interval": interval, "lc": lc is not None, "run_id": run.pk,
        "win_rate": raw[0], "win_rate_ci_low": raw[1], "win_rate_ci_high": raw[2], "n": r.get("n", 0), "config_id": run.config_id,
        "standard_error": r.get("standard_error"), "lc_standard_error": r.get("lc_standard_error"),
        "bradley_terry": r.get("bradley_terry"), "bradley_terry_style": r.get("bradley_terry_style"),
        "failed_pairs": r.get("failed_pairs", 0), "kind": "pairwise", "cost": r.get("cost"),
    }  # fmt: skip


def board_judge_cells() -> tuple[dict | None, dict[int, dict]]:
    """(the board's judge as ``{id, name, baseline}``, {catalogue model id: cell}) in one query; the
    judge is None when no model has been judged by the first active config yet."""
    first = JudgeConfig.objects.filter(active=True).order_by("id").values("id")[:1]
    runs = JudgeRun.objects.filter(
        config_id=Subquery(first), status=JudgeRun.Status.FINISHED, protocol_sha256=F("config__protocol_sha256"),
        instructions_sha256=F("config__instructions_sha256"),
    ).select_related("config__baseline").order_by("id")  # fmt: skip
    judge, cells = None, {}
    for run in runs:
        config = run.config
        judge = {"id": run.config_id, "name": config.name, "kind": config.kind,
                 "baseline": config.baseline.name if config.baseline_id else ""}  # fmt: skip
        cell = judge_cell(run)
        if cell["value"] is not None:
            cells[run.model_id] = cell
    return judge, cells


def judge_cells(config: JudgeConfig | None, *, keep_unscored: bool = False) -> dict[int, dict]:
    """{catalogue model id: cell} for ``config`` (empty when there is none); with ``keep_unscored``, a
    model whose every grade failed keeps its cell (value None) so the judge page can say so."""
    if config is None:
        return {}
    runs = JudgeRun.objects.filter(
        config=config, status=JudgeRun.Status.FINISHED, protocol_sha256=config.protocol_sha256,
        instructions_sha256=config.instructions_sha256,
    ).order_by("id")  # fmt: skip
    cells: dict[int, dict] = {}
    for run in runs:
        cell = judge_cell(run)
        if cell["value"] is not None or keep_unscored:
            cells[run.model_id] = cell
    return cells
