"""An ``evalcore reward --out`` folder read back: rows checked, figures recomputed and compared.

The site stores a reward run only after :func:`verify_report` has recomputed every figure of
``report.json`` from ``rewards.jsonl`` (each row's outcome from its two rewards); a report that does not
match its rows is refused with a ValueError naming the first difference. A figure's interval is compared
only where the report names the same method (``interval``) as the recomputed one: a report written before
the intervals became mid-p (``"wilson"``) imports, its intervals replaced by the recomputed ones.
"""

from __future__ import annotations

import hashlib
import math

from evalcore.reward.pairs import CATEGORY_NAME, PairsFile
from evalcore.reward.scoring import OUTCOMES, PairReward, outcome_of, reward_report

KINDS = ("classifier", "dpo")
FIGURE_KEYS = ("value", "ci_low", "ci_high", "n", *OUTCOMES, "skipped")
INTERVAL_KEYS = ("ci_low", "ci_high")


def _number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{where} must be a finite number, got {str(value)[:40]!r}")
    return float(value)


def record_from_row(row, index: int) -> PairReward:
    """One line of ``rewards.jsonl`` as a :class:`PairReward`; its outcome must follow from its rewards."""
    where = f"rewards.jsonl line {index + 1}"
    if not isinstance(row, dict):
        raise ValueError(f"{where} is not an object")
    pair_id, category, label, status = (row.get(k) for k in ("pair_id", "category", "label", "status"))
    if not isinstance(pair_id, str) or not isinstance(category, str) or not CATEGORY_NAME.fullmatch(category):
        raise ValueError(f"{where}: pair_id and category must be text (a category: letters, digits, _ . -)")
    if isinstance(label, bool) or label not in (1, 2):
        raise ValueError(f"{where}: label must be 1 or 2")
    subset = row.get("subset")
    if subset is not None and (not isinstance(subset, str) or not CATEGORY_NAME.fullmatch(subset)):
        raise ValueError(f"{where}: subset must be a name (letters, digits, _ . -; up to 64 characters)")
    if status == "skipped":
        return PairReward(pair_id[:200], category, label, "skipped", reason=str(row.get("reason", ""))[:200],
                          subset=subset)  # fmt: skip
    if status != "ok":
        raise ValueError(f"{where}: status must be ok or skipped")
    chosen = _number(row.get("reward_chosen"), f"{where}: reward_chosen")
    rejected = _number(row.get("reward_rejected"), f"{where}: reward_rejected")
    if row.get("outcome") != outcome_of(chosen, rejected):
        raise ValueError(
            f"{where}: outcome {str(row.get('outcome'))[:20]!r} does not follow from its rewards"
        )
    logprobs = row.get("logprobs")
    if logprobs is not None and not (
        isinstance(logprobs, dict) and all(isinstance(v, int | float) for v in logprobs.values())
    ):
        raise ValueError(f"{where}: logprobs must map names to numbers")
    return PairReward(pair_id[:200], category, label, "ok", chosen, rejected, row["outcome"], logprobs, subset=subset)


def files_from_report(report: dict) -> list[PairsFile]:
    files = report.get("pairs_files")
    if not isinstance(files, list) or not files:
        raise ValueError("report.json has no pairs_files")
    out = []
    for item in files:
        if not isinstance(item, dict) or not CATEGORY_NAME.fullmatch(str(item.get("category", ""))):
            raise ValueError("report.json: each of pairs_files needs a category name")
        sha = str(item.get("sha256", ""))
        pairs = item.get("pairs")
        if len(sha) != 64 or isinstance(pairs, bool) or not isinstance(pairs, int) or pairs < 1:
            raise ValueError(
                f"report.json: pairs file {item['category']!r} needs its sha256 and number of pairs"
            )
        out.append(PairsFile(item["category"], str(item.get("path", ""))[:300], sha, pairs))
    if len({f.category for f in out}) != len(out):
        raise ValueError("report.json: two pairs files share a category")
    return out


def pairs_key(files: list[PairsFile]) -> str:
    """SHA-256 over the categories and their files' hashes: results with the same key were scored on
    the same pairs and may be compared."""
    return hashlib.sha256("\n".join(f"{f.category}\t{f.sha256}" for f in files).encode()).hexdigest()


def verify_report(report, rows) -> dict:
    """The report recomputed from ``rows`` (the lines of rewards.jsonl), after checking that every figure
    of ``report`` (report.json) matches; ValueError naming the first that does not."""
    if not isinstance(report, dict) or not isinstance(rows, list) or not rows:
        raise ValueError("report.json must be an object and rewards.jsonl must hold pairs")
    if report.get("kind") not in KINDS:
        raise ValueError(f"report.json: kind must be one of {KINDS}")
    if not isinstance(report.get("model"), dict) or not isinstance(report.get("protocol"), dict):
        raise ValueError("report.json lacks the model or the protocol")
    files = files_from_report(report)
    records = [record_from_row(row, i) for i, row in enumerate(rows)]
    unknown = {r.category for r in records} - {f.category for f in files}
    if unknown:
        raise ValueError(f"rewards.jsonl names category {sorted(unknown)[0]!r}, which no pairs file makes")
    recomputed = reward_report(records, files)
    stated_subsets = report.get("subsets") or {}
    if not isinstance(stated_subsets, dict):
        raise ValueError("report.json: subsets must map categories to their subsets' figures")
    stated = [("overall", report.get("overall"), recomputed["overall"])]
    stated += [(k, (report.get("categories") or {}).get(k), v) for k, v in recomputed["categories"].items()]
    for category, figures in recomputed["subsets"].items():
        given = stated_subsets.get(category)
        stated += [(f"{category}/{k}", given.get(k) if isinstance(given, dict) else None, v) for k, v in figures.items()]
    for name, figure, expected in stated:
        if not isinstance(figure, dict):
            raise ValueError(f"report.json has no figure for {name!r}")
        for key in FIGURE_KEYS:
            if key in INTERVAL_KEYS and figure.get("interval") != expected["interval"]:
                continue  # made by another method (an older report): the stored figure is the recomputed one
            a, b = figure.get(key), expected[key]
            if (a is None) != (b is None) or (
                b is not None and not math.isclose(float(a), float(b), abs_tol=1e-9)
            ):
                raise ValueError(f"report.json's {name} {key} ({a}) does not match rewards.jsonl ({b})")
    if not set(stated_subsets) <= set(recomputed["subsets"]) or any(
        isinstance(v, dict) and not set(v) <= set(recomputed["subsets"][k]) for k, v in stated_subsets.items()
    ):
        raise ValueError("report.json names a subset that rewards.jsonl does not")
    return {**recomputed, "kind": report["kind"], "model": report["model"], "reference": report.get("reference"),
            "protocol": report["protocol"], "pairs_key": pairs_key(files),
            "records": [r.as_dict() for r in records]}  # fmt: skip
