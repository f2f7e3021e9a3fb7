"""The remaining readers of user files and judge output: instruction files, samples JSONL, LC
annotation and difficulty CSVs, --model_args strings, generated verdicts and scores."""

from __future__ import annotations

import json

from hypothesis import example, given
from hypothesis import strategies as st

from evalcore.judging.judge import parse_generated, parse_score
from evalcore.judging.protocol import load_protocol
from evalcore.judging.run import read_instructions
from evalcore.models import parse_model_args
from evalcore.ratings.lc_annotations import read_difficulty, read_lc_annotations
from tests.fuzz.strategies import documented, json_values

HOSTILE = [b"[" * 100_000, b"\xff\xfe", b"\x80abc\n", b"a,b\nx,\r,y\n", b'"unterminated\n', b"[]", b"\n"]
FILES = st.one_of(
    st.lists(json_values(st.sampled_from(["instruction", "input", "question", "id", "instruction_id"])), max_size=4)
    .map(lambda v: json.dumps(v).encode()),
    st.lists(json_values(), max_size=4).map(lambda v: "\n".join(map(json.dumps, v)).encode()),
    st.text(max_size=120).map(str.encode),
    st.binary(max_size=60),
    st.sampled_from(HOSTILE),
)  # fmt: skip
LC_HEADER = "model,instruction_id,len_output_1,len_output_2,preference\n"
CSV_CELLS = st.sampled_from(["m", "i1", "3", "-1", "1.5", "2", "nan", "inf", "", "x"]) | st.text(max_size=4)
LC_ROWS = st.lists(st.lists(CSV_CELLS, min_size=4, max_size=6).map(",".join), max_size=5)


def _file(tmp_path_factory, data: bytes, name: str):
    path = tmp_path_factory.mktemp("reader") / name
    path.write_bytes(data)
    return path


@given(FILES)
def test_instruction_file(tmp_path_factory, data):
    documented(lambda: read_instructions(_file(tmp_path_factory, data, "instructions.jsonl")))


@given(FILES | LC_ROWS.map(lambda rows: (LC_HEADER + "\n".join(rows)).encode()))
@example(b"\xff" + LC_HEADER.encode())
@example((LC_HEADER + "m,i,\r,2,1\n").encode())
@example(b"id\ni1,x\n")  # a one-column header, a bad value: was IndexError
def test_lc_and_difficulty_csv(tmp_path_factory, data):
    documented(lambda: read_lc_annotations(_file(tmp_path_factory, data, "annotations.csv")))
    documented(lambda: read_difficulty(_file(tmp_path_factory, data, "difficulty.csv")))


@given(st.text(max_size=60) | st.lists(st.sampled_from(["a=1", "b=x", "=", "a=", "1=2", '"', "c=1e999", ",", " "]))
       .map(",".join))  # fmt: skip
def test_model_args(text):
    documented(lambda: parse_model_args(text))


PAIRWISE = load_protocol("arena-hard")
SINGLE = load_protocol("mt-bench-single")


@given(st.text(max_size=80) | st.lists(st.sampled_from(["[[A]]", "[[B]]", "[[A>>B]]", "Rating: [[", "10", "]]", "1e999",
                                                          "-3", "[[5]]", "[[]]", " "])).map("".join))  # fmt: skip
def test_judge_output(text):
    documented(lambda: parse_generated(PAIRWISE, text))
    documented(lambda: parse_score(SINGLE, text))
