"""Judge protocols (YAML) and LLMBar pairs files (JSON, JSON Lines): a result or a ValueError naming
the problem, for any text, bytes or wrongly shaped mapping."""

from __future__ import annotations

import json

import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from evalcore.judging.protocol import bundled_protocols, load_protocol, protocol_from_dict
from evalcore.judging.records import read_pairs
from tests.fuzz.strategies import documented, json_values, scalars

KEYS = ["name", "kind", "system", "user", "verdict", "source", "description", "method", "prefix", "tokens", "A", "B",
        "max_new_tokens", "outcomes", "score", "regex", "min", "max", "pattern", "winner", "weight", "scale",
        "suffix"]  # fmt: skip
VALUES = st.sampled_from(["pairwise", "single", "logprob", "generate", "A", "B", "tie", "[[A]]", "[[B]]", "(\\d+)", "(",
                          "{question} {answer_a} {answer_b}", "{question} {answer}", "{nope}", "{reference}"])  # fmt: skip
VALUE = VALUES | scalars | st.integers(min_value=-(10**400), max_value=10**400) | json_values(st.sampled_from(KEYS))
BUNDLED = [yaml.safe_load(path.read_text()) for path in bundled_protocols().values()]
SINGLE = next(p for p in BUNDLED if p["kind"] == "single")


@st.composite
def protocols(draw) -> dict:
    """A bundled protocol with a few values (top level or in the verdict) replaced by anything."""
    data = json.loads(json.dumps(draw(st.sampled_from(BUNDLED))))
    for _ in range(draw(st.integers(1, 3))):
        target = data["verdict"] if draw(st.booleans()) and isinstance(data.get("verdict"), dict) else data
        target[draw(st.sampled_from(KEYS))] = draw(VALUE)
    return data


@given(protocols() | st.dictionaries(st.sampled_from(KEYS) | st.integers(0, 2), VALUE, max_size=6))
@example({**BUNDLED[0], "user": None})
@example({**SINGLE, "verdict": {"method": "generate", "max_new_tokens": 9, "score": {"regex": "(\\d)", "min": 0, "max": 10**400}}})
def test_protocol_mapping(data):
    documented(lambda: protocol_from_dict(data, where="fuzz.yaml"))


@given(st.text(max_size=300) | protocols().map(lambda d: yaml.safe_dump(d, allow_unicode=True)) | st.binary(max_size=80))
def test_protocol_file(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("protocol") / "fuzz.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    documented(lambda: load_protocol(path))


PAIR = st.fixed_dictionaries(
    {"input": st.text(max_size=5), "output_1": st.text(max_size=5), "output_2": st.text(max_size=5)},
    optional={"label": st.sampled_from([1, 2, 1.0, True, 0, "1"]) | scalars, "reference": scalars},
)
PAIRS = st.lists(PAIR | json_values(), max_size=4)


@given(st.one_of(
    PAIRS.map(lambda v: json.dumps(v).encode()),
    PAIRS.map(lambda v: "\n".join(json.dumps(x) for x in v).encode()),
    json_values().map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=80),
    st.sampled_from([b"[" * 100_000, b'{"input": ' * 100_000, b"\xff[]", b"[]", b"\n\n"]),
), st.booleans())  # fmt: skip
def test_pairs_file(tmp_path_factory, data, require_label):
    path = tmp_path_factory.mktemp("pairs") / "pairs.jsonl"
    path.write_bytes(data)
    documented(lambda: read_pairs(path, require_label=require_label))
