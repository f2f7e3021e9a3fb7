"""The arena catalogue YAML and evalcore.boundary.boundedjson: a result or a ValueError naming the problem."""

from __future__ import annotations

import json

import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from arena.catalogue.sync import ENTRY_KEYS, GENERATION_LIMITS, catalogue_parse
from evalcore.boundary import boundedjson
from tests.fuzz.strategies import documented, json_values, scalars

KEYS = sorted(ENTRY_KEYS | set(GENERATION_LIMITS)) + ["models", "path", "base_url", "api_key", "dtype"]
VALUE = (st.sampled_from(["hf", "openai", "vllm", "smollm2", "m-1", "../x", "a" * 201]) | scalars
         | st.integers(min_value=-(10**400), max_value=10**400) | json_values(st.sampled_from(KEYS)))  # fmt: skip
GOOD = {"name": "m1", "backend": "hf", "model_args": {"path": "SmolLM2-135M-Instruct"}, "generation": {"max_new_tokens": 8}}


@st.composite
def catalogues(draw) -> dict:
    entries = []
    for _ in range(draw(st.integers(0, 3))):
        entry = dict(GOOD)
        for _ in range(draw(st.integers(0, 3))):
            target = draw(st.sampled_from(["entry", "model_args", "generation"]))
            key, value = draw(st.sampled_from(KEYS) | st.integers(0, 2) | st.none()), draw(VALUE)
            if target == "entry":
                entry[key] = value
            else:
                entry[target] = {**(entry.get(target) if isinstance(entry.get(target), dict) else {}), key: value}
        entries.append(entry)
    return {"models": entries}


def _write(tmp_path_factory, data: bytes):
    path = tmp_path_factory.mktemp("catalogue") / "models.yaml"
    path.write_bytes(data)
    return path


@given(catalogues() | st.dictionaries(st.sampled_from(KEYS) | scalars, VALUE, max_size=3))
@example({"models": [{**GOOD, "generation": {"max_new_tokens": 10**400}}]})  # was OverflowError
@example({"models": [{**GOOD, "generation": {"seed": 10**400}}]})
@example({"models": [{**GOOD, "generation": {("x",): 1}}]})
def test_catalogue_mapping(tmp_path_factory, data):
    text = yaml.safe_dump(data, allow_unicode=True) if "models" in data else json.dumps(data, default=str)
    documented(lambda: catalogue_parse(_write(tmp_path_factory, text.encode())))


@given(st.text(max_size=200).map(str.encode) | st.binary(max_size=80) | st.sampled_from(
    [b"models: &a [*a]\n", b"models:\n- &e {name: m, backend: hf, model_args: {path: p}, generation: *e}\n",
     b"models:\n- {? [a]: 1}\n", b"models: !!python/object:os.system {}\n"]))  # fmt: skip
def test_catalogue_text(tmp_path_factory, data):
    documented(lambda: catalogue_parse(_write(tmp_path_factory, data)))


@given(json_values().map(json.dumps) | st.text(max_size=100) | st.binary(max_size=80) | st.sampled_from(
    ["[" * 100_000, "[" * 65 + "]" * 65, '{"a":' * 70 + "1" + "}" * 70, "1" * 5000, b"\xff\xfe[", b'"\\ud800"']),
    st.integers(min_value=0, max_value=100))  # fmt: skip
def test_boundedjson(text, depth):
    result = documented(lambda: boundedjson.loads(text, name="upload.json", max_depth=depth))
    if not isinstance(result, ValueError):
        assert not boundedjson.depth_exceeds(result, depth)
