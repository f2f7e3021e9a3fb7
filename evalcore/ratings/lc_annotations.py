"""Judge annotations against a baseline, for the length-controlled win rate: the container, its readers.

:class:`LCAnnotations` holds AlpacaEval-style annotations column-wise; :func:`read_lc_annotations` and
:func:`annotations_from_arrays` validate them (a refusal names the row and column where it can), and
:func:`read_difficulty` reads a per-instruction difficulty file. The fit is in :mod:`evalcore.ratings.lc`.
"""

from __future__ import annotations

import csv
import dataclasses
from dataclasses import dataclass

import numpy as np

LC_COLUMNS = ("model", "instruction_id", "len_output_1", "len_output_2", "preference")


@dataclass(frozen=True)
class LCAnnotations:
    """Judge annotations against one baseline, column-wise (N rows).

    Attributes
    ----------
    models : tuple of str, shape (p,)
    instructions : tuple of str, shape (q,)
    model : ndarray of int, shape (N,)
    instruction : ndarray of int, shape (N,)
    len_baseline, len_model : ndarray, shape (N,)
        Answer lengths (``len_output_1`` is the baseline's, ``len_output_2`` the model's).
    preference : ndarray, shape (N,)
        In [1, 2]; 0 (a draw) is stored as 1.5.
    declared_baselines : tuple of str
        Distinct ``generator_1`` values when the file has that column (used to catch a mistyped baseline).
    """

    models: tuple[str, ...]
    instructions: tuple[str, ...]
    model: np.ndarray
    instruction: np.ndarray
    len_baseline: np.ndarray
    len_model: np.ndarray
    preference: np.ndarray
    declared_baselines: tuple[str, ...] = ()


def _shown(value) -> str:
    """A value as a message shows it: numpy scalars as plain numbers (7.0, not np.float64(7.0))."""
    if isinstance(value, np.generic):
        value = value.item()
    return repr(value)


def _intern(values: list[str], column: str) -> tuple[tuple[str, ...], np.ndarray]:
    for row, v in enumerate(values, start=1):
        if not v:
            raise ValueError(f"row {row}, column {column!r}: missing value")
    names, inv = np.unique(np.asarray(values, dtype=object).astype(str), return_inverse=True)
    return tuple(str(n) for n in names), inv.astype(np.int64)


def _csv_rows(source) -> list[list[str]]:
    """Every row of a UTF-8 CSV file; a ValueError naming the file when it is not one."""
    try:
        with open(source, newline="", encoding="utf-8") as fh:
            return list(csv.reader(fh))
    except UnicodeDecodeError as exc:
        raise ValueError(f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except csv.Error as exc:
        raise ValueError(f"{source}: not valid CSV ({exc})") from None


def read_lc_annotations(source) -> LCAnnotations:
    """Read a CSV with columns ``model, instruction_id, len_output_1, len_output_2, preference``."""
    all_rows = _csv_rows(source)
    header = [h.strip() for h in (all_rows[0] if all_rows else [])]
    if not header:
        raise ValueError(f"{source}: no annotations: the file is empty")
    pos = {h: k for k, h in enumerate(header)}
    for col in LC_COLUMNS:
        if col not in pos:
            raise ValueError(f"{source}: row 0 (header), column {col!r}: missing column")
    rows = [r for r in all_rows[1:] if r]
    if not rows:
        raise ValueError(f"{source}: no annotations: the file has a header but no rows")
    for k, r in enumerate(rows, start=1):
        if len(r) != len(header):
            raise ValueError(f"row {k}: has {len(r)} fields, the header has {len(header)}")
    cols = {c: [r[pos[c]] for r in rows] for c in LC_COLUMNS}
    nums = {}
    for c in ("len_output_1", "len_output_2", "preference"):
        try:
            nums[c] = np.asarray(cols[c], dtype=np.float64)
        except ValueError:
            for k, v in enumerate(cols[c], start=1):
                try:
                    float(v)
                except ValueError:
                    raise ValueError(f"row {k}, column {c!r}: not a number: {v!r}") from None
    ann = annotations_from_arrays(
        cols["model"], cols["instruction_id"], nums["len_output_1"], nums["len_output_2"], nums["preference"]
    )
    if "generator_1" in pos:
        declared = tuple(sorted({r[pos["generator_1"]] for r in rows}))
        ann = dataclasses.replace(ann, declared_baselines=declared)
    return ann


def annotations_from_arrays(model, instruction_id, len_output_1, len_output_2, preference) -> LCAnnotations:
    """Validate parallel columns (shape (N,)) into :class:`LCAnnotations`."""
    pref = np.asarray(preference, dtype=np.float64).copy()
    len1 = np.asarray(len_output_1, dtype=np.float64)
    len2 = np.asarray(len_output_2, dtype=np.float64)
    n = pref.shape[0]
    if n == 0:
        raise ValueError("no annotations")
    for name, col in (
        ("model", model),
        ("instruction_id", instruction_id),
        ("len_output_1", len1),
        ("len_output_2", len2),
    ):
        if len(col) != n:
            raise ValueError(f"column {name!r} has {len(col)} rows, preference has {n}")
    pref[pref == 0] = 1.5
    bad = np.flatnonzero(~np.isfinite(pref) | (pref < 1) | (pref > 2))
    if bad.size:
        raise ValueError(
            f"row {bad[0] + 1}, column 'preference': {_shown(preference[bad[0]])} is not in [1, 2] (or 0)"
        )
    for name, col in (("len_output_1", len1), ("len_output_2", len2)):
        bad = np.flatnonzero(~np.isfinite(col) | (col < 0))
        if bad.size:
            raise ValueError(f"row {bad[0] + 1}, column {name!r}: lengths must be non-negative numbers")
    models, m_idx = _intern([str(v) for v in model], "model")
    instructions, i_idx = _intern([str(v) for v in instruction_id], "instruction_id")
    return LCAnnotations(models, instructions, m_idx, i_idx, len1, len2, pref)


def read_difficulty(source) -> dict[str, float]:
    """Read a per-instruction difficulty CSV: first column the instruction id, second the value."""
    rows = [r for r in _csv_rows(source) if r]
    if len(rows) < 2:
        raise ValueError(f"{source}: no difficulty rows")
    out = {}
    for k, r in enumerate(rows[1:], start=1):
        if len(r) < 2:
            raise ValueError(f"row {k}: expected instruction id and difficulty")
        try:
            out[r[0]] = float(r[1])
        except ValueError:
            column = rows[0][1] if len(rows[0]) > 1 else "difficulty"  # a one-column header names no second
            raise ValueError(f"row {k}, column {column!r}: not a number: {r[1]!r}") from None
    return out
