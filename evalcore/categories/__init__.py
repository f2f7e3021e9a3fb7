"""Prompt categories tagged by a model: protocols, tagging with a cache, agreement with staff.

See ``docs/categories.md``. The public API::

    load_category_protocol(path_or_name) -> CategoryProtocol     # protocol.py (bundled: hard-prompt,
                                                                 # coding, math, creative-writing,
                                                                 # instruction-following)
    tag_prompts(backend, protocol, prompts, cache=...) -> list[Tag]   # tagging.py
    TagCache(store, tagger=, protocol_sha256=)                   # over evalcore.judging's stores
    agreement([(tagger, staff), ...]) -> dict                    # agreement.py, mid-p interval
"""

from evalcore.categories.agreement import agreement
from evalcore.categories.protocol import (
    CategoryProtocol,
    Criterion,
    bundled_category_protocols,
    category_protocol_from_dict,
    load_category_protocol,
)
from evalcore.categories.tagging import Tag, TagCache, parse_criteria, prompt_sha256, tag_prompts, tagger_key

__all__ = [
    "CategoryProtocol",
    "Criterion",
    "Tag",
    "TagCache",
    "agreement",
    "bundled_category_protocols",
    "category_protocol_from_dict",
    "load_category_protocol",
    "parse_criteria",
    "prompt_sha256",
    "tag_prompts",
    "tagger_key",
]
