"""Filters turn a document's raw generations (one per repeat) into the answer that is scored.

``filter_list`` is a list of named pipelines, each ``{name, filter: [{function, ...}]}``; every
pipeline is scored separately (``exact_match,strict-match``). Without a ``filter_list`` the
pipeline ``none`` keeps the first response. Functions, as in the harness:

- ``regex``: ``regex_pattern``, ``group_select`` (index into all matches, negative from the end),
  ``fallback`` (default ``"[invalid]"``); a match with groups yields its first non-empty group;
- ``take_first``, ``take_first_k`` (``k``), ``lowercase``, ``uppercase``, ``remove_whitespace``
  (strips both ends, as the harness), ``majority_vote`` (most common response, first seen wins
  ties), ``map`` (``mapping_dict``, ``default_value``), ``format_span``, ``regex_pos``;
- ``multi_choice_regex``: the regex, else the document's ``choices`` text or a bare letter after a
  colon, mapped to ``(A)``, ``(B)``, ... (see :mod:`evalcore.engine.choice_filters`);
- ``custom``: ``filter_fn: !function module.name`` from a trusted task folder, called as the
  harness calls it, ``filter_fn([responses], [doc])``.

A pipeline is called with one document's responses and the document.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from evalcore.engine.choice_filters import format_span, multi_choice_regex, regex_pos
from evalcore.engine.taskcode import is_function

FILTER_ARGS = {
    "regex": {"regex_pattern", "group_select", "fallback", "ignore_case"},
    "take_first": set(),
    "take_first_k": {"k"},
    "lowercase": set(),
    "uppercase": set(),
    "remove_whitespace": set(),
    "majority_vote": set(),
    "map": {"mapping_dict", "default_value"},
    "format_span": set(),
    "regex_pos": {"regex_pattern", "group_select", "fallback"},
    "multi_choice_regex": {"regex_pattern", "group_select", "fallback", "ignore_case", "ignore_punctuation",
                           "regexes_to_ignore"},
    "custom": {"filter_fn"},
}  # fmt: skip
DEFAULT_PIPELINE = [{"name": "none", "filter": [{"function": "take_first"}]}]


def validate_filter_list(filter_list, source: str) -> None:
    if filter_list is None:
        return
    if not isinstance(filter_list, list):
        raise ValueError(f"{source}: filter_list must be a list of {{name, filter}} pipelines")
    names = set()
    for pipeline in filter_list:
        if not isinstance(pipeline, dict) or "name" not in pipeline or "filter" not in pipeline:
            raise ValueError(f"{source}: each filter_list entry needs 'name' and 'filter'")
        bad = sorted(set(pipeline) - {"name", "filter"})
        if bad:
            raise ValueError(f"{source}: unsupported filter_list key(s) {bad}")
        if not isinstance(pipeline["name"], str) or not isinstance(pipeline["filter"], list):
            raise ValueError(f"{source}: a filter_list entry's name must be a string and its filter a list of steps")
        if pipeline["name"] in names:
            raise ValueError(f"{source}: filter pipeline name {pipeline['name']!r} used twice")
        names.add(pipeline["name"])
        for step in pipeline["filter"]:
            function = step.get("function") if isinstance(step, dict) else None
            if callable(function):
                continue  # a filter class from a trusted task folder takes its own arguments
            if not isinstance(function, str) or function not in FILTER_ARGS:
                raise ValueError(f"{source}: filter function {function!r} is not one of {sorted(FILTER_ARGS)}")
            bad = sorted(set(step) - {"function"} - FILTER_ARGS[function])
            if bad:
                raise ValueError(f"{source}: filter {function!r} does not take {bad}; it takes {sorted(FILTER_ARGS[function])}")
            _validate_step(function, step, source)


def _validate_step(function: str, step: dict, source: str) -> None:
    if function == "regex" and "regex_pattern" not in step:
        raise ValueError(f"{source}: regex filter needs regex_pattern")
    if "regex_pattern" in step:
        try:
            re.compile(step["regex_pattern"])
        except (re.error, TypeError) as exc:
            raise ValueError(f"{source}: regex_pattern {step['regex_pattern']!r} is invalid: {exc}") from None
    if function == "custom" and not is_function(step.get("filter_fn")):
        raise ValueError(f"{source}: filter 'custom' needs filter_fn: !function module.name")
    if function == "take_first_k" and (not isinstance(step.get("k"), int) or step["k"] < 1):
        raise ValueError(f"{source}: filter 'take_first_k' needs k, a positive integer")
    if function == "map" and not isinstance(step.get("mapping_dict", {}), dict):
        raise ValueError(f"{source}: filter 'map' needs mapping_dict, a mapping")


def _regex(step: dict) -> Callable[[list], list]:
    flags = re.IGNORECASE if step.get("ignore_case") else 0
    pattern = re.compile(step["regex_pattern"], flags)
    group_select = int(step.get("group_select", 0))
    fallback = step.get("fallback", "[invalid]")

    def one(response) -> str:
        matches = pattern.findall(response if isinstance(response, str) else "")
        if not matches:
            return fallback
        try:
            match = matches[group_select]
        except IndexError:
            return fallback
        if isinstance(match, tuple):
            found = [m for m in match if m]
            match = found[0] if found else fallback
        return match.strip()

    return lambda responses: [one(r) for r in responses]


def _majority(responses: list) -> list:
    if not responses:
        return responses
    counts = Counter(responses)
    best = max(counts.values())
    return [next(r for r in responses if counts[r] == best)]


def _take_first_k(k: int) -> Callable[[list], list]:
    def take(responses: list) -> list:
        if len(responses) < k:
            raise ValueError(f"take_first_k needs {k} responses per document, got {len(responses)}: raise repeats")
        return responses[:k]

    return take


def _map(step: dict) -> Callable[[list], list]:
    mapping, default = step.get("mapping_dict") or {}, step.get("default_value")
    return lambda responses: [mapping.get(r, default) for r in responses]


def _filter_class(cls, step: dict) -> Callable[[list, dict], list]:
    """``function: !function utils.SomeFilter``: a harness Filter class, built with the step's arguments."""
    instance = cls(**{k: v for k, v in step.items() if k != "function"})

    def apply(responses: list, doc: dict) -> list:
        return list(list(instance.apply([responses], [doc]))[0])

    return apply


def _custom(function) -> Callable[[list, dict], list]:
    def apply(responses: list, doc: dict) -> list:
        return list(list(function([responses], [doc]))[0])

    return apply


def _simple(name: str, step: dict) -> Callable[[list], list]:
    """Filters that look at the responses only."""
    simple = {
        "take_first": lambda responses: responses[:1],
        "lowercase": lambda responses: [r.lower() for r in responses],
        "uppercase": lambda responses: [r.upper() for r in responses],
        "remove_whitespace": lambda responses: [r.strip() for r in responses],
        "majority_vote": _majority,
        "format_span": lambda responses: [format_span(r) for r in responses],
    }
    if name in simple:
        return simple[name]
    if name == "regex":
        return _regex(step)
    if name == "take_first_k":
        return _take_first_k(step["k"])
    if name == "map":
        return _map(step)
    if name == "regex_pos":
        return regex_pos(step)
    raise ValueError(f"filter function {name!r} is not one of {sorted(FILTER_ARGS)}")


def build_pipeline(steps: list[dict]) -> Callable[[list, dict], list]:
    """One pipeline as a function of (a document's responses, the document)."""
    functions: list[Callable[[list, dict], list]] = []
    for step in steps:
        name = step["function"]
        if callable(name):
            functions.append(_filter_class(name, step))
        elif name == "custom":
            functions.append(_custom(step["filter_fn"]))
        elif name == "multi_choice_regex":
            functions.append(multi_choice_regex(step))
        else:
            plain = _simple(name, step)
            functions.append(lambda responses, doc, plain=plain: plain(responses))

    def apply(responses: list, doc: dict | None = None) -> list:
        for function in functions:
            responses = function(list(responses), doc if doc is not None else {})
        return responses

    return apply


def pipelines(filter_list) -> list[tuple[str, Callable[[list, dict], list]]]:
    """(name, function) for each pipeline of ``filter_list`` (or the default ``none``)."""
    return [(p["name"], build_pipeline(p["filter"])) for p in (filter_list or DEFAULT_PIPELINE)]
