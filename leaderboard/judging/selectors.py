"""Judge reads for the pages, exports and API: configs, scores, the latest audit, the judgments of a
model, and the rank correlation between judge scores and arena ratings."""

from __future__ import annotations

from arena import selectors as arena_selectors
from arena.models import LanguageModel
from evalcore.judging import JudgeProtocol
from evalcore.stats.rank_correlation import spearman_interval
from leaderboard.judging.columns import judge_cells
from leaderboard.judging.configs import protocol_of
from leaderboard.models import JudgeAnswer, JudgeAudit, JudgeConfig, JudgeRun, Judgment, Submission

AUDIT_FIGURES = (
    ("accuracy_swap_average", "Accuracy, swap-and-average"),
    ("accuracy_ab", "Accuracy, first answer shown first (ab)"),
    ("accuracy_ba", "Accuracy, second answer shown first (ba)"),
    ("accuracy_both_agree", "Accuracy, both orders must agree"),
    ("consistency", "Consistency: the same winner in both orders"),
    ("first_position_rate", "Rate of choosing the first position"),
    ("kappa", "Cohen's kappa against the labels"),
)
CORRELATION_ROUNDS = 2000


PUBLIC_REVIEW = (Submission.Review.NONE, Submission.Review.APPROVED)


def hidden_model_ids(viewer=None) -> set[int]:
    """Catalogue models the viewer may not see judged: those registered only by submissions that are
    private, waiting for review, hidden or rejected (their owner and staff still see them)."""
    subs = Submission.objects.values_list("language_model_id", "owner_id", "private", "review_state")
    staff = viewer is not None and viewer.is_authenticated and viewer.is_staff
    seen: dict[int, bool] = {}
    for model_id, owner_id, private, review in subs:
        visible = staff or (not private and review in PUBLIC_REVIEW) or (
            viewer is not None and viewer.is_authenticated and owner_id == viewer.pk)
        seen[model_id] = seen.get(model_id, False) or visible
    return {model_id for model_id, visible in seen.items() if not visible}


def judge_configs() -> list[JudgeConfig]:
    return list(JudgeConfig.objects.select_related("baseline", "judge_model").order_by("-active", "id"))


def judge_config_get(config_id: int) -> JudgeConfig | None:
    return JudgeConfig.objects.select_related("baseline", "judge_model").filter(pk=config_id).first()


def _protocol_or_error(config: JudgeConfig) -> tuple[JudgeProtocol | None, str]:
    try:
        return protocol_of(config), ""
    except ValueError as exc:
        return None, str(exc)


def judge_scores(config: JudgeConfig, viewer=None) -> list[dict]:
    """Every judged model's latest cell under the config's current protocol, best first, with arena rating."""
    hidden = hidden_model_ids(viewer)
    cells = {k: v for k, v in judge_cells(config).items() if k not in hidden}
    names = dict(LanguageModel.objects.filter(pk__in=cells).values_list("pk", "name"))
    snapshot = arena_selectors.snapshot_latest("bt", "overall")
    arena = {r["model"]: r for r in snapshot.rows} if snapshot is not None else {}
    rows = []
    for model_id, cell in cells.items():
        rows.append({**cell, "baseline": False, "model_id": model_id, "model": names[model_id],
                     "arena": arena.get(names[model_id])})  # fmt: skip
    if rows:  # the baseline against itself: exactly 50% by construction (AlpacaEval lists it so)
        baseline = config.baseline
        rows.append({"model_id": baseline.pk, "model": baseline.name, "run_id": None, "value": 50.0, "ci_low": None,
                     "ci_high": None, "lc": True, "win_rate": 50.0, "n": len(config.instructions), "config_id": config.pk,
                     "bradley_terry": None, "bradley_terry_style": None, "arena": arena.get(baseline.name), "failed_pairs": 0,
                     "lc_standard_error": None, "standard_error": None, "baseline": True})  # fmt: skip
    return sorted(rows, key=lambda r: -r["value"])


def judge_arena_correlation(rows: list[dict]) -> dict:
    """Spearman's rho between judge scores and arena ratings over models that have both, with a bootstrap."""
    both = [r for r in rows if r["arena"] is not None]
    result = spearman_interval([r["value"] for r in both], [r["arena"]["rating"] for r in both],
                               rounds=CORRELATION_ROUNDS, seed=0)  # fmt: skip
    return {"value": result.value, "ci_low": result.ci_low, "ci_high": result.ci_high, "n": result.n,
            "rounds": result.rounds, "models": [r["model"] for r in both]}  # fmt: skip


def audit_latest(config: JudgeConfig) -> JudgeAudit | None:
    return config.audits.filter(status=JudgeAudit.Status.FINISHED).order_by("-finished_at", "-id").first()


def audit_summary(audit: JudgeAudit | None) -> dict | None:
    """The audit's figures with intervals, and whether the judge is no better than chance (accuracy's
    interval, swap-and-average, contains 50%)."""
    if audit is None:
        return None
    report = audit.report
    figures = [{"key": key, "label": label, **report[key]} for key, label in AUDIT_FIGURES if key in report]
    accuracy = report.get("accuracy_swap_average") or {}
    low, high = accuracy.get("ci_low"), accuracy.get("ci_high")
    return {
        "id": audit.pk, "pairs_file": audit.pairs_file, "pairs": report.get("pairs"), "limit": audit.limit,
        "failed_pairs": len(report.get("failed_pairs", [])), "ties": report.get("ties_swap_average"),
        "figures": figures, "finished_at": audit.finished_at, "judge_key": audit.judge_key,
        "chance": low is not None and high is not None and low <= 0.5 <= high,
        "protocol_sha256": audit.protocol_sha256,
    }  # fmt: skip


def judge_page(config: JudgeConfig, viewer=None) -> dict:
    """What the judge protocol page shows."""
    protocol, protocol_error = _protocol_or_error(config)
    rows = judge_scores(config, viewer)
    latest = config.runs.filter(status=JudgeRun.Status.FINISHED).exclude(judge_key="").order_by("-id").first()
    audit = audit_summary(audit_latest(config))
    judge_name = config.judge_model.name if config.judge_model_id else config.judge_model_args.get("path", "")
    return {
        "config": config, "protocol": protocol, "protocol_error": protocol_error,
        "judge_name": judge_name, "judge_backend": config.judge_model.backend if config.judge_model_id else config.judge_backend,
        "judge_key": latest.judge_key if latest else (audit or {}).get("judge_key", ""),
        "rows": rows, "correlation": judge_arena_correlation(rows), "audit": audit,
        "instructions": len(config.instructions),
        "pending": config.runs.filter(status__in=JudgeRun.ACTIVE).count(),
        "failed": list(config.runs.filter(status=JudgeRun.Status.FAILED).exclude(model_id__in=hidden_model_ids(viewer))
                       .select_related("model").order_by("-id")[:10]),
    }  # fmt: skip


def judged_model_run(config: JudgeConfig, model_id: int, viewer=None) -> JudgeRun | None:
    """The latest finished run of a model under ``config`` (None when the viewer may not see the model)."""
    if model_id in hidden_model_ids(viewer):
        return None
    return (
        config.runs.filter(model_id=model_id, status=JudgeRun.Status.FINISHED)
        .select_related("model", "config", "config__baseline").order_by("-id").first()
    )  # fmt: skip


def judgments_of_run(run: JudgeRun) -> list[dict]:
    """Per instruction: the question, both answers, the verdict in each order and their swap average.

    ``model_preference`` is P(the judged model's answer is better): the mean of ``1 - p_first(ab)`` and
    ``p_first(ba)`` (``ab`` shows the baseline's answer first). None when an order failed.
    """
    answers: dict[tuple[int, int], str] = {}
    for model_id, idx, text in JudgeAnswer.objects.filter(
        model_id__in=[run.model_id, run.config.baseline_id], instructions_sha256=run.instructions_sha256
    ).values_list("model_id", "idx", "text"):
        answers[(model_id, idx)] = text
    by_idx: dict[int, dict] = {}
    for j in Judgment.objects.filter(run=run).order_by("idx", "order"):
        by_idx.setdefault(j.idx, {})[j.order] = j
    instructions = run.config.instructions
    out = []
    for idx, orders in sorted(by_idx.items()):
        ab, ba = orders.get("ab"), orders.get("ba")
        scores = [None if j is None or not j.ok else _first_score(j) for j in (ab, ba)]
        pref = None if None in scores else ((1 - scores[0]) + scores[1]) / 2
        out.append({
            "idx": idx, "question": instructions[idx] if idx < len(instructions) else "",
            "baseline_answer": answers.get((run.config.baseline_id, idx), ""), "model_answer": answers.get((run.model_id, idx), ""),
            "ab": ab, "ba": ba, "orders": [("ab", ab), ("ba", ba)], "model_preference": pref,
        })  # fmt: skip
    return out


def _first_score(j: Judgment) -> float:
    if j.p_first is not None:
        return j.p_first
    return {"A": 1.0, "B": 0.0, "tie": 0.5}.get(j.winner, 0.5)


def judgments_for_export(config: JudgeConfig, model_id: int | None = None, viewer=None):
    """Every stored judgment of the config's finished runs (one model's when given), as flat records."""
    runs = config.runs.filter(status=JudgeRun.Status.FINISHED).exclude(model_id__in=hidden_model_ids(viewer))
    if model_id is not None:
        runs = runs.filter(model_id=model_id)
    rows = Judgment.objects.filter(run__in=runs).order_by("run_id", "idx", "order").values_list(
        "run_id", "run__model__name", "idx", "order", "p_first", "verdict", "winner", "weight", "ok", "error",
        "prompt_sha256", "raw",
    )  # fmt: skip
    for run_id, model, idx, order, p_first, verdict, winner, weight, ok, error, sha, raw in rows.iterator(chunk_size=500):
        yield {
            "run_id": run_id, "config": config.name, "model": model, "baseline": config.baseline.name,
            "instruction_idx": idx, "order": order, "first_shown": config.baseline.name if order == "ab" else model,
            "p_first": p_first, "verdict": verdict, "winner": winner, "weight": weight,
            "status": "ok" if ok else "failed", "error": error, "prompt_sha256": sha, "raw": raw,
        }  # fmt: skip


def judgments_queryset(config: JudgeConfig, model_id: int | None = None, viewer=None):
    """Judgments of the config's finished runs the viewer may see, for the API."""
    runs = config.runs.filter(status=JudgeRun.Status.FINISHED).exclude(model_id__in=hidden_model_ids(viewer))
    if model_id is not None:
        runs = runs.filter(model_id=model_id)
    return Judgment.objects.filter(run__in=runs).select_related("run", "run__model").order_by("run_id", "idx", "order")
