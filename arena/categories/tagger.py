"""The configured prompt-category tagger and protocols (settings), and how categories are named.

``ARENA_CATEGORY_TAGGER`` names the tagger model like an arena model (``{"backend": "hf", "model_args":
{"path": "SmolLM2-135M-Instruct", "dtype": "float32"}}``; a relative path lives under
``PODIUM_MODELS_DIR``); empty turns tagging off. ``ARENA_CATEGORY_PROTOCOLS`` lists the category
protocols (bundled names or YAML files, :mod:`evalcore.categories`). See docs/categories.md.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

from django.conf import settings

from evalcore.categories import CategoryProtocol, load_category_protocol

LABELS = {
    "overall": "Overall",
    "multi_turn": "Multi-turn",
    "long_prompt": "Long prompts",
    "no_ties": "Without ties",
    "hard_prompt": "Hard prompts",
    "coding": "Coding",
    "math": "Math",
    "creative_writing": "Creative writing",
    "instruction_following": "Instruction following",
}


def category_label(category: str) -> str:
    """How the board names a category: "Language: de", "Hard prompts", "Some_tag" -> "Some tag"."""
    if category.startswith("language:"):
        return f"Language: {category.split(':', 1)[1]}"
    return LABELS.get(category) or category.replace("_", " ").capitalize()


@lru_cache(maxsize=8)
def _protocols(sources: tuple[str, ...]) -> tuple[CategoryProtocol, ...]:
    protocols = tuple(load_category_protocol(source) for source in sources)
    seen: dict[str, str] = {}
    for protocol in protocols:
        if protocol.category in seen:
            raise ValueError(
                f"ARENA_CATEGORY_PROTOCOLS: {seen[protocol.category]!r} and {protocol.name!r} both tag "
                f"{protocol.category!r}; one protocol per category"
            )
        seen[protocol.category] = protocol.name
    return protocols


def category_protocols() -> tuple[CategoryProtocol, ...]:
    """The configured protocols, loaded and checked once per process (one per category)."""
    return _protocols(tuple(getattr(settings, "ARENA_CATEGORY_PROTOCOLS", ())))


def tagger_config() -> dict | None:
    """``{"backend", "model_args"}`` of the configured tagger, or None when tagging is off."""
    config = getattr(settings, "ARENA_CATEGORY_TAGGER", None)
    return dict(config) if config else None


def tagger_spec() -> tuple[str, tuple] | None:
    """A hashable key for the worker's model pool (as :func:`arena.tasks.model_spec` makes for arena
    models), or None when tagging is off."""
    config = tagger_config()
    if config is None:
        return None
    args = dict(config.get("model_args") or {})
    if "path" in args and not Path(str(args["path"])).is_absolute():
        args["path"] = str(Path(settings.PODIUM_MODELS_DIR) / str(args["path"]))
    return str(config["backend"]), tuple(sorted((k, str(v)) for k, v in args.items()))


def tagger_name() -> str:
    """The tagger as configured, recorded on every tag (tags of another configuration are not used):
    ``backend:<path or model>#<hash of the whole configuration>``."""
    config = tagger_config()
    if config is None:
        return ""
    args = config.get("model_args") or {}
    where = str(args.get("path") or args.get("model") or "")[-120:]
    digest = hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:12]
    return f"{config['backend']}:{where}#{digest}"
