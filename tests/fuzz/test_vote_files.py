"""Vote files (CSV, JSON, JSON Lines) and pair-count files: arbitrary bytes and well-formed files
with wrong rows end in a result or a ValueError naming the problem."""

from __future__ import annotations

import csv
import io
import json

from hypothesis import example, given
from hypothesis import strategies as st

from evalcore.ratings.battles import STYLE_FEATURES
from evalcore.ratings.io import read_battles, read_pair_counts
from tests.fuzz.strategies import documented, json_values, scalars

FORMATS = st.sampled_from([None, "csv", "json", "jsonl"])
COLUMNS = ["model_a", "model_b", "winner", "left", "right", "tstamp", "model_i", "model_j", "wins_i", "wins_j",
           "ties", "bothbad"] + [f"{f}_{s}" for s in "ab" for f in STYLE_FEATURES]  # fmt: skip
CELLS = st.sampled_from(["alpha", "beta", "", " ", "model_a", "model_b", "tie", "tie (bothbad)", "left", "right",
                         "nan", "inf", "-1", "3.5", "1e400", '"', "a,b", "x\ny", "\r", "\x00"]) | st.text(max_size=6)  # fmt: skip


def _read(data: bytes, fmt):
    return documented(lambda: read_battles(io.BytesIO(data), format=fmt))


@given(st.binary(max_size=300), FORMATS)
def test_arbitrary_bytes(data, fmt):
    _read(data, fmt)


@st.composite
def csv_files(draw) -> bytes:
    header = draw(st.lists(st.sampled_from(COLUMNS) | st.text(max_size=5), min_size=1, max_size=8))
    width = st.integers(min_value=max(len(header) - 1, 0), max_value=len(header) + 1)
    rows = draw(st.lists(st.lists(CELLS, min_size=len(header), max_size=len(header)) | width.flatmap(
        lambda n: st.lists(CELLS, min_size=n, max_size=n)), max_size=6))  # fmt: skip
    out = io.StringIO()
    writer = csv.writer(out, lineterminator=draw(st.sampled_from(["\n", "\r\n"])))
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue().encode()


@given(csv_files())
@example(b"model_a,model_b,winner\nalpha,\r,tie\n")  # a bare carriage return in a field: was csv.Error
def test_csv_with_wrong_rows(data):
    _read(data, "csv")
    documented(lambda: read_pair_counts(io.BytesIO(data)))


records = st.dictionaries(st.sampled_from(COLUMNS + ["conv_metadata"]), json_values(st.sampled_from(
    ["sum_assistant_a_tokens", "header_count_a", "list_count_b", "bold_count_a"]) | st.text(max_size=4)), max_size=8)  # fmt: skip


@given(st.lists(records | json_values(), max_size=5) | json_values())
def test_json_with_wrong_records(value):
    _read(json.dumps(value).encode(), "json")


@given(st.lists(records | scalars | json_values(), max_size=5))
def test_jsonl_with_wrong_lines(values):
    _read("\n".join(json.dumps(v) for v in values).encode(), "jsonl")
