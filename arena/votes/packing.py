"""How a vote's values travel from PostgreSQL to the refit: packed into a few 64-bit binary fields.

Each field costs PostgreSQL a send function and an aggregate step per vote (~0.1 us each, most of the
read's time at 10M votes), so small values travel several to a 64-bit field: both model ids in one;
outcome, prompt flag, language, turn count and prompt tokens in another; both sides' token counts in a
third, the six small style counts in a fourth. Languages travel as their index in the sorted list of the
stored votes' languages; models as their ids. This module holds the SQL of each field (:data:`FIELDS`,
:data:`VOTER_FIELDS`) and the numpy code that takes the fields apart again; the two change together.
:mod:`arena.votes.columns` reads the fields in chunks and puts the votes in order.
"""

from __future__ import annotations

import numpy as np

from arena.models import STYLE_KEYS

POSTGRES_EPOCH_MICROS = 946_684_800_000_000  # 2000-01-01 UTC in microseconds since 1970
WINNER_SQL = "CASE v.winner WHEN 'model_a' THEN 0 WHEN 'model_b' THEN 1 WHEN 'tie' THEN 2 ELSE 3 END"


def _style_bits(column: str, shift: int, bits: int) -> str:
    """SQL: a style count as an unsigned ``bits``-bit integer at ``shift``; all ones when it is not an
    integer below that (fractions, huge values, NaN: read exactly by :func:`style_exact`)."""
    top = (1 << bits) - 1
    value = f"(CASE WHEN {column} >= 0 AND {column} < {top} AND {column} = trunc({column}) THEN {column}::int8 ELSE {top} END)"
    return f"({value} << {shift})" if shift else value


# (name, SQL value, send function, numpy big-endian type). Each field costs PostgreSQL a send function and
# an aggregate step per vote (~0.1 us each, most of the read at 10M votes), so small values travel
# several to a field: both model ids in "pair"; outcome, has-prompt, language, turn count and prompt
# tokens in "packed" (bit layout in PACKED; taken apart by unpacked()).
FIELDS = [
    ("id", "v.id::int8", "int8send", ">i8"),
    ("pair", "(v.model_a_id::int8 << 32) | v.model_b_id::int8", "int8send", ">i8"),
    (
        "packed",
        f"(({WINNER_SQL})::int8 << 61)"
        " | ((CASE WHEN v.prompt_hash <> '' THEN 1 ELSE 0 END)::int8 << 60)"
        " | ((coalesce(array_position(%(languages)s::text[], v.language), 1) - 1)::int8 << 46)"
        " | (v.turn_count::int8 << 31) | v.prompt_tokens::int8",
        "int8send",
        ">i8",
    ),
    # timestamptz's own binary form: microseconds since 2000-01-01 UTC (no numeric epoch arithmetic per row)
    ("micros", "v.created_at", "timestamptz_send", ">i8"),
    # The style counts (numeric columns generated and stored by the database: arena.models.StyleCount) as
    # integers, both sides' tokens in one field (32 bits each), the six small counts in another (10 bits
    # each); a count that is not an integer in range travels as all ones and is read exactly afterwards.
    ("tokens", " | ".join(_style_bits(f"v.style_{side}_tokens", shift, 32) for side, shift in (("a", 32), ("b", 0))),
     "int8send", ">i8"),  # fmt: skip
    ("counts", " | ".join(_style_bits(f"v.style_{side}_{key}", 10 * k, 10) for k, (side, key) in enumerate(
        (side, key) for side in "ab" for key in STYLE_KEYS[1:])), "int8send", ">i8"),  # fmt: skip
    ("prompt", "hashtextextended(v.prompt_hash, 0)", "int8send", ">i8"),
]
# "packed": (shift, bits) of each value; model ids, turn counts and prompt tokens are non-negative
# (positive-integer columns), so the sign bit stays clear.
PACKED = {"prompt_tokens": (0, 31), "turn_count": (31, 15), "language": (46, 14), "has_prompt": (60, 1),
          "outcome": (61, 2)}  # fmt: skip
MAX_LANGUAGES = 1 << PACKED["language"][1]
# Voters' session and IP hashes, when asked for: 64-bit hashes of the stored hashes, mapped back
# by arena.votes.columns.
VOTER_FIELDS = [
    ("session", "hashtextextended(v.session_hash, 0)", "int8send", ">i8"),
    ("ip", "hashtextextended(v.ip_hash, 0)", "int8send", ">i8"),
]
# The type each value of "packed" takes in the returned arrays.
OUTPUT = {"outcome": np.int8, "turn_count": np.int64, "prompt_tokens": np.int64, "language": np.int32,
          "has_prompt": np.int8}  # fmt: skip


def joined(parts: list[dict[str, np.ndarray]], fields: list) -> dict[str, np.ndarray]:
    """Each column of the chunks in one native-endian array (the copy is the byte swap: one pass), the
    chunks' buffers let go column by column. At 10M votes every array made is ~80 MB of fresh pages
    (~45 ms each to fault in here), so none is made twice."""
    total = sum(len(part["id"]) for part in parts)
    rows: dict[str, np.ndarray] = {}
    for name, _, _, kind in fields:
        out = rows[name] = np.empty(total, dtype=np.dtype(kind).newbyteorder("="))
        start = 0
        for part in parts:
            values = part.pop(name)
            out[start : start + len(values)] = values
            start += len(values)
    return rows


def unpacked(rows: dict[str, np.ndarray]) -> None:
    """Split "pair" into the model ids "a" and "b", and "packed" into its values (:data:`PACKED`)."""
    pair = rows.pop("pair")
    rows["a"] = pair >> 32
    pair &= 0xFFFFFFFF
    rows["b"] = pair
    packed = rows.pop("packed")
    for name, (shift, bits) in sorted(PACKED.items(), key=lambda item: -item[1][0]):
        value = packed >> shift if shift else packed  # the value at shift 0 comes last: in place
        value &= (1 << bits) - 1
        rows[name] = value.astype(OUTPUT[name], copy=False)


def style_unpacked(rows: dict[str, np.ndarray]) -> np.ndarray:
    """The style counts as (n, 4) float64 arrays "style_a" and "style_b" from "tokens" and "counts"; returns
    the positions of votes with a count that did not fit (see :func:`style_exact`)."""
    tokens, counts = rows.pop("tokens"), rows.pop("counts")
    n = tokens.shape[0]
    odd = np.zeros(n, dtype=bool)
    for k, side in enumerate("ab"):
        out = rows[f"style_{side}"] = np.empty((n, len(STYLE_KEYS)), dtype=np.float64)
        value = ((tokens >> 32) if side == "a" else tokens) & 0xFFFFFFFF  # bit 63 may be set: mask
        out[:, 0] = value
        odd |= value == 0xFFFFFFFF
        for j in range(1, len(STYLE_KEYS)):
            value = (counts >> (10 * (3 * k + j - 1))) & 1023
            out[:, j] = value
            odd |= value == 1023
    return np.flatnonzero(odd)


def style_exact(cursor, rows: dict[str, np.ndarray], odd: np.ndarray) -> None:
    """Read the style counts of the votes at positions ``odd`` exactly (float8), in the caller's snapshot."""
    columns = ", ".join(f"v.style_{side}_{key}" for side in "ab" for key in STYLE_KEYS)
    for start in range(0, odd.size, 10_000):
        where = odd[start : start + 10_000]
        at = {int(vote_id): int(pos) for vote_id, pos in zip(rows["id"][where], where)}
        cursor.execute(f"SELECT v.id, {columns} FROM arena_vote v WHERE v.id = ANY(%s)", [list(at)])
        for vote_id, *values in cursor.fetchall():
            pos = at[vote_id]
            rows["style_a"][pos] = values[: len(STYLE_KEYS)]
            rows["style_b"][pos] = values[len(STYLE_KEYS) :]
