"""Judge reads for the pages, exports and API: configs, scores, the latest audit, the judgments of a
model, and the rank correlation between judge scores and arena ratings."""

from __future__ import annotations

from arena.catalogue.selectors import BoardFilters, descriptions, rated_names, rows_public
from arena.models import LanguageModel
from arena.ratings import selectors as rating_selectors
from common.urls import addresses_withheld
from evalcore.judging import JudgeProtocol
from evalcore.judging.fastchat import looks_like_fastchat
from evalcore.stats.rank_correlation import spearman_interval
from leaderboard.judging.columns import judge_cells
from leaderboard.judging.configs import grading_protocols_of, protocol_of, questions_of
from leaderboard.models import (
    JudgeAnswer,
    JudgeAudit,
    JudgeConfig,
    JudgeGrade,
    JudgePanel,
    JudgeRun,
    Judgment,
    Submission,
)

AUDIT_FIGURES = (
    ("accuracy_swap_average", "Accuracy, swap-and-average"),
    ("accuracy_ab", "Accuracy, first answer shown first (ab)"),
    ("accuracy_ba", "Accuracy, second answer shown first (ba)"),
    ("accuracy_both_agree", "Accuracy, both orders must agree"),
    ("consistency", "Consistency: the same winner in both orders"),
    ("first_position_rate", "Rate of choosing the first position"),
    ("kappa", "Cohen's kappa against the labels"),
    ("accuracy_grades", "Accuracy: the answer people preferred graded higher"),
    ("tie_rate_grades", "Rate of equal grades (counted as wrong)"),
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
    """Every judge config, active first, each with ``protocol_label``: the bundled name, "FastChat
    prompts (NAME)" for pasted FastChat lines, or "custom YAML"."""
    configs = list(JudgeConfig.objects.select_related("baseline", "judge_model").order_by("-active", "id"))
    for config in configs:
        if not config.protocol_yaml.strip():
            config.protocol_label = config.protocol_name
        elif looks_like_fastchat(config.protocol_yaml):
            name = config.protocol_name.strip()
            config.protocol_label = f"FastChat prompts ({name})" if name else "FastChat prompts"
        else:
            config.protocol_label = "custom YAML"
    return configs


def panels() -> list:
    return list(JudgePanel.objects.prefetch_related("members").order_by("id"))


def judge_config_get(config_id: int) -> JudgeConfig | None:
    return JudgeConfig.objects.select_related("baseline", "judge_model").filter(pk=config_id).first()


def _protocol_or_error(config: JudgeConfig) -> tuple[JudgeProtocol | None, str]:
    try:
        return protocol_of(config), ""
    except ValueError as exc:
        return None, str(exc)


def protocol_members(config: JudgeConfig) -> list[dict]:
    """Every protocol ``config`` judges with (the API's ``protocols``): role, name, sha256, source and
    how a generated verdict is read; empty when the config's protocol no longer loads."""
    protocol, _ = _protocol_or_error(config)
    if protocol is None:
        return []
    members = [("single", protocol)]
    if config.kind == JudgeConfig.Kind.SINGLE:
        try:
            family = grading_protocols_of(config)
        except ValueError:
            return []
        members = [(r, p) for r in ("single", "single_multi", "reference", "reference_multi")
                   if (p := getattr(family, r)) is not None]  # fmt: skip
    return [{"role": role, "name": p.name, "sha256": p.sha256, "source": p.source or "Podium's wording",
             "verdict_parse": "fastchat" if p.verdict.fastchat else "podium"} for role, p in members]  # fmt: skip


def _grading_members(config: JudgeConfig, protocol: JudgeProtocol | None) -> list[dict]:
    """A grading config's family members beyond the one shown (turn 2, reference-guided): role, name,
    hash and where its wording comes from; empty for a pairwise config or a family of one."""
    if protocol is None or config.kind != JudgeConfig.Kind.SINGLE:
        return []
    try:
        family = grading_protocols_of(config)
    except ValueError:
        return []
    roles = (("single_multi", "turn 2, in context"), ("reference", "turn 1, against the reference"),
             ("reference_multi", "turn 2, against the references"))  # fmt: skip
    return [{"role": label, "name": p.name, "sha256": p.sha256, "source": p.source, "system": p.system, "user": p.user}
            for role, label in roles if (p := getattr(family, role)) is not None]  # fmt: skip


def judge_scores(config: JudgeConfig, viewer=None) -> list[dict]:
    """Every judged model's latest cell under the config's current protocol, best first, with arena rating."""
    hidden = hidden_model_ids(viewer)
    keep = config.kind == JudgeConfig.Kind.SINGLE  # a model whose every grade failed is listed, unscored
    cells = {k: v for k, v in judge_cells(config, keep_unscored=keep).items() if k not in hidden}
    names = dict(LanguageModel.objects.filter(pk__in=cells).values_list("pk", "name"))
    snapshot = rating_selectors.snapshot_latest("bt", "overall")
    shown = rows_public(snapshot.rows, descriptions(names=rated_names(snapshot.rows)), BoardFilters(retired=True)) if snapshot is not None else []
    arena = {r["model"]: r for r in shown}  # a model not shown publicly in the arena has no public rating
    rows = []
    for model_id, cell in cells.items():
        rows.append({**cell, "baseline": False, "model_id": model_id, "model": names[model_id],
                     "arena": arena.get(names[model_id])})  # fmt: skip
    if rows and config.baseline_id is not None:  # the baseline against itself: exactly 50% by construction (AlpacaEval lists it so)
        baseline = config.baseline
        rows.append({"model_id": baseline.pk, "model": baseline.name, "run_id": None, "value": 50.0, "ci_low": None,
                     "ci_high": None, "interval": None, "lc": True, "win_rate": 50.0, "win_rate_ci_low": None,
                     "win_rate_ci_high": None, "n": len(config.instructions), "config_id": config.pk,
                     "bradley_terry": None, "bradley_terry_style": None, "arena": arena.get(baseline.name), "failed_pairs": 0,
                     "lc_standard_error": None, "standard_error": None, "baseline": True})  # fmt: skip
    return sorted(rows, key=lambda r: (r["value"] is None, -(r["value"] or 0.0)))


def judge_arena_correlation(rows: list[dict]) -> dict:
    """Spearman's rho between judge scores and arena ratings over models that have both, with a bootstrap."""
    both = [r for r in rows if r["arena"] is not None and r["value"] is not None]
    result = spearman_interval([r["value"] for r in both], [r["arena"]["rating"] for r in both],
                               rounds=CORRELATION_ROUNDS, seed=0)  # fmt: skip
    return {"value": result.value, "ci_low": result.ci_low, "ci_high": result.ci_high, "n": result.n,
            "rounds": result.rounds, "models": [r["model"] for r in both]}  # fmt: skip


def audit_latest(config: JudgeConfig) -> JudgeAudit | None:
    return config.audits.filter(status=JudgeAudit.Status.FINISHED).order_by("-finished_at", "-id").first()


def audits_latest(config: JudgeConfig) -> list[JudgeAudit]:
    """The latest finished audit on each labelled set (MT-Bench's human votes, LLMBar, ...), newest first."""
    latest: dict[str, JudgeAudit] = {}
    for audit in config.audits.filter(status=JudgeAudit.Status.FINISHED).order_by("-finished_at", "-id"):
        latest.setdefault(audit.pairs_file, audit)
    return list(latest.values())


def judge_cost(config: JudgeConfig) -> dict | None:
    """What this judge costs per 1,000 judgments (or grades): the mean over its finished runs that
    computed any (runs served from the cache cost nothing and are left out), with the run count."""
    costs = [r["cost"] for r in config.runs.filter(status=JudgeRun.Status.FINISHED).values_list("results", flat=True)
             if isinstance(r, dict) and isinstance(r.get("cost"), dict)]  # fmt: skip
    if not costs:
        return None
    out: dict = {"runs": len(costs)}
    for key in ("seconds_per_1000", "prompt_tokens_per_1000", "completion_tokens_per_1000"):
        values = [c[key] for c in costs if isinstance(c.get(key), (int, float))]
        out[key] = sum(values) / len(values) if values else None
    out["judgments"] = sum(int(c.get("judgments") or 0) for c in costs)
    return out


def audit_summary(audit: JudgeAudit | None) -> dict | None:
    """The audit's figures with intervals, and whether the judge is no better than chance (accuracy's
    interval, swap-and-average, contains 50%)."""
    if audit is None:
        return None
    report = audit.report
    figures = [{"key": key, "label": label, **report[key]} for key, label in AUDIT_FIGURES if key in report]
    accuracy = report.get("accuracy_swap_average") or report.get("accuracy_grades") or {}
    low, high = accuracy.get("ci_low"), accuracy.get("ci_high")
    return {
        "id": audit.pk, "pairs_file": audit.pairs_file, "pairs": report.get("pairs"), "limit": audit.limit,
        "failed_pairs": len(report.get("failed_pairs", [])), "ties": report.get("ties_swap_average"),
        "figures": figures, "finished_at": audit.finished_at, "judge_key": audit.judge_key,
        "chance": low is not None and high is not None and low <= 0.5 <= high,
        "protocol_sha256": audit.protocol_sha256, "kind": report.get("kind", "pairwise"),
    }  # fmt: skip


def judge_page(config: JudgeConfig, viewer=None) -> dict:
    """What the judge protocol page shows."""
    protocol, protocol_error = _protocol_or_error(config)
    rows = judge_scores(config, viewer)
    latest = config.runs.filter(status=JudgeRun.Status.FINISHED).exclude(judge_key="").order_by("-id").first()
    audits = [audit_summary(a) for a in audits_latest(config)]
    audit = audits[0] if audits else None
    judge_name = config.judge_model.name if config.judge_model_id else config.judge_model_args.get("path", "")
    return {
        "config": config, "protocol": protocol, "protocol_error": protocol_error,
        "members": _grading_members(config, protocol),
        "judge_name": judge_name, "judge_backend": config.judge_model.backend if config.judge_model_id else config.judge_backend,
        "judge_key": latest.judge_key if latest else (audit or {}).get("judge_key", ""),
        "rows": rows, "correlation": judge_arena_correlation(rows), "audit": audit, "audits": audits,
        "instructions": len(config.instructions) if config.kind == JudgeConfig.Kind.PAIRWISE else question_count(config),
        "cost": judge_cost(config), "panels": panels_of(config), "categories": _cells(rows),
        "pending": config.runs.filter(status__in=JudgeRun.ACTIVE).count(),
        "failed": _failed_runs(config, viewer),
    }  # fmt: skip


def _endpoint_urls(args) -> list[str]:
    url = (args or {}).get("base_url") if isinstance(args, dict) else None
    return [url] if isinstance(url, str) else []


def _failed_runs(config: JudgeConfig, viewer) -> list[dict]:
    """The latest failed runs, {model, failure_reason}. An unreachable endpoint's error names its URL,
    which can be an internal host: the model's or the judge's address is staff's only."""
    runs = list(config.runs.filter(status=JudgeRun.Status.FAILED).exclude(model_id__in=hidden_model_ids(viewer))
                .select_related("model").order_by("-id")[:10])  # fmt: skip
    if getattr(viewer, "is_staff", False):
        return [{"model": r.model, "failure_reason": r.failure_reason} for r in runs]
    judge = _endpoint_urls(config.judge_model.model_args if config.judge_model_id else config.judge_model_args)
    return [{"model": r.model, "failure_reason": addresses_withheld(r.failure_reason, judge + _endpoint_urls(r.model.model_args))}
            for r in runs]  # fmt: skip


def question_count(config: JudgeConfig) -> int | None:
    try:
        return len(questions_of(config))
    except ValueError:
        return None


def _cells(rows: list[dict]) -> list[str]:
    """The category columns of a single-answer judge's table (first-seen order); each row gets its
    ``category_cells`` and ``turn_cells`` (turns 1 and 2) in column order."""
    seen: dict[str, None] = {}
    for r in rows:
        for category in r.get("by_category") or {}:
            seen.setdefault(category, None)
    for r in rows:
        by_category, by_turn = r.get("by_category") or {}, r.get("by_turn") or {}
        r["category_cells"] = [(c, by_category.get(c)) for c in seen]
        r["turn_cells"] = [(t, by_turn.get(t, by_turn.get(f"t{t}"))) for t in ("1", "2")]
    return list(seen)


def panels_of(config: JudgeConfig) -> list[dict]:
    """The panels this judge sits on, with its agreement with the rest of each panel."""
    out = []
    for panel in config.panels.order_by("id"):
        report = panel.report or {}
        mine = (report.get("judges") or {}).get(config.name)
        out.append({"panel": panel, "agreement": mine, "most_disagreeing": report.get("most_disagreeing") == config.name})
    return out


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


def grades_of_run(run: JudgeRun) -> list[dict]:
    """Per question of a single-answer run: each turn's question, the model's answer and its grade."""
    try:
        questions = questions_of(run.config)
    except ValueError:
        questions = []
    answers = {(idx, turn): text for idx, turn, text in JudgeAnswer.objects.filter(
        model_id=run.model_id, instructions_sha256=run.instructions_sha256).values_list("idx", "turn", "text")}  # fmt: skip
    by_idx: dict[int, list] = {}
    for g in JudgeGrade.objects.filter(run=run).order_by("idx", "turn"):
        by_idx.setdefault(g.idx, []).append(g)
    out = []
    for idx, grades in sorted(by_idx.items()):
        q = questions[idx] if idx < len(questions) else None
        turns = [{"turn": g.turn, "question": q.turns[g.turn - 1] if q and g.turn <= len(q.turns) else "",
                  "answer": answers.get((idx, g.turn), ""), "grade": g,
                  "reference": q.references[g.turn - 1] if q and g.reference == "given" and g.turn <= len(q.references) else ""}
                 for g in grades]  # fmt: skip
        out.append({"idx": idx, "question_id": grades[0].question_id, "category": grades[0].category, "turns": turns})
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


def grades_queryset(config: JudgeConfig, model_id: int | None = None, viewer=None):
    """Grades of the config's finished runs the viewer may see, for the API and the downloads."""
    runs = config.runs.filter(status=JudgeRun.Status.FINISHED).exclude(model_id__in=hidden_model_ids(viewer))
    if model_id is not None:
        runs = runs.filter(model_id=model_id)
    return JudgeGrade.objects.filter(run__in=runs).select_related("run", "run__model").order_by("run_id", "idx", "turn")


def grades_for_export(config: JudgeConfig, model_id: int | None = None, viewer=None):
    """Every stored grade of a single-answer config's finished runs, as flat records."""
    for g in grades_queryset(config, model_id, viewer).iterator(chunk_size=500):
        yield {
            "run_id": g.run_id, "config": config.name, "model": g.run.model.name, "question_id": g.question_id,
            "category": g.category, "turn": g.turn, "score": g.score, "status": "ok" if g.ok else "failed",
            "error": g.error, "reference": g.reference, "prompt_sha256": g.prompt_sha256,
            "protocol_sha256": g.protocol_sha256, "raw": g.raw, **grade_method_fields(g),
        }  # fmt: skip


def grade_method_fields(g: JudgeGrade) -> dict:
    """How a grade was read: ``logprob`` (the expected rating; its mass on the scale, normalised
    entropy and probabilities, space-separated in scale order) or ``parsed`` (the judge's text)."""
    record = g.logprob or {}
    if not record:
        return {"grade_method": "parsed", "scale_mass": None, "entropy": None, "probabilities": ""}
    pairs = zip(record.get("scale", []), record.get("probabilities", []))
    return {"grade_method": "logprob", "scale_mass": record.get("mass"), "entropy": record.get("entropy"),
            "probabilities": " ".join(f"{r}:{p:.6g}" for r, p in pairs)}


def panel_page(panel, viewer=None) -> dict:
    """What a panel's page shows: its members, the panel score of every model the viewer may see (best
    first), each judge's agreement with the rest of the panel, and the judge that disagrees most.

    Single-answer panels: the mean standardised grade, and each judge's Pearson correlation over
    (model, question) scores and Kendall tau over model means with the other judges. Pairwise panels:
    the pooled Bradley-Terry rating, and each judge's agreement with the other judges' majority."""
    report = panel.report or {}
    hidden = set(LanguageModel.objects.filter(pk__in=hidden_model_ids(viewer)).values_list("name", flat=True))
    scores = report.get("models") if report.get("kind") == JudgeConfig.Kind.SINGLE else report.get("ratings")
    rows = []
    for name, figures in (scores or {}).items():
        if name in hidden or not isinstance(figures, dict):
            continue
        rows.append({"model": name, "value": figures.get("mean", figures.get("rating")), "ci_low": figures.get("ci_low"),
                     "ci_high": figures.get("ci_high"), "n": figures.get("n")})  # fmt: skip
    rows.sort(key=lambda r: (r["value"] is None, -(r["value"] or 0.0)))
    judges = []
    for name, figures in (report.get("judges") or {}).items():
        figures = figures if isinstance(figures, dict) else {}
        measures = [("Pearson r with the other judges, over (model, question) grades", figures.get("pearson")),
                    ("Kendall tau with the other judges, over model means", figures.get("kendall_tau")),
                    ("share of judgments matching the other judges' majority", figures.get("agreement"))]  # fmt: skip
        judges.append({"name": name, "most_disagreeing": report.get("most_disagreeing") == name,
                       "measures": [(label, m) for label, m in measures if isinstance(m, dict)],
                       "failed": figures.get("failed", 0), "n": figures.get("n", figures.get("judgments"))})  # fmt: skip
    return {"panel": panel, "members": list(panel.members.order_by("id")), "report": report, "rows": rows,
            "judges": judges, "error": report.get("error"), "notes": report.get("notes") or []}  # fmt: skip
