"""Task YAML: arbitrary mappings and arbitrary text end in a config or a ValueError naming the problem."""

from __future__ import annotations

import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from evalcore.engine.config import (
    FEWSHOT_KEYS,
    GENERATION_KEYS,
    GROUP_KEYS,
    TASK_KEYS,
    group_config_from_mapping,
    load_config_file,
    task_config_from_mapping,
)
from tests.fuzz.strategies import documented, json_values

KEYS = sorted(TASK_KEYS | GROUP_KEYS | FEWSHOT_KEYS | GENERATION_KEYS) + [
    "name", "filter", "function", "regex_pattern", "group_select", "metric", "aggregation", "k",
    "higher_is_better", "ignore_case",
]  # fmt: skip
VALUES = st.sampled_from(["generate_until", "multiple_choice", "loglikelihood", "loglikelihood_rolling", "exact_match",
                          "acc", "pass@k", "regex", "take_first", "mean", "first_n", "(", "gsm8k", "x.yaml"])  # fmt: skip
KEY = st.sampled_from(KEYS) | st.integers(-2, 2) | st.none() | st.booleans() | st.text(max_size=5)
VALUE = json_values(KEY, max_leaves=16) | VALUES | st.lists(st.dictionaries(st.sampled_from(KEYS), VALUES | json_values(
    st.sampled_from(KEYS)), max_size=4), max_size=3)  # fmt: skip
# A plausible task, then a few keys replaced by anything.
BASE = {"task": "t", "dataset_path": "d", "doc_to_text": "{{q}}", "output_type": "generate_until"}
mappings = st.builds(lambda base, extra: {**base, **extra}, st.just(BASE) | st.just({}),
                     st.dictionaries(st.sampled_from(KEYS) | KEY, VALUE, max_size=5))  # fmt: skip


@given(mappings)
def test_task_mapping(data):
    documented(lambda: task_config_from_mapping(data, source="fuzz.yaml"))


@given(st.dictionaries(KEY, VALUE, max_size=5).map(lambda d: {"group": "g", "task": ["a"], **d}))
@example({"group": "g", "task": ["a"], "tag": 5})  # was TypeError
@example({"group": "g", "task": ["a"], "aggregate_metric_list": 3})  # was TypeError
def test_group_mapping(data):
    documented(lambda: group_config_from_mapping(data, source="fuzz.yaml"))


YAML_TEXT = st.one_of(
    st.text(max_size=200),
    mappings.map(lambda d: yaml.safe_dump(d, allow_unicode=True)),
    st.sampled_from([
        "task: &a [*a]\n", "a: &x {b: *x}\ntask: t\n", "task: t\ndoc_to_text: !function utils.f\n", "task: !!python/name:os.system\n",
        "include: .\ntask: t\n", "include: fuzz.yaml\n", "include: missing.yaml\n", "include: /dev/null\n", "\ufeff- a\n",
        "task: t\nfilter_list: &f [{name: n, filter: *f}]\n", "? [a, b]\n: c\n", "task: t\n\x00\n", "{[1]: 2}\n",
    ]),
)  # fmt: skip


@given(YAML_TEXT | st.binary(max_size=100))
def test_task_file(tmp_path_factory, text):
    folder = tmp_path_factory.mktemp("task", numbered=True)
    path = folder / "fuzz.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    documented(lambda: load_config_file(path))
