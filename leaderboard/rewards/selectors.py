"""Reward-model reads for the page and the downloads: results grouped by the pairs they were scored on."""

from __future__ import annotations

from django.db.models import F

from leaderboard.models import RewardModelResult, RewardStatus

FIGURE_FIELDS = ("value", "ci_low", "ci_high", "interval", "n", "correct", "wrong", "tie", "skipped")


def _results():
    """Finished results only: a queued, running or failed scoring has no figures to show."""
    return RewardModelResult.objects.filter(status=RewardStatus.FINISHED).order_by(
        "pairs_key", F("accuracy").desc(nulls_last=True), "name"
    )


def _cell(figure: dict) -> dict:
    return {k: figure.get(k) for k in FIGURE_FIELDS}


def reward_boards() -> list[dict]:
    """One board per set of pairs files: ``{pairs_key, files, subsets, rows}``, rows by overall accuracy,
    each ``{name, kind, weights, beta, overall, categories, subsets}`` with ``categories`` in the files'
    order and ``subsets`` in the board's ``subsets`` order ((category, subset) pairs, by name within
    each file's category; empty when no file names subsets)."""
    boards: dict[str, dict] = {}
    for result in _results():
        report = result.report
        files = report.get("pairs_files", [])
        by_subset = report.get("subsets") or {}
        board = boards.setdefault(result.pairs_key, {
            "pairs_key": result.pairs_key, "files": files, "rows": [],
            "subsets": [(f["category"], s) for f in files for s in sorted(by_subset.get(f["category"], {}))],
        })  # fmt: skip
        board["rows"].append({
            "pk": result.pk, "name": result.name, "kind": result.get_kind_display(), "weights": result.weights_sha256[:12],
            "beta": (report.get("protocol") or {}).get("beta"), "overall": _cell(report["overall"]),
            "categories": [_cell(report["categories"][f["category"]]) for f in files],
            "subsets": [_cell(by_subset.get(c, {}).get(s) or {}) for c, s in board["subsets"]],
        })  # fmt: skip
    return list(boards.values())


def reward_rows() -> list[dict]:
    """Every figure of every result, one row per (model, category), ``overall`` first, each category followed
    by one row per subset (``subset`` set; empty on the other rows): the downloads."""
    rows = []
    for result in _results():
        report = result.report
        reference = report.get("reference") or {}
        common = {"model": result.name, "kind": result.kind, "pairs_key": result.pairs_key,
                  "weights_sha256": result.weights_sha256, "reference_weights_sha256": reference.get("weights_sha256", ""),
                  "beta": (report.get("protocol") or {}).get("beta"), "imported_at": result.imported_at.isoformat()}  # fmt: skip
        subsets = report.get("subsets") or {}
        figures = [("overall", "", report["overall"])]
        for category, figure in report["categories"].items():
            figures.append((category, "", figure))
            figures += [(category, name, subsets[category][name]) for name in sorted(subsets.get(category, {}))]
        for category, subset, figure in figures:
            rows.append({**common, "category": category, "subset": subset,
                         **{("accuracy" if k == "value" else k): figure.get(k) for k in FIGURE_FIELDS}})  # fmt: skip
    return rows


def reward_result_get(result_id: int) -> RewardModelResult | None:
    return RewardModelResult.objects.filter(pk=result_id, status=RewardStatus.FINISHED).first()
