"""Vote file readers and pair-count files.

Battle files come as CSV, JSON (a list of records) or JSON Lines, in the FastChat battle layout
(``model_a, model_b, winner`` with winner in ``model_a, model_b, tie, tie (bothbad)``; optional
``tstamp`` and style columns ``tokens_a, tokens_b, headers_a, ...``) or the evalica layout
(``left, right, winner`` with winner in ``left, right, tie``). CSV streams in chunks: columns become
numpy arrays chunk by chunk and model names are interned once, so millions of rows never hold one
Python object per row. Every bad row raises ValueError naming the row (1-based data row) and column.

Pair-count files are CSV with ``model_i, model_j, wins_i, wins_j, ties, bothbad``.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import numpy as np

from evalcore.boundary import csvsafe
from evalcore.ratings.battles import STYLE_FEATURES, WINNER_CODES, Battles, battles_from_records
from evalcore.ratings.counts import PairCounts, pair_counts_from_arrays

PAIR_COUNT_COLUMNS = ("model_i", "model_j", "wins_i", "wins_j", "ties", "bothbad")
_CHUNK = 200_000
_BLOCK_CHARS = 16 << 20  # characters per block of the CSV fast path


def _open_text(source) -> tuple[IO[str], bool, str]:
    """Return (file, should_close, name) for a path or an open text/binary file."""
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        return path.open("r", encoding="utf-8", newline=""), True, str(path)
    if isinstance(source, io.BufferedIOBase | io.RawIOBase):
        return (
            io.TextIOWrapper(source, encoding="utf-8", newline=""),
            False,
            getattr(source, "name", "<stream>"),
        )
    return source, False, getattr(source, "name", "<stream>")


def _detect_format(name: str, head: str) -> str:
    suffix = Path(name).suffix.lower()
    if suffix in (".csv", ".json", ".jsonl", ".ndjson"):
        return {"ndjson": "jsonl"}.get(suffix[1:], suffix[1:])
    stripped = head.lstrip()
    if stripped.startswith("["):
        return "json"
    if stripped.startswith("{"):
        return "jsonl"
    return "csv"


def _read_parquet(source) -> Battles:
    """Battles from a Parquet file (a Podium data release's ``data/votes.parquet``, or any with the same
    columns): read with pyarrow, then as records."""
    try:
        import pyarrow.parquet as pq  # noqa: PLC0415 - only Parquet input needs it
    except ImportError:
        raise ValueError("reading Parquet needs pyarrow: pip install pyarrow") from None
    name = str(getattr(source, "name", source))
    try:
        table = pq.read_table(source)
    except Exception as exc:  # noqa: BLE001 - pyarrow's errors are many types: one clear message
        raise ValueError(f"{name}: not a readable Parquet file ({str(exc)[:200]})") from None
    if table.num_rows == 0:
        raise ValueError(f"{name}: no battles: the file is empty")
    return battles_from_records(table.to_pylist())


def read_battles(source, *, format: str | None = None) -> Battles:
    """Read battles from a CSV, JSON, JSON Lines or Parquet file.

    Parameters
    ----------
    source : str, PathLike or file object
    format : {"csv", "json", "jsonl", "parquet"}, optional
        Default: from the file suffix, else sniffed from the first character.

    Returns
    -------
    Battles
    """
    if format == "parquet" or (format is None and Path(str(getattr(source, "name", source))).suffix.lower() == ".parquet"):
        return _read_parquet(source)
    fh, close, name = _open_text(source)
    try:
        if format is None:
            if close:
                head = fh.read(64)
                fh.seek(0)
            else:
                head = ""
            format = _detect_format(name, head)
        if format == "csv":
            return _read_csv(fh, name)
        if format == "json":
            try:
                data = json.load(fh)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{name}: not valid JSON ({exc})") from None
            if isinstance(data, dict):  # a column-oriented frame dump {"model_a": {...}, ...}
                raise ValueError(f"{name}: expected a JSON list of battle records, got an object")
            if not isinstance(data, list):
                raise ValueError(f"{name}: expected a JSON list of battle records")
            if not data:
                raise ValueError(f"{name}: no battles: the file is empty")
            return battles_from_records(data)
        if format == "jsonl":
            return battles_from_records(_iter_jsonl(fh, name))
        raise ValueError(f"unknown format {format!r}; expected csv, json or jsonl")
    except UnicodeDecodeError as exc:
        raise _not_utf8(name, exc) from None
    except csv.Error as exc:
        raise ValueError(f"{name}: not valid CSV ({exc})") from None
    finally:
        if close:
            fh.close()


def _not_utf8(name: str, exc: UnicodeDecodeError) -> ValueError:
    return ValueError(f"{name}: not UTF-8 text ({exc.reason}, byte {exc.object[exc.start:exc.start + 1]!r})")


def _iter_jsonl(fh: IO[str], name: str) -> Iterator[dict]:
    for line_no, line in enumerate(fh, start=1):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{name}: line {line_no}: not valid JSON ({exc.msg})") from None


def _codes(values: tuple[str, ...], table: dict[str, int], column: str, first_row: int) -> np.ndarray:
    """Intern names into ``table`` and return their int32 codes; empty names are errors."""
    for name in set(values).difference(table):
        if not name.strip():
            pos = values.index(name)
            raise ValueError(f"row {first_row + pos}, column {column!r}: missing model name")
        table[name] = len(table)
    return np.fromiter(map(table.__getitem__, values), dtype=np.int32, count=len(values))


def _winner_codes(values: tuple[str, ...], first_row: int) -> np.ndarray:
    unknown = set(values).difference(WINNER_CODES)
    if unknown:
        pos = min(values.index(u) for u in unknown)
        raise ValueError(
            f"row {first_row + pos}, column 'winner': unknown winner {values[pos]!r} "
            "(expected one of: model_a, model_b, tie, tie (bothbad), left, right)"
        )
    return np.fromiter(map(WINNER_CODES.__getitem__, values), dtype=np.int8, count=len(values))


def _floats(values, column: str, first_row: int) -> np.ndarray:
    try:
        out = np.fromiter(map(float, values), dtype=np.float64, count=len(values))
    except ValueError:
        out = None
    bad = [] if out is not None else [pos for pos, v in enumerate(values) if not _is_float(v)]
    if out is not None:
        bad = np.flatnonzero(~np.isfinite(out)).tolist()
    if bad:
        pos = bad[0]
        raise ValueError(f"row {first_row + pos}, column {column!r}: not a finite number: {values[pos]!r}")
    return out


def _is_float(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def _column_blocks(fh: IO[str], width: int, first_row: int) -> Iterator[tuple[int, list]]:
    """Yield ``(first_row, columns)`` per block of complete lines; ``columns`` holds ``width`` lists.

    Fast path: a block with no quotes, carriage returns or blank lines is split in C (newlines become
    commas, one ``str.split``, then strided slices); anything else goes through the csv module.
    """
    carry = ""
    while True:
        block = fh.read(_BLOCK_CHARS)
        text = carry + block
        if not block:
            if text.strip():
                text += "\n"
            else:
                return
        cut = text.rfind("\n") + 1
        if cut == 0:
            carry = text
            continue
        part, carry = text[:cut], text[cut:]
        if "\r\n" in part and '"' not in part:
            part = part.replace("\r\n", "\n")
        n_lines = part.count("\n")
        flat = None
        if '"' not in part and "\r" not in part and "\n\n" not in part and not part.startswith("\n"):
            flat = part.replace("\n", ",").split(",")
            if len(flat) != n_lines * width + 1:
                flat = None  # a row with the wrong field count: let the csv path name it
        if flat is not None:
            del part
            columns = [flat[k : n_lines * width : width] for k in range(width)]
            del flat
            yield first_row, columns
            first_row += n_lines
        else:
            rows = [r for r in csv.reader(io.StringIO(part)) if r]
            for k, r in enumerate(rows):
                if len(r) != width:
                    raise ValueError(f"row {first_row + k}: has {len(r)} fields, the header has {width}")
            if rows:
                yield first_row, [list(c) for c in zip(*rows)]
                first_row += len(rows)
        if not block:
            return


def _read_csv(fh: IO[str], name: str) -> Battles:
    header_line = fh.readline()
    header = next(csv.reader([header_line]), None) if header_line.strip() else None
    if header is None or not any(h.strip() for h in header):
        raise ValueError(f"{name}: no battles: the file is empty")
    header = [h.strip() for h in header]
    pos = {h: k for k, h in enumerate(header)}
    if "model_a" in pos or "left" not in pos:
        a_col, b_col = "model_a", "model_b"
    else:
        a_col, b_col = "left", "right"
    for col in (a_col, b_col, "winner"):
        if col not in pos:
            raise ValueError(
                f"{name}: row 0 (header), column {col!r}: missing column (header has: {', '.join(header)})"
            )
    style_cols = [f"{f}_{side}" for side in ("a", "b") for f in STYLE_FEATURES]
    has_style = all(c in pos for c in style_cols)
    has_ts = "tstamp" in pos
    wanted = [a_col, b_col, "winner"] + (["tstamp"] if has_ts else []) + (style_cols if has_style else [])
    table: dict[str, int] = {}
    parts: dict[str, list[np.ndarray]] = {c: [] for c in wanted}
    n_rows = 0
    for first_row, columns in _column_blocks(fh, len(header), 1):
        for col in wanted:
            values = columns[pos[col]]
            if col in (a_col, b_col):
                arr = _codes(values, table, col, first_row)
            elif col == "winner":
                arr = _winner_codes(values, first_row)
            else:
                arr = _floats(values, col, first_row)
            parts[col].append(arr)
        n_rows += len(columns[0])
        del columns
    if n_rows == 0:
        raise ValueError(f"{name}: no battles: the file has a header but no rows")
    # Sort models by name so results do not depend on file order.
    names = sorted(table, key=table.__getitem__)
    order = np.argsort(np.asarray(names, dtype=object), kind="stable")
    remap = np.empty(len(names), dtype=np.int32)
    remap[order] = np.arange(len(names), dtype=np.int32)
    model_a = remap[np.concatenate(parts[a_col])]
    model_b = remap[np.concatenate(parts[b_col])]
    same = np.flatnonzero(model_a == model_b)
    models = tuple(names[k] for k in order)
    if same.size:
        raise ValueError(
            f"row {same[0] + 1}, columns {a_col!r}/{b_col!r}: model {models[model_a[same[0]]]!r} plays itself "
            "(a battle needs two different models)"
        )
    tstamp = np.concatenate(parts["tstamp"]) if has_ts else None
    style_a = style_b = None
    if has_style:
        style_a = np.stack([np.concatenate(parts[f"{f}_a"]) for f in STYLE_FEATURES], axis=1)
        style_b = np.stack([np.concatenate(parts[f"{f}_b"]) for f in STYLE_FEATURES], axis=1)
    return Battles(models, model_a, model_b, np.concatenate(parts["winner"]), tstamp, style_a, style_b)


def write_battles_csv(battles: Battles, target) -> None:
    """Write battles as a FastChat-layout CSV (``model_a, model_b, winner[, tstamp]``)."""
    fh, close, _ = _open_text_write(target)
    try:
        w = csv.writer(fh, lineterminator="\n")
        has_ts = battles.tstamp is not None
        w.writerow(["model_a", "model_b", "winner"] + (["tstamp"] if has_ts else []))
        # Names are the only text: escaped once here (evalcore.boundary.csvsafe), rows then go out at C speed.
        names = np.asarray([csvsafe.safe_cell(name) for name in battles.models], dtype=object)
        outcomes = np.asarray(["model_a", "model_b", "tie", "tie (bothbad)"], dtype=object)
        for start in range(0, len(battles), _CHUNK):
            sl = slice(start, start + _CHUNK)
            cols = [names[battles.model_a[sl]], names[battles.model_b[sl]], outcomes[battles.outcome[sl]]]
            if has_ts:
                cols.append(battles.tstamp[sl])
            w.writerows(zip(*cols))
    finally:
        if close:
            fh.close()


def _open_text_write(target):
    if isinstance(target, str | os.PathLike):
        return Path(target).open("w", encoding="utf-8", newline=""), True, str(target)
    return target, False, getattr(target, "name", "<stream>")


def is_pair_counts_file(source) -> bool:
    """True when ``source`` (a path) is a CSV whose header is the pair-count layout."""
    path = Path(source)
    if path.suffix.lower() not in ("", ".csv"):
        return False
    with path.open("r", encoding="utf-8", newline="") as fh:
        try:
            header = next(csv.reader(fh), [])
        except UnicodeDecodeError as exc:
            raise _not_utf8(str(path), exc) from None
        except csv.Error as exc:
            raise ValueError(f"{path}: not valid CSV ({exc})") from None
    return {"model_i", "model_j", "wins_i", "wins_j"}.issubset(h.strip() for h in header)


def read_pair_counts(source) -> PairCounts:
    """Read a pair-count CSV (``model_i, model_j, wins_i, wins_j[, ties, bothbad]``).

    Returns
    -------
    PairCounts
        Rows for the same pair (in either order) are summed.
    """
    fh, close, name = _open_text(source)
    try:
        reader = csv.reader(fh)
        header = [h.strip() for h in next(reader, [])]
        if not header:
            raise ValueError(f"{name}: no pair counts: the file is empty")
        pos = {h: k for k, h in enumerate(header)}
        for col in PAIR_COUNT_COLUMNS[:4]:
            if col not in pos:
                raise ValueError(f"{name}: row 0 (header), column {col!r}: missing column")
        rows = [r for r in reader if r]
    except UnicodeDecodeError as exc:
        raise _not_utf8(name, exc) from None
    except csv.Error as exc:
        raise ValueError(f"{name}: not valid CSV ({exc})") from None
    finally:
        if close:
            fh.close()
    if not rows:
        raise ValueError(f"{name}: no pair counts: the file has a header but no rows")
    for k, r in enumerate(rows):
        if len(r) != len(header):
            raise ValueError(f"row {k + 1}: has {len(r)} fields, the header has {len(header)}")
    cols = list(zip(*rows))
    table: dict[str, int] = {}
    ci = _codes(cols[pos["model_i"]], table, "model_i", 1)
    cj = _codes(cols[pos["model_j"]], table, "model_j", 1)
    names = sorted(table, key=table.__getitem__)
    order = np.argsort(np.asarray(names, dtype=object), kind="stable")
    remap = np.empty(len(names), dtype=np.int32)
    remap[order] = np.arange(len(names), dtype=np.int32)
    nums = {
        c: (_floats(cols[pos[c]], c, 1) if c in pos else np.zeros(len(rows)))
        for c in ("wins_i", "wins_j", "ties", "bothbad")
    }
    return pair_counts_from_arrays(
        tuple(names[k] for k in order), remap[ci], remap[cj],
        nums["wins_i"], nums["wins_j"], nums["ties"], nums["bothbad"],
    )  # fmt: skip


def write_pair_counts(counts: PairCounts, target) -> None:
    """Write :class:`PairCounts` as CSV with :data:`PAIR_COUNT_COLUMNS`."""
    fh, close, _ = _open_text_write(target)
    try:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(PAIR_COUNT_COLUMNS)
        names = [csvsafe.safe_cell(name) for name in counts.models]
        for k in range(counts.n_pairs):
            w.writerow(
                [names[counts.i[k]], names[counts.j[k]]]
                + [f"{v:g}" for v in (counts.wins_i[k], counts.wins_j[k], counts.ties[k], counts.bothbad[k])]
            )
    finally:
        if close:
            fh.close()
