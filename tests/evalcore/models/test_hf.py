"""The hf backend: harness tokenisation, batched scoring equal to a plain forward pass, generation
with stop sequences, chat streaming, and refusals of unsafe checkpoints."""

from __future__ import annotations

import shutil

import pytest
import torch

from evalcore.models import (
    ChatParams,
    GenerationRequest,
    LoglikelihoodRequest,
    RollingRequest,
    backend_class,
    load_backend,
    parse_model_args,
)
from evalcore.models.scoring import rolling_windows
from tests.conftest import FLOAT32_ATOL


def reference_logprob(backend, context: str, continuation: str) -> tuple[float, bool]:
    """Sum of log-probabilities from one unbatched forward pass over context + continuation."""
    ctx, cont = backend.encode_pair(context, continuation)
    ids = torch.tensor([ctx + cont])
    with torch.inference_mode():
        logits = backend.model(ids).logits[0].float()
    logprobs = torch.log_softmax(logits, -1)
    positions = range(len(ctx) - 1, len(ctx) + len(cont) - 1)
    total = sum(logprobs[p, t].item() for p, t in zip(positions, cont))
    greedy = all(logprobs[p].argmax().item() == t for p, t in zip(positions, cont))
    return total, greedy


def test_trailing_whitespace_of_the_context_moves_to_the_continuation(tiny_dir):
    backend = load_backend("hf", path=str(tiny_dir))
    moved = backend.encode_pair("Question: 2+2?\nAnswer: ", "4")
    plain = backend.encode_pair("Question: 2+2?\nAnswer:", " 4")
    assert moved == plain
    # The continuation is what follows the context's own tokens inside the joint encoding.
    whole = backend.tok_encode("Question: 2+2?\nAnswer: 4")
    assert plain[0] + plain[1] == whole


def test_empty_context_is_replaced_by_the_prefix_token(tiny_dir):
    backend = load_backend("hf", path=str(tiny_dir))
    context, continuation = backend.encode_pair("", "Hello")
    assert context == [backend.prefix_token_id]
    assert continuation == backend.tok_encode("Hello")


def test_batched_scoring_with_shared_prefix_equals_single_forward_passes(tiny_dir):
    backend = load_backend("hf", path=str(tiny_dir), batch_size="auto")
    shots = "Q: what is one plus one?\nA: two\n\n" * 6  # a long shared few-shot prefix
    requests = [
        LoglikelihoodRequest(shots + "Q: capital of France?\nA:", " Paris"),
        LoglikelihoodRequest(shots + "Q: capital of France?\nA:", " London"),
        LoglikelihoodRequest(shots + "Q: colour of the sky?\nA:", " blue sky today"),
        LoglikelihoodRequest(shots + "Q: letter?\nA:", " A"),
        LoglikelihoodRequest(shots + "Q: letter?\nA:", " B"),
        LoglikelihoodRequest(shots + "Q: " + "which statement about the revolution is most accurate? " * 3 + "\nA:", " The price of bread rose"),
        LoglikelihoodRequest(shots + "Q: " + "which statement about the revolution is most accurate? " * 3 + "\nA:", " Nothing happened"),
        LoglikelihoodRequest(shots + "Q: " + "which statement about the revolution is most accurate? " * 3 + "\nA:", " It began in 1789"),
        LoglikelihoodRequest("", "Hello world"),
        LoglikelihoodRequest("short", " one"),
    ]
    results = backend.loglikelihood(requests)
    for request, result in zip(requests, results):
        expected, greedy = reference_logprob(backend, request.context, request.continuation)
        assert result.logprob == pytest.approx(expected, abs=FLOAT32_ATOL)
        assert result.is_greedy == greedy
    # Order is preserved whatever the batch plan: single-row batches give the same numbers.
    one_by_one = load_backend("hf", path=str(tiny_dir), batch_size=1).loglikelihood(requests)
    assert [r.logprob for r in one_by_one] == pytest.approx([r.logprob for r in results], abs=FLOAT32_ATOL)


def test_unrelated_rows_are_batched_together_longest_first():
    """Zero-shot prompts share nothing: they still go to the model many at a time (once, every
    question went alone), ordered by length so little padding is computed."""
    from evalcore.models.scoring import MIN_SHARED_PREFIX, _batching_order, _plan_batches

    rows = sorted(tuple([7] * 5 + [100 + k] + [1] * (20 + 3 * k)) for k in range(12))
    order = _batching_order(rows)
    assert [len(rows[i]) for i in order] == sorted((len(r) for r in rows), reverse=True)
    assert _plan_batches(rows, order, budget=8192, max_rows=64) == [order]
    assert len(_plan_batches(rows, order, budget=8192, max_rows=5)) == 3
    # Rows sharing a long prefix (few-shot examples) stay together ahead of the others.
    shots = tuple(range(2, 2 + MIN_SHARED_PREFIX + 4))
    mixed = sorted([shots + (1,), shots + (2, 3), (9, 9, 9), (8,) * 40, shots + (5,)])
    order = _batching_order(mixed)
    assert [mixed[i][: len(shots)] == shots for i in order] == [True, True, True, False, False]
    batches = _plan_batches(mixed, order, budget=8192, max_rows=64)
    assert batches == [order[:3], order[3:]]


def test_a_shared_prefix_is_computed_once_for_many_batches_and_never_copied(tiny_dir, monkeypatch):
    """Few-shot rows split over several batches (a small token budget): the prefix runs once, its cache
    stays one row wide (joined to each batch on the fly), and every number equals a plain forward pass."""
    import evalcore.models.scoring as scoring

    backend = load_backend("hf", path=str(tiny_dir), batch_size="auto", token_budget=96)
    shots = "Q: what is one plus one?\nA: two\n\n" * 5
    requests = [
        LoglikelihoodRequest(shots + f"Q: question number {k} about topic {k * 7}?\nA:", letter)
        for k in range(8)
        for letter in (" A", " B")
    ]
    prefix_passes = []
    real = scoring.run_base

    def counting(base, **kwargs):
        cache = kwargs.get("cache")
        if cache is None:
            prefix_passes.append(kwargs["input_ids"].shape)
        else:
            assert all(layer.keys.shape[0] == 1 for layer in cache.layers)  # never repeated per row
        return real(base, **kwargs)

    monkeypatch.setattr(scoring, "run_base", counting)
    results = backend.loglikelihood(requests)
    monkeypatch.setattr(scoring, "run_base", real)
    assert len(prefix_passes) == 1
    for request, result in zip(requests, results):
        expected, greedy = reference_logprob(backend, request.context, request.continuation)
        assert result.logprob == pytest.approx(expected, abs=FLOAT32_ATOL)
        assert result.is_greedy == greedy


def test_batched_scoring_of_prompts_sharing_only_a_short_description(tiny_dir):
    backend = load_backend("hf", path=str(tiny_dir), batch_size="auto")
    description = "The following are questions about physics.\n\n"
    questions = ["Why is the sky blue?", "What is a force that acts at a distance, such as gravity?", "Mass?"]
    requests = [
        LoglikelihoodRequest(description + q + "\nAnswer:", letter) for q in questions for letter in (" A", " B")
    ]
    results = backend.loglikelihood(requests)
    for request, result in zip(requests, results):
        expected, greedy = reference_logprob(backend, request.context, request.continuation)
        assert result.logprob == pytest.approx(expected, abs=FLOAT32_ATOL)
        assert result.is_greedy == greedy


def test_rolling_windows_score_every_token_once():
    tokens = list(range(100, 123))  # prefix token + 22 tokens
    for window, stride in [(5, 5), (5, 2), (8, 3), (64, 64)]:
        pairs = rolling_windows(tokens, window=window, stride=stride)
        targets = [t for _, chunk in pairs for t in chunk]
        assert targets == tokens[1:]
        for context, chunk in pairs:
            assert len(context) + len(chunk) - 1 <= window
            assert context  # every target has at least one token of context


def test_rolling_loglikelihood_equals_full_pass_when_the_window_fits(tiny_dir):
    backend = load_backend("hf", path=str(tiny_dir))
    text = "The quick brown fox jumps over the lazy dog. " * 3
    whole = backend.loglikelihood_rolling([RollingRequest(text)])[0]
    tokens = backend.tok_encode(text)
    expected, _ = reference_logprob(backend, "", text)
    assert whole.num_tokens == len(tokens)
    assert whole.logprob == pytest.approx(expected, abs=FLOAT32_ATOL)
    windowed = backend.loglikelihood_rolling([RollingRequest(text, max_length=8, stride=8)])[0]
    assert windowed.num_tokens == len(tokens)


def test_generation_stops_at_stop_sequences_and_is_bounded(tiny_dir):
    backend = load_backend("hf", path=str(tiny_dir))
    never = GenerationRequest("Once upon a time", until=("\u2603never\u2603",), max_gen_toks=7)
    result = backend.generate_until([never])[0]
    assert result.num_tokens <= 7
    if result.finish_reason == "length":
        assert result.num_tokens == 7
    free = backend.generate_until([GenerationRequest("Once upon a time", max_gen_toks=12)])[0]
    stop = free.text[3:5]
    if stop.strip():
        cut = backend.generate_until([GenerationRequest("Once upon a time", until=(stop,), max_gen_toks=12)])[0]
        assert cut.text == free.text[: free.text.find(stop)]
        assert cut.finish_reason == "stop"


def test_batched_greedy_generation_equals_one_by_one(tiny_dir):
    backend = load_backend("hf", path=str(tiny_dir))
    shots = "Question: 1+1?\nAnswer: 2\n\n" * 8
    requests = [
        GenerationRequest(shots + "Question: 2+2?\nAnswer:", until=("\n\n",), max_gen_toks=10),
        GenerationRequest(shots + "Question: what is the largest planet in our solar system?\nAnswer:", max_gen_toks=6),
        GenerationRequest("Hello", max_gen_toks=4),
        GenerationRequest(shots + "Question: 3?\nAnswer:", until=("Question:",), max_gen_toks=9),
    ]
    batched = backend.generate_until(requests)
    singles = [backend.generate_until([r])[0] for r in requests]
    assert [r.text for r in batched] == [r.text for r in singles]
    assert all(r.num_tokens <= q.max_gen_toks for r, q in zip(batched, requests))


def test_lookup_draft_copies_what_followed_the_last_ngram():
    from evalcore.models.generation import lookup_draft

    history = [5, 6, 7, 8, 9, 1, 2, 5, 6, 7]
    assert lookup_draft(history, max_tokens=3) == [8, 9, 1]  # "5 6 7" was followed by "8 9 1"
    assert lookup_draft([1, 2, 3, 4], max_tokens=3) == []  # nothing repeats
    assert lookup_draft([0] * 20, max_tokens=8) == [0] * 8  # a loop predicts itself in full
    assert lookup_draft([3, 4, 9, 4], max_tokens=2) == [9, 4]  # falls back to a shorter n-gram
    assert lookup_draft(history, max_tokens=0) == []


def test_speculative_greedy_generation_equals_plain_greedy_steps(tiny_dir, monkeypatch):
    """A lone greedy row proposes copied drafts and checks them in one pass: the text must be
    exactly what one-token greedy steps give, in fewer passes."""
    import evalcore.models.generation as generation

    backend = load_backend("hf", path=str(tiny_dir))
    prompt = "one two three four one two three four one two three four one two"
    requests = [
        GenerationRequest(prompt, max_gen_toks=40),
        GenerationRequest(prompt, until=(" four one",), max_gen_toks=40),
    ]
    passes = []
    real_run_base = generation.run_base

    def counting_run_base(base, **kwargs):
        passes.append(kwargs["input_ids"].shape[1])
        return real_run_base(base, **kwargs)

    monkeypatch.setattr(generation, "run_base", counting_run_base)
    fast = [backend.generate_until([r])[0] for r in requests]
    speculative_passes = len(passes)
    monkeypatch.setattr(generation, "SPECULATE_TOKENS", 0)
    passes.clear()
    plain = [backend.generate_until([r])[0] for r in requests]
    assert [(r.text, r.num_tokens, r.finish_reason) for r in fast] == [
        (r.text, r.num_tokens, r.finish_reason) for r in plain
    ]
    assert speculative_passes < len(passes)  # drafts were accepted
    # Plain steps agree with a forward pass over the whole text at every position (no cache at all).
    ids = backend.tok_encode(prompt)
    with torch.inference_mode():
        for _ in range(plain[0].num_tokens):
            ids.append(int(backend.model(torch.tensor([ids])).logits[0, -1].argmax()))
    assert backend.tok_decode(ids[len(backend.tok_encode(prompt)) :]) == plain[0].text


def test_seeded_sampling_is_reproducible_whatever_the_batch(tiny_dir):
    backend = load_backend("hf", path=str(tiny_dir))
    request = GenerationRequest("Once", max_gen_toks=8, do_sample=True, temperature=1.0, seed=7)
    other = GenerationRequest("Twice upon", max_gen_toks=8, do_sample=True, temperature=1.0, seed=8)
    alone = backend.generate_until([request])[0].text
    together = backend.generate_until([other, request])[1].text
    assert alone == together


def test_refuses_pickle_weights_missing_weights_and_remote_code(tmp_path, tiny_dir):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no \\*.safetensors"):
        load_backend("hf", path=str(empty))
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    (pickled / "pytorch_model.bin").write_bytes(b"not really")
    (pickled / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="pickle"):
        load_backend("hf", path=str(pickled))
    with pytest.raises(ValueError, match="not a folder"):
        load_backend("hf", path=str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="trust_remote_code"):
        load_backend("hf", path=str(tiny_dir), trust_remote_code="true")
    with pytest.raises(ValueError, match="dtype"):
        load_backend("hf", path=str(tiny_dir), dtype="float8")


def test_identity_hashes_weights_and_changes_with_run_settings(tmp_path, tiny_dir):
    a = load_backend("hf", path=str(tiny_dir), batch_size=4).identity
    b = load_backend("hf", path=str(tiny_dir), batch_size=8).identity
    assert a.weights_sha256 == b.weights_sha256 and len(a.weights_sha256) == 64
    assert a.key != b.key
    copy = tmp_path / "copy"
    shutil.copytree(tiny_dir, copy)
    with open(copy / "model.safetensors", "r+b") as handle:
        handle.seek(-1, 2)
        last = handle.read(1)
        handle.seek(-1, 2)
        handle.write(bytes([last[0] ^ 1]))
    assert load_backend("hf", path=str(copy), batch_size=4).identity.weights_sha256 != a.weights_sha256


def test_registry_and_model_args():
    assert parse_model_args("path=/m,dtype=float32") == {"path": "/m", "dtype": "float32"}
    with pytest.raises(ValueError, match="key=value"):
        parse_model_args("path")
    assert parse_model_args("threads=1,add_bos_token=TRUE,max_length=2048,path=/m/007") == {
        "threads": 1, "add_bos_token": True, "max_length": 2048, "path": "/m/007"}  # fmt: skip
    with pytest.raises(ValueError, match="given twice"):
        parse_model_args("dtype=float32,dtype=float16")
    with pytest.raises(ValueError, match="identifier"):
        parse_model_args("max retries=3")
    with pytest.raises(ValueError, match="unknown model backend"):
        backend_class("nope")


def test_chat_params_validation():
    assert ChatParams.from_mapping({"max_tokens": 5, "system_prompt": None}).max_new_tokens == 5
    with pytest.raises(ValueError, match="unknown chat parameter"):
        ChatParams.from_mapping({"temprature": 0.5})


@pytest.mark.slow
def test_smollm2_greedy_answers_paris(smollm2):
    result = smollm2.generate_until([GenerationRequest("The capital of France is", until=("\n",), max_gen_toks=8)])[0]
    assert result.text == " Paris."
    scored = smollm2.loglikelihood([LoglikelihoodRequest("The capital of France is", " Paris")])[0]
    assert scored.is_greedy


@pytest.mark.slow
def test_smollm2_stream_chat_yields_deltas_of_the_whole_answer(smollm2):
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    deltas = list(smollm2.stream_chat(messages, {"max_new_tokens": 24, "temperature": 0}))
    assert len(deltas) > 3
    assert "Paris" in "".join(deltas)
    assert "".join(deltas) == smollm2.chat(messages, ChatParams(max_new_tokens=24))
    stopped = "".join(smollm2.stream_chat(messages, {"max_new_tokens": 24, "stop": ["Paris"]}))
    assert "Paris" not in stopped
    with pytest.raises(ValueError, match="role"):
        list(smollm2.stream_chat([{"role": "robot", "content": "hi"}]))
