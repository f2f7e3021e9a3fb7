"""Reward-model pairs files (``evalcore reward``'s PAIRS: ``NAME=PATH`` specs over LLMBar's format): a result
or a ValueError naming the problem, for any text, bytes, spec or field length."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from evalcore.reward import parse_pairs_spec, read_reward_pairs
from tests.fuzz.strategies import documented, json_values, scalars

PAIR = st.fixed_dictionaries(
    {"input": st.text(max_size=8), "output_1": st.text(max_size=8), "output_2": st.text(max_size=8)},
    optional={"label": st.sampled_from([1, 2, 1.0, True, 0, "2"]) | scalars},
)
PAIRS = st.lists(PAIR | json_values(), max_size=4)
DATA = st.one_of(
    PAIRS.map(lambda v: json.dumps(v).encode()),
    PAIRS.map(lambda v: "\n".join(json.dumps(x) for x in v).encode()),
    st.binary(max_size=80),
    st.sampled_from([b"[" * 100_000, b"[]", b"", b"\xef\xbb\xbf[]"]),
)


@given(DATA, DATA, st.sampled_from(["", "a=", "b=", "=", "a b=", "x" * 70 + "="]), st.integers(1, 10))
def test_reward_pairs_files(tmp_path_factory, first, second, prefix, max_field_chars):
    folder = tmp_path_factory.mktemp("reward-pairs")
    (folder / "one.json").write_bytes(first)
    (folder / "two.jsonl").write_bytes(second)
    specs = [f"{prefix}{folder / 'one.json'}", str(folder / "two.jsonl")]
    result = documented(lambda: read_reward_pairs(specs, max_field_chars=max_field_chars))
    if not isinstance(result, ValueError):
        pairs, files = result
        assert sum(f.pairs for f in files) == len(pairs)
        assert all(max(len(p.prompt), len(p.chosen), len(p.rejected)) <= max_field_chars for p in pairs)


@given(st.text(max_size=40))
def test_pairs_spec(spec):
    documented(lambda: parse_pairs_spec(spec))
