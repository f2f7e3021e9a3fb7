"""``python -m evalcore serve`` speaks the completions API that real clients send: every prompt form
(a string, strings, token ids, token-id lists), ``usage`` everywhere, ``echo`` + ``logprobs`` with
``max_tokens: 0`` or 1; and lm-evaluation-harness's own ``local-completions`` model, pointed at the
server, gets the ``hf`` backend's log-likelihoods on real MMLU questions (within 1e-4)."""

from __future__ import annotations

import csv
import http.client
import json

import pytest

from evalcore.models import LoglikelihoodRequest
from tests.evalcore.models.test_serve import MODEL_NAME, request, serve_process

TOLERANCE = 1e-4  # different batch shapes and kernels (tests/README policy)


@pytest.fixture(scope="module")
def served(smollm2_dir):
    return serve_process(str(smollm2_dir))


@pytest.fixture(scope="module")
def tokenizer(smollm2_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(smollm2_dir), local_files_only=True)


def complete(served, **fields) -> dict:
    status, body = request(served, "POST", "/v1/completions", {"model": MODEL_NAME, **fields})
    assert status == 200, body
    return body


def test_every_prompt_form_gives_one_choice_per_prompt_with_usage(served, tokenizer):
    texts = ["The capital of France is", "One, two, three,"]
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    echo = {"echo": True, "max_tokens": 0, "logprobs": 1}
    by_text = complete(served, prompt=texts, **echo)
    by_ids = complete(served, prompt=ids, **echo)
    single = complete(served, prompt=ids[1], **echo)
    one_text = complete(served, prompt=texts[1], **echo)
    assert [c["index"] for c in by_text["choices"]] == [0, 1] == [c["index"] for c in by_ids["choices"]]
    assert len(single["choices"]) == 1 == len(one_text["choices"])
    for answer in (by_text, by_ids):
        assert answer["usage"] == {"prompt_tokens": len(ids[0]) + len(ids[1]), "completion_tokens": 0,
                                   "total_tokens": len(ids[0]) + len(ids[1])}  # fmt: skip
    pairs = [*zip(by_text["choices"], by_ids["choices"]), (one_text["choices"][0], single["choices"][0])]
    for from_text, from_ids in pairs:
        a, b = from_text["logprobs"], from_ids["logprobs"]
        assert from_text["text"] == from_ids["text"] and a["tokens"] == b["tokens"]
        assert a["token_logprobs"][0] is None and b["token_logprobs"][0] is None
        assert a["text_offset"] == b["text_offset"] and a["text_offset"][0] == 0
        assert b["token_logprobs"][1:] == pytest.approx(a["token_logprobs"][1:], abs=TOLERANCE)
    assert by_ids["choices"][1]["logprobs"]["token_logprobs"] == single["choices"][0]["logprobs"]["token_logprobs"]
    from_text = complete(served, prompt=[texts[1], texts[1]], max_tokens=4, temperature=0)
    from_ids = complete(served, prompt=[ids[1]], max_tokens=4, temperature=0)
    first, second = from_text["choices"]
    assert first["text"] == second["text"] == from_ids["choices"][0]["text"] and first["text"]
    assert from_text["usage"]["completion_tokens"] == 2 * from_ids["usage"]["completion_tokens"] >= 2
    assert from_text["usage"]["prompt_tokens"] == 2 * from_ids["usage"]["prompt_tokens"] == 2 * len(ids[1])


def test_echo_with_one_new_token_scores_the_prompt_then_the_token(served, tokenizer):
    ids = tokenizer("Question: 2+2?\nAnswer: 4", add_special_tokens=False)["input_ids"]
    body = complete(served, prompt=[ids], echo=True, max_tokens=1, logprobs=1, temperature=0, seed=1234)
    (choice,) = body["choices"]
    logprobs = choice["logprobs"]
    assert len(logprobs["token_logprobs"]) == len(ids) + 1  # the prompt's tokens, then the new one
    assert logprobs["token_logprobs"][0] is None and logprobs["top_logprobs"][0] is None
    assert all(isinstance(top, dict) and len(top) == 1 for top in logprobs["top_logprobs"][1:])
    assert logprobs["text_offset"] == sorted(logprobs["text_offset"])
    assert choice["text"].startswith(tokenizer.decode(ids)) and body["usage"]["completion_tokens"] == 1
    plain = complete(served, prompt=ids, max_tokens=1, logprobs=1, temperature=0)["choices"][0]
    assert plain["logprobs"]["tokens"] == logprobs["tokens"][-1:] and plain["logprobs"]["text_offset"] == [0]
    assert plain["logprobs"]["token_logprobs"] == pytest.approx(logprobs["token_logprobs"][-1:], abs=TOLERANCE)


def test_chat_answers_carry_usage_plain_and_streamed(served, tokenizer):
    chat = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 6,
            "temperature": 0}  # fmt: skip
    status, body = request(served, "POST", "/v1/chat/completions", chat)
    assert status == 200, body
    rendered = tokenizer.apply_chat_template(chat["messages"], tokenize=False, add_generation_prompt=True)
    prompt_tokens = len(tokenizer(rendered, add_special_tokens=False)["input_ids"])
    text = body["choices"][0]["message"]["content"]
    completion_tokens = len(tokenizer(text, add_special_tokens=False)["input_ids"])
    assert body["usage"] == {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                             "total_tokens": prompt_tokens + completion_tokens}  # fmt: skip
    connection = http.client.HTTPConnection(*served, timeout=60)
    connection.request("POST", "/v1/chat/completions", body=json.dumps({**chat, "stream": True}),
                       headers={"Content-Type": "application/json"})
    events = [e[6:] for e in connection.getresponse().read().decode().split("\n\n") if e.startswith("data: ")]
    connection.close()
    assert events[-1] == "[DONE]" and json.loads(events[-2])["usage"] == body["usage"]
    streamed = complete(served, prompt=["Hi", "Yo"], max_tokens=2, stream=True)  # raw SSE text
    last = [e[6:] for e in streamed.split("\n\n") if e.startswith("data: ")][-2]
    assert json.loads(last)["usage"]["completion_tokens"] >= 2


def test_a_token_id_prompt_longer_than_the_window_is_a_clear_400(served):
    body = {"model": MODEL_NAME, "prompt": [[5] * 9000], "echo": True, "max_tokens": 0, "logprobs": 0}
    status, answer = request(served, "POST", "/v1/completions", body)
    assert status == 400 and "longer than the model's 8192-token window" in answer["error"]["message"]
    assert request(served, "GET", "/v1/models")[0] == 200  # still serving


def mmlu_requests(shared_data, n_docs: int = 3) -> list[tuple[str, str]]:
    """(context, continuation) pairs of the first MMLU astronomy test questions, letter style."""
    path = shared_data / "benchmarks" / "mmlu" / "test" / "astronomy_test.csv"
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))[:n_docs]
    pairs = []
    for row in rows:
        options = "".join(f"{letter}. {row[f'choice{i}']}\n" for i, letter in enumerate("ABCD"))
        context = f"The following are multiple choice questions about astronomy.\n\n{row['question']}\n{options}Answer:"
        pairs.extend((context, f" {letter}") for letter in "ABCD")
    return pairs


def test_lm_eval_local_completions_gets_the_hf_backends_loglikelihoods(served, smollm2, smollm2_dir, shared_data):
    from lm_eval.api.instance import Instance
    from lm_eval.models.openai_completions import LocalCompletionsAPI

    pairs = mmlu_requests(shared_data) + [("", "Hello world")]  # an empty context: lm-eval's prefix token
    harness = LocalCompletionsAPI(
        base_url=f"http://{served[0]}:{served[1]}/v1/completions", model=MODEL_NAME,
        tokenizer_backend="huggingface", tokenizer=str(smollm2_dir), batch_size=4, max_retries=1,
    )  # fmt: skip
    instances = [Instance("loglikelihood", {}, pair, idx) for idx, pair in enumerate(pairs)]
    theirs = harness.loglikelihood(instances, disable_tqdm=True)
    ours = smollm2.loglikelihood([LoglikelihoodRequest(c, x) for c, x in pairs])
    assert len(theirs) == len(ours) == len(pairs) == 13
    for (logprob, greedy), want in zip(theirs, ours):
        assert logprob == pytest.approx(want.logprob, abs=TOLERANCE)
        assert greedy == want.is_greedy
