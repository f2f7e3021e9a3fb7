"""Exchangeability test (Oren et al., 2024): a model trained on a shard in order is caught, the untouched one is not."""

from __future__ import annotations

import numpy as np
import pytest

from evalcore.contamination.exchangeability import exchangeability_test, permutation_p_value, shard_documents
from evalcore.models import load_backend

SEPARATOR = "\n\n"


def test_permutation_p_value_counts_ties_against_the_canonical_order():
    assert permutation_p_value(-10.0, [-11.0, -12.0, -13.0]) == pytest.approx(1 / 4)
    assert permutation_p_value(-10.0, [-10.0, -9.0, -13.0]) == pytest.approx(3 / 4)
    assert permutation_p_value(0.0, [-1.0] * 39) == pytest.approx(0.025)
    with pytest.raises(ValueError, match="non-empty"):
        permutation_p_value(0.0, [])


def test_bad_arguments_are_refused(data_env, smollm2):
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="at least 2 documents"):
        exchangeability_test(smollm2, ["only one"], rng=rng)
    with pytest.raises(ValueError, match="permutations must be a positive integer"):
        exchangeability_test(smollm2, ["a", "b"], permutations=0, rng=rng)
    with pytest.raises(ValueError, match="unknown task"):
        shard_documents("no_such_task")
    assert len(shard_documents("gsm8k", shard_size=4)) == 4


def short_shard(items, size: int = 8, max_words: int = 30) -> list[str]:
    """The first ``size`` short test items, in published order (short keeps the test cheap on a CPU)."""
    return [item.text for item in items if len(item.text.split()) <= max_words][:size]


def train_in_place(backend, text: str, *, steps: int, lr: float):
    """Fine-tune the backend's own model for a few full-batch steps on ``text`` (the shard in its order).

    The backend is a fresh copy loaded for this test; training its model in place scores exactly the
    trained weights without saving a 540 MB checkpoint and loading it back (about a fifth of the test's
    CPU time went there)."""
    import torch

    torch.manual_seed(0)
    model = backend.model
    ids = backend.tokenizer(text, return_tensors="pt").input_ids.to(model.device)
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    try:
        for _ in range(steps):
            model(ids, labels=ids).loss.backward()
            optimiser.step()
            optimiser.zero_grad()
    finally:
        model.eval()
    return backend


@pytest.mark.slow
def test_a_model_trained_on_the_shard_in_order_is_detected_and_the_untouched_one_is_not(
    smollm2, smollm2_dir, gsm8k_items
):
    documents = short_shard(gsm8k_items, size=6)
    untouched = exchangeability_test(smollm2, documents, permutations=20, rng=np.random.default_rng(0), separator=SEPARATOR)
    assert untouched.p_value >= 0.05, untouched.summary()

    # A copy of its own (never the session's shared ``smollm2``), trained on the shard in its published order.
    copy = load_backend("hf", path=str(smollm2_dir), dtype="float32", device="cpu")
    trained = train_in_place(copy, SEPARATOR.join(documents), steps=3, lr=1e-4)
    result = exchangeability_test(trained, documents, permutations=20, rng=np.random.default_rng(0), separator=SEPARATOR)
    assert result.p_value < 0.05, result.summary()
    assert result.p_value == pytest.approx(1 / 21)  # the published order beats every shuffled one
    assert len(result.permuted_logprobs) == 20 and result.documents == 6
