"""What a judge is given and what it returns: pairs, judgments (one per order) and their aggregates.

Orders: ``"ab"`` shows ``answer_1`` first (as assistant A), ``"ba"`` shows ``answer_2`` first. A
judgment's ``first_score`` is the judge's preference for the *first shown* answer: ``p_first`` for a
log-prob verdict, 1 / 0.5 / 0 for a generated A / tie / B. :func:`combine_orders` turns the two
orders of one pair into preferences for ``answer_1``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

ORDERS = ("ab", "ba")
MAX_PAIRS_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True)
class PairItem:
    """One question with two answers to compare (``answer_1`` is LLMBar's ``output_1``)."""

    pair_id: int | str
    question: str
    answer_1: str
    answer_2: str
    reference: str | None = None
    label: int | None = None  # 1 or 2: which answer people (or the data set) prefer
    # A two-turn comparison (a two-turn protocol): every turn's question, answers and references, in
    # order (``question``, ``answer_1``, ``answer_2`` then hold the last turn's); empty for one turn.
    questions: tuple[str, ...] = ()
    answers_1: tuple[str, ...] = ()
    answers_2: tuple[str, ...] = ()
    references: tuple[str, ...] = ()


@dataclass(frozen=True)
class Judgment:
    """One judge call: a pair in one order.

    ``status`` is ``"ok"`` or ``"failed"`` (then ``error`` says why and no score is set: a failed
    judgment is never a tie). ``p_first`` is set for log-prob verdicts; ``verdict`` (the matched
    pattern), ``winner`` (``"A"``, ``"B"`` or ``"tie"``, by position) and ``raw`` (the judge's text)
    for generated ones; ``weight`` is the outcome's weight (Arena-Hard's strong verdicts count 3).
    """

    pair_id: int | str
    order: str
    prompt_sha256: str
    status: str
    p_first: float | None = None
    verdict: str | None = None
    winner: str | None = None
    weight: float = 1.0
    raw: str | None = None
    error: str | None = None
    cached: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def first_score(self) -> float | None:
        """Preference for the first shown answer in [0, 1] (None when failed)."""
        if not self.ok:
            return None
        if self.p_first is not None:
            return float(self.p_first)
        return {"A": 1.0, "B": 0.0, "tie": 0.5}[self.winner]

    def as_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, data: dict) -> Judgment:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class PairOutcome:
    """Both orders of one pair, as preferences for ``answer_1``.

    ``score_ab`` / ``score_ba``: P(answer_1 better) read from each order (``first_score`` and
    ``1 - first_score``); ``swap_average``: their mean; ``winner_*``: 1, 2 or 0 (tie) for each order,
    the swap average and both-must-agree (0 unless both orders pick the same answer).
    """

    pair_id: int | str
    score_ab: float
    score_ba: float
    swap_average: float
    winner_ab: int
    winner_ba: int
    winner_swap: int
    winner_agree: int
    first_ab: bool  # the "ab" judgment chose the first position
    first_ba: bool
    weight_ab: float = 1.0
    weight_ba: float = 1.0

    @property
    def consistent(self) -> bool:
        """The same answer wins in both orders (a tie in both counts as consistent)."""
        return self.winner_ab == self.winner_ba


def winner_of(score: float) -> int:
    """1 if ``score`` (P(answer_1 better)) > 0.5, 2 if < 0.5, 0 (tie) if exactly 0.5."""
    return 1 if score > 0.5 else 2 if score < 0.5 else 0


def combine_orders(ab: Judgment, ba: Judgment) -> PairOutcome | None:
    """Aggregate the two orders of one pair; None when either failed (a failure is not a tie).

    The swap average is ``0.5 + (s_ab - s_ba) / 2``, which equals the mean of ``s_ab`` and
    ``1 - s_ba`` and is exactly 0.5 whenever both orders gave the same first-position score (two
    identical answers give identical prompts, hence identical scores).
    """
    if ab.order != "ab" or ba.order != "ba" or ab.pair_id != ba.pair_id:
        raise ValueError(f"combine_orders needs the ab and ba judgments of one pair, got {ab.order}/{ba.order}")
    if not (ab.ok and ba.ok):
        return None
    s_ab, s_ba_first = ab.first_score, ba.first_score
    swap = 0.5 + (s_ab - s_ba_first) / 2.0
    w_ab, w_ba = winner_of(s_ab), winner_of(1.0 - s_ba_first)
    return PairOutcome(
        pair_id=ab.pair_id, score_ab=s_ab, score_ba=1.0 - s_ba_first, swap_average=swap,
        winner_ab=w_ab, winner_ba=w_ba, winner_swap=winner_of(swap),
        winner_agree=w_ab if w_ab == w_ba else 0,
        first_ab=s_ab > 0.5, first_ba=s_ba_first > 0.5, weight_ab=ab.weight, weight_ba=ba.weight,
    )  # fmt: skip


def pair_outcomes(judgments: list[Judgment]) -> tuple[list[PairOutcome], list[int | str]]:
    """Group judgments by pair; return (outcomes of complete pairs in first-seen order, failed pair ids)."""
    by_pair: dict = {}
    for judgment in judgments:
        if judgment.order not in ORDERS:
            raise ValueError(f"pair {judgment.pair_id}: order {judgment.order!r} is not ab or ba")
        slot = by_pair.setdefault(judgment.pair_id, {})
        if judgment.order in slot:
            raise ValueError(f"pair {judgment.pair_id}: two judgments in order {judgment.order}")
        slot[judgment.order] = judgment
    outcomes, failed = [], []
    for pair_id, slot in by_pair.items():
        if set(slot) != set(ORDERS):
            raise ValueError(f"pair {pair_id}: judged in order(s) {sorted(slot)} only; every pair needs ab and ba")
        outcome = combine_orders(slot["ab"], slot["ba"])
        if outcome is None:
            failed.append(pair_id)
        else:
            outcomes.append(outcome)
    return outcomes, failed


def read_pairs(path: str | Path, *, require_label: bool = True) -> list[PairItem]:
    """Read pairs in LLMBar's format: a JSON list or JSONL of ``{input, output_1, output_2, label}``
    (``label`` 1 or 2; an optional ``reference``). ``pair_id`` is the index in the file (0-based).

    Raises ValueError naming the pair (index, and line for JSONL) for malformed JSON, a missing or
    non-string field, an empty text, or a label other than 1 or 2.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"pairs file {str(path)!r} does not exist")
    if path.stat().st_size > MAX_PAIRS_BYTES:
        raise ValueError(f"pairs file {str(path)!r} is larger than {MAX_PAIRS_BYTES} bytes")
    try:
        text = path.read_text(encoding="utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise ValueError(f"pairs file {str(path)!r} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    records = _parse_records(text, str(path))
    if not records:
        raise ValueError(f"pairs file {str(path)!r} holds no pairs")
    return [_pair_from_record(i, rec, where, require_label) for i, (rec, where) in enumerate(records)]


def _parse_records(text: str, name: str) -> list[tuple[object, str]]:
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"pairs file {name!r} is not valid JSON: {exc}") from None
        except RecursionError:
            raise ValueError(f"pairs file {name!r} nests JSON too deeply") from None
        return [(rec, f"pair {i}") for i, rec in enumerate(data)]
    records = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"pair {len(records)} (line {lineno})"
        try:
            records.append((json.loads(line), where))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{name}: {where} is not valid JSON: {exc.msg}") from None
        except RecursionError:
            raise ValueError(f"{name}: {where} nests JSON too deeply") from None
    return records


def _pair_from_record(index: int, record, where: str, require_label: bool) -> PairItem:
    if not isinstance(record, dict):
        raise ValueError(f"{where}: expected an object with input, output_1, output_2, label")
    texts = {}
    for key in ("input", "output_1", "output_2"):
        if key not in record:
            raise ValueError(f"{where}: missing field {key!r}")
        if not isinstance(record[key], str):
            raise ValueError(f"{where}: field {key!r} must be a string")
        if not record[key].strip():
            raise ValueError(f"{where}: field {key!r} is empty")
        texts[key] = record[key]
    label = record.get("label")
    if label is None and require_label:
        raise ValueError(f"{where}: missing field 'label'")
    if label is not None and (isinstance(label, bool) or label not in (1, 2)):
        raise ValueError(f"{where}: label {label!r} is not 1 or 2")
    reference = record.get("reference")
    if reference is not None and not isinstance(reference, str):
        raise ValueError(f"{where}: field 'reference' must be a string")
    return PairItem(pair_id=index, question=texts["input"], answer_1=texts["output_1"],
                    answer_2=texts["output_2"], reference=reference, label=label)
