"""Reward-model pairs files (``evalcore reward``'s PAIRS: ``NAME=PATH`` specs over LLMBar's format): a result
or a ValueError naming the problem, for any text, bytes, spec or field length."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from evalcore.reward import parse_pairs_spec, read_reward_pairs
from evalcore.reward.stored import verify_report
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


REPORT_KEYS = ["kind", "model", "protocol", "pairs_files", "overall", "categories", "pair_id", "category", "label", "status",
               "reward_chosen", "reward_rejected", "outcome", "logprobs", "sha256", "pairs", "value", "n"]  # fmt: skip
GOOD_REPORT = {"kind": "dpo", "model": {}, "protocol": {}, "pairs_files": [{"category": "a", "sha256": "0" * 64, "pairs": 1}],
               "overall": {"value": 1.0, "n": 1}, "categories": {"a": {"value": 1.0, "n": 1}}}  # fmt: skip
GOOD_ROW = {"pair_id": "a/0", "category": "a", "label": 1, "status": "ok", "reward_chosen": 1.0, "reward_rejected": 0.0,
            "outcome": "correct"}  # fmt: skip


@st.composite
def spoiled(draw, base: dict):
    data = json.loads(json.dumps(base))
    for _ in range(draw(st.integers(0, 3))):
        data[draw(st.sampled_from(REPORT_KEYS))] = draw(scalars | json_values(st.sampled_from(REPORT_KEYS)))
    return data


@given(spoiled(GOOD_REPORT) | json_values(), st.lists(spoiled(GOOD_ROW) | json_values(), max_size=3))
def test_stored_reward_run(report, rows):
    """What ``manage.py reward_import`` reads (report.json, rewards.jsonl parsed): checked or refused."""
    documented(lambda: verify_report(report, rows))
