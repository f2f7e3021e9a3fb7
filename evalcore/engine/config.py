"""Task and group configs from YAML, in lm-evaluation-harness's schema (the supported part).

A task file is a mapping with ``task: NAME``; ``include: OTHER.yaml`` (or a list of files, merged
in order) loads other files first (relative to the including file) and the including file's keys
override them. A group file has ``group: NAME`` and ``task: [...]`` (names, or inline task or
group mappings) and optionally ``aggregate_metric_list``. Unknown keys are an error naming the key
and the file; ``!function`` (Python code beside the file) is loaded only for trusted folders
(:mod:`evalcore.engine.taskcode`) and refused otherwise.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from evalcore.boundary.validation import yaml_problem
from evalcore.engine.filters import validate_filter_list
from evalcore.engine.metrics import validate_metric_list
from evalcore.engine.taskcode import PythonFunction, check_functions, functions_in
from evalcore.jail import uses_code_eval

TASK_KEYS = {
    "task", "task_alias", "tag", "include", "dataset_path", "dataset_name", "dataset_kwargs",
    "test_split", "validation_split", "training_split", "fewshot_split", "description",
    "doc_to_text", "doc_to_target", "doc_to_choice", "target_delimiter", "fewshot_delimiter",
    "num_fewshot", "fewshot_config", "output_type", "generation_kwargs", "filter_list",
    "metric_list", "metadata", "repeats", "should_decontaminate", "doc_to_decontamination_query",
    "rolling_window", "process_docs", "process_results", "gen_prefix", "unsafe_code", "doc_to_image",
    "doc_to_audio", "use_prompt", "group", "group_alias", "custom_dataset",
    "cluster_key",  # Podium's: a template naming each document's cluster (questions sharing a passage)
}  # fmt: skip
GROUP_KEYS = {"group", "group_alias", "task", "aggregate_metric_list", "metadata", "include", "tag", "metric_list"}
OUTPUT_TYPES = ("multiple_choice", "loglikelihood", "loglikelihood_rolling", "generate_until")
FEWSHOT_KEYS = {"sampler", "samples", "doc_to_text", "doc_to_target", "doc_to_choice",
                "target_delimiter", "fewshot_delimiter", "split", "gen_prefix", "process_docs"}  # fmt: skip
GENERATION_KEYS = {"until", "max_gen_toks", "do_sample", "temperature", "top_p", "top_k", "num_beams",
                   "max_new_tokens"}  # fmt: skip
SAMPLERS = ("first_n", "default", "random")


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_constructor("!function", lambda loader, node: PythonFunction(loader.construct_scalar(node)))


def read_yaml(path: Path) -> dict:
    """Parse one YAML file into a mapping, with errors that name the file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"task file {str(path)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"task file {str(path)!r} cannot be read as UTF-8 text: {exc}") from None
    try:
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ValueError(f"task file {str(path)!r} is not valid YAML: {yaml_problem(exc)}") from None
    if not isinstance(data, dict):
        raise ValueError(f"task file {str(path)!r} must hold a mapping of keys, got {type(data).__name__}")
    _check_shape(data, str(path))
    for _, function in functions_in(data):
        function.base_dir = str(Path(path).resolve().parent)  # the harness resolves beside the tagged file
    return data


def resolve_includes(path: Path, _seen: tuple = ()) -> dict:
    """The file's mapping with its ``include`` chain merged in (the including file wins)."""
    path = Path(path).resolve()
    if path in _seen:
        raise ValueError(f"include cycle: {' -> '.join(str(p) for p in (*_seen, path))}")
    data = read_yaml(path)
    include = data.pop("include", None)
    if include is None:
        return data
    includes = include if isinstance(include, list) else [include]
    if not includes or not all(isinstance(item, str) and item for item in includes):
        raise ValueError(f"{path}: include must be a file name or a list of file names, got {include!r}")
    base: dict = {}
    for item in includes:
        included = resolve_includes(path.parent / item, (*_seen, path))
        included.pop("task_list", None)
        base.update(included)
    base.update(data)
    return base


def _check_shape(data: dict, source: str) -> None:
    """Refuse keys that are not strings and YAML aliases that contain themselves (iterative: no RecursionError)."""
    stack, open_ids = [(data, "", False)], set()
    while stack:
        node, key, done = stack.pop()
        if done:
            open_ids.discard(id(node))
            continue
        if not isinstance(node, dict | list):
            continue
        if id(node) in open_ids:
            raise ValueError(f"{source}: key {key!r} contains itself (a YAML alias inside its own anchor)")
        open_ids.add(id(node))
        stack.append((node, key, True))
        for k, value in node.items() if isinstance(node, dict) else ((key, v) for v in node):
            if not isinstance(k, str):
                raise ValueError(f"{source}: key {k!r} is not a string")
            stack.append((value, k, False))


@dataclass(frozen=True)
class TaskConfig:
    """One resolved task config. ``raw`` holds the merged YAML mapping (what the hash covers)."""

    task: str
    output_type: str
    raw: dict
    source: str = ""
    base_dir: str = ""
    tags: tuple[str, ...] = ()
    trusted: bool = False

    def get(self, key: str, default: Any = None) -> Any:
        return self.raw.get(key, default)

    @property
    def version(self) -> Any:
        return (self.raw.get("metadata") or {}).get("version")

    @property
    def sha256(self) -> str:
        payload = json.dumps(self.raw, sort_keys=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()

    @property
    def fewshot_config(self) -> dict:
        return self.raw.get("fewshot_config") or {}

    @property
    def generation_kwargs(self) -> dict:
        return self.raw.get("generation_kwargs") or {}

    def with_overrides(self, **overrides: Any) -> TaskConfig:
        raw = copy.deepcopy(self.raw)
        raw.update({k: v for k, v in overrides.items() if v is not None})
        return task_config_from_mapping(raw, source=self.source, base_dir=self.base_dir, trusted=self.trusted)


@dataclass(frozen=True)
class GroupConfig:
    """A named set of tasks whose metrics are aggregated (micro when ``weight_by_size``)."""

    group: str
    tasks: tuple[str, ...]
    aggregate: tuple[dict, ...] = ()
    source: str = ""
    raw: dict = field(default_factory=dict)
    inline: tuple[dict, ...] = ()  # task: entries given as mappings (inline tasks, subgroups, overrides)
    tags: tuple[str, ...] = ()


def task_config_from_mapping(data: dict, *, source: str = "<mapping>", base_dir: str = "",
                             trusted: bool = False) -> TaskConfig:  # fmt: skip
    """Validate a merged task mapping; raise ValueError naming the first problem.

    ``trusted``: the file comes from a folder whose Python code may run (``!function`` tags are
    loaded); otherwise any ``!function`` is refused.
    """
    _check_shape(data, source)
    check_functions(data, source, trusted=trusted)
    if "class" in data:
        raise ValueError(f"{source}: 'class' names a Python task class of the harness; Podium runs YAML tasks only")
    unknown = sorted(set(data) - TASK_KEYS)
    if unknown:
        raise ValueError(f"{source}: unsupported key(s) {unknown}; supported keys are {sorted(TASK_KEYS)}")
    name = data.get("task")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{source}: 'task' must be a task name (a string)")
    output_type = data.get("output_type", "generate_until")
    if not isinstance(output_type, str) or output_type not in OUTPUT_TYPES:
        raise ValueError(f"{source}: output_type {output_type!r} is not one of {OUTPUT_TYPES}")
    if not data.get("dataset_path") and data.get("custom_dataset") is None:
        raise ValueError(f"{source}: task {name!r} needs dataset_path")
    for key in ("process_docs", "process_results", "custom_dataset"):
        if data.get(key) is not None and not callable(data[key]):
            raise ValueError(f"{source}: {key} must be Python code (!function module.name), got {data[key]!r}")
    if data.get("unsafe_code"):
        _check_unsafe(data, source, output_type)
    if "doc_to_text" not in data and output_type != "loglikelihood_rolling":
        raise ValueError(f"{source}: task {name!r} needs doc_to_text")
    if output_type == "multiple_choice" and "doc_to_choice" not in data:
        raise ValueError(f"{source}: multiple_choice task {name!r} needs doc_to_choice")
    fewshot = data.get("fewshot_config") or {}
    if not isinstance(fewshot, dict):
        raise ValueError(f"{source}: fewshot_config must be a mapping")
    bad = sorted(set(fewshot) - FEWSHOT_KEYS)
    if bad:
        raise ValueError(f"{source}: unsupported fewshot_config key(s) {bad}; supported: {sorted(FEWSHOT_KEYS)}")
    sampler = fewshot.get("sampler", "default")
    if not isinstance(sampler, PythonFunction) and (not isinstance(sampler, str) or sampler not in SAMPLERS):
        raise ValueError(f"{source}: fewshot sampler {fewshot['sampler']!r} is not one of {SAMPLERS}")
    generation = data.get("generation_kwargs") or {}
    if not isinstance(generation, dict):
        raise ValueError(f"{source}: generation_kwargs must be a mapping")
    bad = sorted(set(generation) - GENERATION_KEYS)
    if bad:
        raise ValueError(f"{source}: unsupported generation_kwargs {bad}; supported: {sorted(GENERATION_KEYS)}")
    num_fewshot = data.get("num_fewshot", 0)
    if not isinstance(num_fewshot, int) or num_fewshot < 0:
        raise ValueError(f"{source}: num_fewshot must be a non-negative integer")
    repeats = data.get("repeats", 1)
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"{source}: repeats must be a positive integer")
    cluster_key = data.get("cluster_key")
    if cluster_key is not None and (not isinstance(cluster_key, str) or not cluster_key.strip()):
        raise ValueError(
            f"{source}: cluster_key must be a template naming each document's cluster (e.g. '{{{{passage_id}}}}'), "
            f"not {cluster_key!r}"
        )
    validate_filter_list(data.get("filter_list"), source)
    validate_metric_list(data.get("metric_list"), output_type, source, custom_results=data.get("process_results") is not None)
    tags = _tags(data, source)
    return TaskConfig(
        task=name, output_type=output_type, raw=data, source=source, base_dir=base_dir, tags=tags, trusted=trusted
    )


def group_config_from_mapping(data: dict, *, source: str = "<mapping>") -> GroupConfig:
    _check_shape(data, source)
    unknown = sorted(set(data) - GROUP_KEYS)
    if unknown:
        raise ValueError(f"{source}: unsupported group key(s) {unknown}; supported keys are {sorted(GROUP_KEYS)}")
    if not isinstance(data.get("group"), str) or not data["group"]:
        raise ValueError(f"{source}: 'group' must be a group name (a string)")
    tasks = data.get("task")
    if isinstance(tasks, str | dict):
        tasks = [tasks]
    if not isinstance(tasks, list) or not tasks or not all(isinstance(t, str | dict) for t in tasks):
        raise ValueError(f"{source}: group {data.get('group')!r} needs 'task' as a list of task names or mappings")
    for item in tasks:
        if isinstance(item, dict) and not isinstance(_member_name(item), str):
            raise ValueError(f"{source}: an inline entry of group {data['group']!r} needs 'task' or 'group' (a name)")
    aggregate = data.get("aggregate_metric_list") or []
    if isinstance(aggregate, dict):
        aggregate = [aggregate]
    if not isinstance(aggregate, list):
        raise ValueError(f"{source}: aggregate_metric_list must be a list of {{metric, aggregation}}")
    for item in aggregate:
        if not isinstance(item, dict) or "metric" not in item:
            raise ValueError(f"{source}: each aggregate_metric_list entry needs 'metric'")
        bad = sorted(set(item) - {"metric", "aggregation", "weight_by_size", "filter_list"})
        if bad:
            raise ValueError(f"{source}: unsupported aggregate_metric_list key(s) {bad}")
        if item.get("aggregation", "mean") != "mean":
            raise ValueError(f"{source}: group aggregation {item['aggregation']!r} is not supported (use mean)")
    names = [t if isinstance(t, str) else _member_name(t) for t in tasks]
    inline = tuple(t for t in tasks if isinstance(t, dict))
    tags = _tags(data, source)
    return GroupConfig(group=data["group"], tasks=tuple(names), aggregate=tuple(aggregate), source=source, raw=data,
                       inline=inline, tags=tags)  # fmt: skip


def _tags(data: dict, source: str) -> tuple[str, ...]:
    tags = data.get("tag") or []
    if not isinstance(tags, str) and not (isinstance(tags, list) and all(isinstance(t, str) for t in tags)):
        raise ValueError(f"{source}: tag must be a name or a list of names")
    return (tags,) if isinstance(tags, str) else tuple(tags)


def _check_unsafe(data: dict, source: str, output_type: str) -> None:
    """``unsafe_code: true`` tasks execute generated programs: only in Podium's jail.

    Two ways pass: Podium's ``pass@k`` metric, and (trusted folders only) metric functions from a
    module that scores through Hugging Face ``evaluate``'s ``code_eval``, as the harness's humaneval
    and mbpp do: that module got Podium's stand-in, which runs every program in the bubblewrap
    jail (:mod:`evalcore.jail.code_eval`). Any other task Python that would score programs
    (``process_results``, a metric function that never loaded code_eval) is refused.
    """
    if output_type != "generate_until":
        raise ValueError(f"{source}: unsafe_code is for generation tasks whose programs run in the jail")
    metrics = [e.get("metric") for e in data.get("metric_list") or [] if isinstance(e, dict)]
    outside = [f for f in metrics if callable(f) and not _scores_through_code_eval(f)]
    if data.get("process_results") is not None or outside:
        raise ValueError(
            f"{source}: unsafe_code task scores generated programs with its own Python, outside the jail; "
            "Podium runs such programs only in its jail: use metric_list: [{metric: pass@k}], or metric "
            "functions that score with evaluate's code_eval (Podium runs those programs in the jail)"
        )


def _scores_through_code_eval(function) -> bool:
    loaded = getattr(function, "function", None)
    return uses_code_eval(getattr(loaded, "__module__", "") or "")


def _member_name(item: dict):
    return item["group"] if "group" in item else item.get("task")


def is_group_mapping(data: dict) -> bool:
    """A group file (``group:`` with ``task:`` members), as the harness tells groups from tasks."""
    return "group" in data and isinstance(data.get("task"), list | str | dict) and "dataset_path" not in data


def load_config_file(path: str | Path, *, trusted: bool = False) -> TaskConfig | GroupConfig:
    """Load one YAML file as a task or a group config (``trusted``: its folder's Python code may run)."""
    path = Path(path).resolve()
    data = resolve_includes(path)
    if is_group_mapping(data):
        return group_config_from_mapping(data, source=str(path))
    return task_config_from_mapping(data, source=str(path), base_dir=str(path.parent), trusted=trusted)
