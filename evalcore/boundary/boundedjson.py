"""JSON from untrusted files with a bound on nesting.

``json.loads`` raises RecursionError on deeply nested input (a few thousand ``[``), which callers
that catch only ``ValueError`` turn into a crash; shallower but still absurd nesting parses and
then costs every recursive walk that follows. :func:`loads` refuses both with one ValueError.
"""

from __future__ import annotations

import json

DEFAULT_MAX_DEPTH = 64


def loads(text: str | bytes, *, name: str, max_depth: int = DEFAULT_MAX_DEPTH) -> object:
    """Parse ``text``; raise ValueError naming ``name`` when it is not JSON or nests deeper than
    ``max_depth`` containers."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name} is not valid JSON ({exc.msg} at line {exc.lineno}).") from None
    except RecursionError:
        raise ValueError(f"{name} nests deeper than {max_depth} levels.") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{name} is not UTF-8 JSON ({exc.reason} at byte {exc.start}).") from None
    if depth_exceeds(value, max_depth):
        raise ValueError(f"{name} nests deeper than {max_depth} levels.")
    return value


def depth_exceeds(value: object, max_depth: int) -> bool:
    """Whether ``value`` holds containers nested more than ``max_depth`` deep (iterative walk)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > max_depth:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
