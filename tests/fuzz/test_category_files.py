"""Category protocols (YAML) and the prompt files of ``evalcore categorize`` (JSON Lines): a result or a
ValueError naming the problem, for any text, bytes or wrongly shaped mapping."""

from __future__ import annotations

import json

import yaml
from hypothesis import given
from hypothesis import strategies as st

from evalcore.categories import (
    bundled_category_protocols,
    category_protocol_from_dict,
    load_category_protocol,
)
from evalcore.categories.prompts import read_prompts
from tests.fuzz.strategies import documented, json_values, scalars

KEYS = ["name", "category", "version", "system", "user", "verdict", "source", "description", "method", "answers",
        "yes", "no", "criteria", "threshold", "prefix", "max_new_tokens"]  # fmt: skip
VALUES = st.sampled_from(["logprob", "generate", "coding", "overall", "Coding", "hard_prompt", " yes", " no",
                          "{prompt}", "{nope}", "{prompt} {prompt}", "a:b"])  # fmt: skip
VALUE = (
    VALUES
    | scalars
    | st.integers(min_value=-(10**400), max_value=10**400)
    | json_values(st.sampled_from(KEYS))
)
BUNDLED = [yaml.safe_load(path.read_text()) for path in bundled_category_protocols().values()]


@st.composite
def protocols(draw) -> dict:
    """A bundled protocol with a few values (top level, verdict or a criterion) replaced by anything."""
    data = json.loads(json.dumps(draw(st.sampled_from(BUNDLED))))
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(["top", "verdict", "criterion"]))
        verdict = data.get("verdict") if isinstance(data.get("verdict"), dict) else None
        criteria = verdict.get("criteria") if verdict else None
        if where == "criterion" and isinstance(criteria, list) and criteria and isinstance(criteria[0], dict):
            criteria[0][draw(st.sampled_from(KEYS))] = draw(VALUE)
        elif where == "verdict" and verdict is not None:
            verdict[draw(st.sampled_from(KEYS))] = draw(VALUE)
        else:
            data[draw(st.sampled_from(KEYS))] = draw(VALUE)
    return data


@given(protocols() | st.dictionaries(st.sampled_from(KEYS) | st.integers(0, 2), VALUE, max_size=6))
def test_category_protocol_mapping(data):
    documented(lambda: category_protocol_from_dict(data, where="fuzz.yaml"))


@given(
    st.text(max_size=300)
    | protocols().map(lambda d: yaml.safe_dump(d, allow_unicode=True))
    | st.binary(max_size=80)
)
def test_category_protocol_file(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("protocol") / "fuzz.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    documented(lambda: load_category_protocol(path))


LINE = st.fixed_dictionaries(
    {}, optional={"prompt": scalars | st.text(max_size=8), "id": scalars, "x": scalars}
)


@given(st.one_of(
    st.lists(LINE | json_values(), max_size=4).map(lambda v: "\n".join(json.dumps(x) for x in v).encode()),
    st.binary(max_size=80),
    st.text(max_size=80).map(str.encode),
))  # fmt: skip
def test_prompt_file(tmp_path_factory, content):
    path = tmp_path_factory.mktemp("prompts") / "prompts.jsonl"
    path.write_bytes(content)
    documented(lambda: read_prompts(path))
