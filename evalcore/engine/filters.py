"""Filters turn a document's raw generations (one per repeat) into the answer that is scored.

``filter_list`` is a list of named pipelines, each ``{name, filter: [{function, ...}]}``; every
pipeline is scored separately (``exact_match,strict-match``). Without a ``filter_list`` the
pipeline ``none`` keeps the first response. Functions, as in the harness:

- ``regex``: ``regex_pattern``, ``group_select`` (index into all matches, negative from the end),
  ``fallback`` (default ``"[invalid]"``); a match with groups yields its first non-empty group;
- ``take_first``, ``lowercase``, ``uppercase``, ``remove_whitespace`` (one leading space, as the
  harness), ``majority_vote`` (most common response, first seen wins ties).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

FILTER_ARGS = {
    "regex": {"regex_pattern", "group_select", "fallback", "ignore_case"},
    "take_first": set(),
    "lowercase": set(),
    "uppercase": set(),
    "remove_whitespace": set(),
    "majority_vote": set(),
}
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
            if not isinstance(function, str) or function not in FILTER_ARGS:
                raise ValueError(f"{source}: filter function {function!r} is not one of {sorted(FILTER_ARGS)}")
            bad = sorted(set(step) - {"function"} - FILTER_ARGS[function])
            if bad:
                raise ValueError(f"{source}: filter {function!r} does not take {bad}; it takes {sorted(FILTER_ARGS[function])}")
            if function == "regex":
                if "regex_pattern" not in step:
                    raise ValueError(f"{source}: regex filter needs regex_pattern")
                try:
                    re.compile(step["regex_pattern"])
                except (re.error, TypeError) as exc:
                    raise ValueError(f"{source}: regex_pattern {step['regex_pattern']!r} is invalid: {exc}") from None


def _regex(step: dict) -> Callable[[list], list]:
    flags = re.IGNORECASE if step.get("ignore_case") else 0
    pattern = re.compile(step["regex_pattern"], flags)
    group_select = int(step.get("group_select", 0))
    fallback = step.get("fallback", "[invalid]")

    def one(response: str) -> str:
        matches = pattern.findall(response)
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


def _remove_leading_space(responses: list) -> list:
    return [r[1:] if r.startswith(" ") else r for r in responses]


def build_pipeline(steps: list[dict]) -> Callable[[list], list]:
    functions: list[Callable[[list], list]] = []
    for step in steps:
        name = step["function"]
        if name == "regex":
            functions.append(_regex(step))
        elif name == "take_first":
            functions.append(lambda responses: responses[:1])
        elif name == "lowercase":
            functions.append(lambda responses: [r.lower() for r in responses])
        elif name == "uppercase":
            functions.append(lambda responses: [r.upper() for r in responses])
        elif name == "remove_whitespace":
            functions.append(_remove_leading_space)
        elif name == "majority_vote":
            functions.append(_majority)

    def apply(responses: list) -> list:
        for function in functions:
            responses = function(list(responses))
        return responses

    return apply


def pipelines(filter_list) -> list[tuple[str, Callable[[list], list]]]:
    """(name, function) for each pipeline of ``filter_list`` (or the default ``none``)."""
    return [(p["name"], build_pipeline(p["filter"])) for p in (filter_list or DEFAULT_PIPELINE)]
