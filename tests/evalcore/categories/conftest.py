from __future__ import annotations

import pytest

from tests.evalcore.models._shared import smollm2_backend

# A protocol on which the real SmolLM2 answers yes for some prompts and no for others (it tags poorly:
# what is tested is the machinery, not the tagger). Found by trying a few wordings on these prompts.
MIXED = {
    "name": "mentions-code",
    "category": "mentions_code",
    "version": "test-1",
    "system": "Answer yes or no.",
    "user": "{prompt}",
    "verdict": {
        "method": "logprob",
        "answers": {"yes": " Yes", "no": " No"},
        "threshold": 1,
        "criteria": [{"name": "code", "prefix": "Does this prompt mention code?"}],
    },
}
PROMPTS = [
    "Write a Python function that merges two sorted lists.",
    "Fix this JavaScript bug: undefined is not a function",
    "Write a poem about autumn rain.",
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "How do I sort a list in Python?",
    "Tell me a story about a dragon.",
    "Explain the SQL JOIN syntax with code.",
]


@pytest.fixture(scope="session")
def tagger(smollm2_dir):
    """The real SmolLM2-135M-Instruct as the tagger (hf backend, float32, CPU; loaded once)."""
    return smollm2_backend(str(smollm2_dir))
