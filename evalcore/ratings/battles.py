"""Battles held column-wise: model indices, outcome codes, optional timestamps and style features.

A :class:`Battles` never holds one Python object per battle: every column is a numpy array, and model
names live once in ``models``. Readers (:mod:`evalcore.ratings.io`) and the in-memory builders here
validate every row and raise ``ValueError`` naming the row and the column.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

# Outcome codes, from the point of view of model_a.
A_WINS, B_WINS, TIE, BOTHBAD = 0, 1, 2, 3
OUTCOME_NAMES = ("model_a", "model_b", "tie", "tie (bothbad)")

# Accepted winner spellings: the FastChat battle format and the evalica format (left/right).
WINNER_CODES: dict[str, int] = {
    "model_a": A_WINS,
    "model_b": B_WINS,
    "tie": TIE,
    "tie (bothbad)": BOTHBAD,
    "left": A_WINS,
    "right": B_WINS,
}

# Style features, in column order of ``Battles.style_a`` / ``style_b``.
STYLE_FEATURES = ("tokens", "headers", "list_items", "bold")


@dataclass(frozen=True)
class Battles:
    """Pairwise battles, one entry per vote.

    Attributes
    ----------
    models : tuple of str, shape (m,)
        Model names; the indices below point into it. Sorted alphabetically by the builders.
    model_a, model_b : ndarray of int32, shape (n,)
        The two sides of each battle (never equal).
    outcome : ndarray of int8, shape (n,)
        ``0`` model_a won, ``1`` model_b won, ``2`` tie, ``3`` tie (both bad).
    tstamp : ndarray of float64, shape (n,), or None
        Vote time (seconds); online Elo replays battles in this order when present.
    style_a, style_b : ndarray of float64, shape (n, 4), or None
        Per-answer style counts in :data:`STYLE_FEATURES` order (tokens, headers, list items, bold).
    """

    models: tuple[str, ...]
    model_a: np.ndarray
    model_b: np.ndarray
    outcome: np.ndarray
    tstamp: np.ndarray | None = None
    style_a: np.ndarray | None = None
    style_b: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.outcome.shape[0])

    @property
    def n_models(self) -> int:
        return len(self.models)

    def select(self, mask: np.ndarray) -> Battles:
        """Return the battles where ``mask`` (bool, shape (n,)) is true, keeping the model list."""

        def pick(col):
            return None if col is None else col[mask]

        return Battles(
            models=self.models,
            model_a=self.model_a[mask],
            model_b=self.model_b[mask],
            outcome=self.outcome[mask],
            tstamp=pick(self.tstamp),
            style_a=pick(self.style_a),
            style_b=pick(self.style_b),
        )


def encode_winners(values: Sequence[str], *, first_row: int = 1, column: str = "winner") -> np.ndarray:
    """Map winner strings to outcome codes; raise ValueError naming the first bad row.

    Parameters
    ----------
    values : sequence of str, shape (n,)
    first_row : int
        Row number of ``values[0]`` in the user's file (1-based data rows), for messages.
    column : str
        Column name used in messages.

    Returns
    -------
    ndarray of int8, shape (n,)
    """
    out = np.empty(len(values), dtype=np.int8)
    codes = WINNER_CODES
    for pos, value in enumerate(values):
        code = codes.get(value)
        if code is None:
            code = codes.get(str(value).strip().lower()) if value is not None else None
            if code is None:
                raise ValueError(
                    f"row {first_row + pos}, column {column!r}: unknown winner {value!r} "
                    f"(expected one of: model_a, model_b, tie, tie (bothbad), left, right)"
                )
        out[pos] = code
    return out


def check_no_self_play(
    model_a: np.ndarray, model_b: np.ndarray, models: Sequence[str], *, first_row: int = 1
):
    """Raise ValueError naming the first row where a model plays itself."""
    same = np.flatnonzero(model_a == model_b)
    if same.size:
        pos = int(same[0])
        raise ValueError(
            f"row {first_row + pos}, columns 'model_a'/'model_b': model {models[model_a[pos]]!r} "
            "plays itself (a battle needs two different models)"
        )


def battles_from_arrays(
    model_a: Sequence[str],
    model_b: Sequence[str],
    winner: Sequence[str],
    *,
    tstamp: Sequence[float] | None = None,
    style_a: np.ndarray | None = None,
    style_b: np.ndarray | None = None,
) -> Battles:
    """Build :class:`Battles` from parallel columns of names and winner strings.

    Parameters
    ----------
    model_a, model_b, winner : sequence of str, shape (n,)
    tstamp : sequence of float, shape (n,), optional
    style_a, style_b : array_like, shape (n, 4), optional
        Style counts in :data:`STYLE_FEATURES` order.
    """
    n = len(winner)
    if len(model_a) != n or len(model_b) != n:
        raise ValueError(
            f"columns differ in length: model_a {len(model_a)}, model_b {len(model_b)}, winner {n}"
        )
    if n == 0:
        raise ValueError("no battles: the input is empty")
    for column, values in (("model_a", model_a), ("model_b", model_b)):
        for pos, value in enumerate(values):
            if not isinstance(value, str) or not value:
                raise ValueError(f"row {pos + 1}, column {column!r}: expected a model name, got {value!r}")
    names_a = np.asarray(model_a, dtype=object)
    names_b = np.asarray(model_b, dtype=object)
    models, inverse = np.unique(np.concatenate([names_a, names_b]).astype(str), return_inverse=True)
    idx_a = inverse[:n].astype(np.int32)
    idx_b = inverse[n:].astype(np.int32)
    models_t = tuple(str(m) for m in models)
    check_no_self_play(idx_a, idx_b, models_t)
    outcome = encode_winners(winner)
    ts = None
    if tstamp is not None:
        ts = np.asarray(tstamp, dtype=np.float64)
        if ts.shape != (n,):
            raise ValueError(f"tstamp has shape {ts.shape}, expected ({n},)")
    sa = sb = None
    if style_a is not None or style_b is not None:
        if style_a is None or style_b is None:
            raise ValueError("style_a and style_b must be given together")
        sa = np.asarray(style_a, dtype=np.float64)
        sb = np.asarray(style_b, dtype=np.float64)
        if sa.shape != (n, len(STYLE_FEATURES)) or sb.shape != sa.shape:
            raise ValueError(f"style arrays must have shape ({n}, {len(STYLE_FEATURES)})")
    return Battles(models_t, idx_a, idx_b, outcome, ts, sa, sb)


def _style_from_record(record: Mapping, side: str, row: int) -> list[float] | None:
    """Style counts of one side from a record: flat ``tokens_a`` columns or FastChat ``conv_metadata``."""
    flat = [record.get(f"{name}_{side}") for name in STYLE_FEATURES]
    if all(v is not None and v != "" for v in flat):
        try:
            return [float(v) for v in flat]
        except (TypeError, ValueError) as exc:
            raise ValueError(f"row {row}, columns '*_{side}': style counts must be numbers ({exc})") from None
    meta = record.get("conv_metadata")
    if isinstance(meta, Mapping) and f"sum_assistant_{side}_tokens" in meta:
        try:
            return [
                float(meta[f"sum_assistant_{side}_tokens"]),
                float(sum(meta.get(f"header_count_{side}", {}).values())),
                float(sum(meta.get(f"list_count_{side}", {}).values())),
                float(sum(meta.get(f"bold_count_{side}", {}).values())),
            ]
        except (TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"row {row}, column 'conv_metadata': malformed style counts ({exc})") from None
    return None


class _RecordColumns:
    """Accumulates records chunk by chunk into numpy columns, interning model names once."""

    chunk = 100_000

    def __init__(self) -> None:
        self.table: dict[str, int] = {}
        self.parts: dict[str, list[np.ndarray]] = {
            "a": [],
            "b": [],
            "winner": [],
            "ts": [],
            "sa": [],
            "sb": [],
        }
        self.pending: dict[str, list] = {key: [] for key in self.parts}
        self.first_row = 1
        self.has_ts = self.has_style = True

    def _codes(self, names: list[str]) -> np.ndarray:
        for name in set(names).difference(self.table):
            self.table[name] = len(self.table)
        return np.fromiter(map(self.table.__getitem__, names), dtype=np.int32, count=len(names))

    def flush(self) -> None:
        pend = self.pending
        if not pend["winner"]:
            return
        self.parts["a"].append(self._codes(pend["a"]))
        self.parts["b"].append(self._codes(pend["b"]))
        self.parts["winner"].append(encode_winners(pend["winner"], first_row=self.first_row))
        if self.has_ts:
            self.parts["ts"].append(np.asarray(pend["ts"], dtype=np.float64))
        if self.has_style:
            self.parts["sa"].append(np.asarray(pend["sa"], dtype=np.float64).reshape(-1, len(STYLE_FEATURES)))
            self.parts["sb"].append(np.asarray(pend["sb"], dtype=np.float64).reshape(-1, len(STYLE_FEATURES)))
        self.first_row += len(pend["winner"])
        self.pending = {key: [] for key in self.parts}

    def finish(self) -> Battles:
        self.flush()
        if not self.parts["winner"]:
            raise ValueError("no battles: the input is empty")
        names = sorted(self.table, key=self.table.__getitem__)
        order = np.argsort(np.asarray(names, dtype=object), kind="stable")
        remap = np.empty(len(names), dtype=np.int32)
        remap[order] = np.arange(len(names), dtype=np.int32)
        models = tuple(names[k] for k in order)
        model_a = remap[np.concatenate(self.parts["a"])]
        model_b = remap[np.concatenate(self.parts["b"])]
        check_no_self_play(model_a, model_b, models)
        return Battles(
            models,
            model_a,
            model_b,
            np.concatenate(self.parts["winner"]),
            np.concatenate(self.parts["ts"]) if self.has_ts else None,
            np.concatenate(self.parts["sa"]) if self.has_style else None,
            np.concatenate(self.parts["sb"]) if self.has_style else None,
        )


def battles_from_records(records: Iterable[Mapping]) -> Battles:
    """Build :class:`Battles` from dicts in the FastChat (``model_a, model_b, winner``) or evalica
    (``left, right, winner``) layout.

    Optional keys: ``tstamp``; style counts either flat (``tokens_a, tokens_b, headers_a, ...``) or
    FastChat's ``conv_metadata`` (``sum_assistant_a_tokens``, ``header_count_a``, ...). Timestamps and
    style arrays are kept only when every record has them. Records are consumed as a stream and turned
    into numpy columns every 100,000 rows, so a JSON Lines file of millions of votes never holds one
    Python object per vote.

    Parameters
    ----------
    records : iterable of mapping, length n
    """
    cols = _RecordColumns()
    for row, record in enumerate(records, start=1):
        if not isinstance(record, Mapping):
            raise ValueError(
                f"row {row}: expected an object with model_a, model_b, winner; got {type(record).__name__}"
            )
        a_key, b_key = (
            ("model_a", "model_b") if "model_a" in record or "left" not in record else ("left", "right")
        )
        for key in (a_key, b_key, "winner"):
            if key not in record or record[key] is None or record[key] == "":
                raise ValueError(f"row {row}, column {key!r}: missing value")
        pend = cols.pending
        pend["a"].append(str(record[a_key]))
        pend["b"].append(str(record[b_key]))
        pend["winner"].append(str(record["winner"]))
        if cols.has_ts:
            ts = record.get("tstamp")
            if ts is None or ts == "":
                cols.has_ts = False
                cols.parts["ts"] = []
            else:
                try:
                    pend["ts"].append(float(ts))
                except (TypeError, ValueError):
                    raise ValueError(f"row {row}, column 'tstamp': not a number: {ts!r}") from None
        if cols.has_style:
            sa = _style_from_record(record, "a", row)
            sb = _style_from_record(record, "b", row)
            if sa is None or sb is None:
                cols.has_style = False
                cols.parts["sa"], cols.parts["sb"] = [], []
            else:
                pend["sa"].append(sa)
                pend["sb"].append(sb)
        if len(pend["winner"]) >= cols.chunk:
            cols.flush()
    return cols.finish()
