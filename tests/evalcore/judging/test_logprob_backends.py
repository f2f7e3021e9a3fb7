"""Log-prob verdicts through the other backends: the openai backend against ``python -m evalcore serve``
(real SmolLM2; p_first must equal the hf backend's), a tiny real server whose top-k cut leaves out a
verdict token (that judgment fails, never 0.5), and the vllm backend's checks that run without vllm."""

from __future__ import annotations

import pytest

from evalcore.judging import judge_pairs, load_protocol, read_pairs
from evalcore.models import load_backend
from evalcore.models.vllm_backend import VLLMBackend
from tests.conftest import FLOAT32_ATOL
from tests.evalcore.models.test_openai_backend import scripted  # noqa: F401 - a fixture
from tests.evalcore.models.test_serve import launch_serve, serve_process


@pytest.fixture(scope="module")
def short_pairs(llmbar):
    pairs = read_pairs(llmbar)
    return sorted(pairs, key=lambda p: len(p.question) + len(p.answer_1) + len(p.answer_2))[:2]


def test_openai_backend_log_prob_verdicts_equal_the_hf_backend(judge, short_pairs, smollm2_dir):
    launch_serve(str(smollm2_dir))
    host, port = serve_process(str(smollm2_dir))
    remote = load_backend("openai", base_url=f"http://{host}:{port}/v1", tokenizer=str(smollm2_dir),
                          top_logprobs="20", concurrency=2)  # fmt: skip
    protocol = load_protocol("alpacaeval-logprob", tokenizer=remote.tokenizer)
    got = judge_pairs(remote, protocol, short_pairs[:1])
    want = judge_pairs(judge, protocol, short_pairs[:1])
    assert [j.status for j in got] == ["ok"] * 2, [j.error for j in got]
    for a, b in zip(got, want):
        assert (a.pair_id, a.order, a.prompt_sha256) == (b.pair_id, b.order, b.prompt_sha256)
        assert a.p_first == pytest.approx(b.p_first, abs=FLOAT32_ATOL)


def _top(entries: dict) -> tuple:
    choice = {"text": "A", "finish_reason": "length", "logprobs": {"tokens": ["A"], "token_logprobs": [-0.1],
                                                                   "top_logprobs": [entries]}}  # fmt: skip
    return 200, {"choices": [choice]}, None


def test_a_verdict_token_outside_the_top_k_fails_that_judgment(scripted, judge, short_pairs,  # noqa: F811
                                                               smollm2_dir):
    protocol = load_protocol("alpacaeval-logprob", tokenizer=judge.tokenizer)
    id_a, id_b = protocol.verdict_token_ids(judge.tokenizer)
    script, url = scripted(_top({"A": -0.2, "B": -1.9}), _top({"A": -0.1, "C": -3.0}),
                           _top({f"token_id:{id_a}": -0.7, f"token_id:{id_b}": -0.7}),
                           (200, {"choices": [{"text": "A", "logprobs": None}]}, None))  # fmt: skip
    remote = load_backend("openai", base_url=url, model="m", tokenizer=str(smollm2_dir), top_logprobs=2)
    judgments = judge_pairs(remote, protocol, short_pairs)
    assert [j.status for j in judgments] == ["ok", "failed", "ok", "failed"]
    assert judgments[0].p_first == pytest.approx(1 / (1 + 2.718281828459045 ** (-1.9 + 0.2)))
    assert "'B' is not among the 2 likeliest next tokens" in judgments[1].error and judgments[1].p_first is None
    assert judgments[2].p_first == 0.5  # both tokens given by id, equally likely
    assert "no top_logprobs" in judgments[3].error
    sent = script.seen[0][1]
    assert sent["prompt"] == [int(i) for i in sent["prompt"]] and sent["max_tokens"] == 1 and sent["logprobs"] == 2


def test_log_prob_protocols_refuse_a_backend_without_a_tokenizer(scripted, judge, short_pairs):  # noqa: F811
    _, url = scripted(_top({"A": -0.2, "B": -1.9}))
    protocol = load_protocol("alpacaeval-logprob", tokenizer=judge.tokenizer)
    with pytest.raises(ValueError, match="pass tokenizer=DIR"):
        judge_pairs(load_backend("openai", base_url=url, model="m"), protocol, short_pairs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"top_logprobs": "0"}, "top_logprobs must be from 1 to 100"),
        ({"top_logprobs": "many"}, "top_logprobs must be an integer"),
        ({"top_logprobs": True}, "top_logprobs must be a number"),
        ({"tokenizer": "/nonexistent/tokenizer"}, "tokenizer must be a folder"),
    ],
)
def test_openai_next_token_arguments_are_checked(kwargs, message):
    with pytest.raises(ValueError, match=message):
        load_backend("openai", base_url="http://127.0.0.1:9/v1", **kwargs)


def test_vllm_next_token_logprobs_refuses_a_prompt_over_its_window():
    backend = object.__new__(VLLMBackend)  # no engine: only the checks made before vLLM is called
    backend.max_length = 8
    (result,) = backend.next_token_logprobs([list(range(8))], [1, 2])
    assert isinstance(result, ValueError) and "more than the window allows (7)" in str(result)
