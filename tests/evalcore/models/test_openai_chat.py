"""The ``openai-chat`` backend and the run options that come with it: hostile options refused in one
line before anything is sent, endpoint errors and malformed answers reported clearly (and a request
cache keeps every answer received before the failure), log-likelihood tasks refused on a chat-only
endpoint, and ``--predict-only`` then ``evalcore rescore`` giving a normal run's scores (the real
SmolLM2 behind ``python -m evalcore serve``)."""

from __future__ import annotations

import json
import textwrap

import pytest

from evalcore.cli import main
from evalcore.engine import TaskIndex, evaluate
from evalcore.engine.cache import CachedBackend, RequestCache
from evalcore.engine.chat import parse_gen_kwargs
from evalcore.models import GenerationRequest, LoglikelihoodRequest, load_backend
from evalcore.models.endpoint import EndpointError
from tests.evalcore.models.test_openai_backend import scripted  # noqa: F401 - a fixture
from tests.evalcore.models.test_serve import serve_process


def chat_answer(text: str, reason: str = "stop") -> tuple:
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": reason}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}  # fmt: skip
    return 200, body, None


@pytest.fixture
def gen_task(tmp_path):
    """A three-document generation task with a description and inline few-shot examples."""
    docs = [{"q": f"What is {i} + {i}?", "a": str(2 * i)} for i in range(1, 4)]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (tmp_path / "add.yaml").write_text(
        textwrap.dedent(f"""
        task: add
        dataset_path: {tmp_path / "d.jsonl"}
        test_split: train
        output_type: generate_until
        description: "Add the numbers."
        doc_to_text: "Q: {{{{q}}}}\\nA:"
        doc_to_target: "{{{{a}}}}"
        num_fewshot: 2
        fewshot_config: {{sampler: first_n, samples: [{{q: "What is 5 + 5?", a: "10"}}, {{q: "What is 7 + 1?", a: "8"}}]}}
        generation_kwargs: {{until: ["\\n"], max_gen_toks: 8}}
        metric_list: [{{metric: exact_match}}]
    """)
    )
    return tmp_path


BAD_GEN_KWARGS = [
    ("temperature=hot", "temperature must be a number"),
    ("top_p=1.5", "top_p must be in (0, 1]"),
    ("max_gen_toks=0", "max_gen_toks must be a whole number"),
    ("max_tokens=2.5", "max_gen_toks must be a whole number"),
    ("beam_width=4", "unknown key 'beam_width'"),
    ("temperature", "is not of the form key=value"),
    ('{"until": [1, 2]}', "until/stop must be a non-empty string or a list of them"),
    ('{"until": ', "--gen-kwargs is not valid JSON"),
    ("[1, 2]", "is not of the form key=value"),
    ("max_tokens=8,max_gen_toks=9", "'max_gen_toks' given twice"),
    ('{"temperature": NaN}', "temperature must be a finite number"),
    ("temperature=nan", "temperature must be a number, got 'nan'"),
    ("do_sample=yes", "do_sample must be true or false"),
]


@pytest.mark.parametrize(("text", "message"), BAD_GEN_KWARGS)
def test_hostile_gen_kwargs_are_one_line_before_any_request(text, message, scripted, capsys):  # noqa: F811
    script, url = scripted(chat_answer("x"))
    code = main(["run", "--model", "openai-chat", "--model-args", f"base_url={url}", "--tasks", "gsm8k",
                 "--gen-kwargs", text])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: --gen-kwargs") and message in err and "\n" not in err
    assert script.seen == []  # nothing was sent


def test_gen_kwargs_aliases_and_sampling():
    assert parse_gen_kwargs("max_tokens=64,stop=Q:,temperature=0.5") == {
        "max_gen_toks": 64, "until": ["Q:"], "temperature": 0.5, "do_sample": True}  # fmt: skip
    assert parse_gen_kwargs('{"stop": ["\\n\\n", "Q:"], "temperature": 0}') == {
        "until": ["\n\n", "Q:"], "temperature": 0.0, "do_sample": False}  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model", "hf", "--model-args", "path=/nonexistent", "--fewshot-as-multiturn"], "--fewshot-as-multiturn needs"),
        (["--model", "hf", "--model-args", "path=/nonexistent", "--fewshot-as-multiturn", "true"], "--fewshot-as-multiturn needs"),
        (["--model", "openai-chat", "--model-args", "base_url=http://127.0.0.1:9/v1", "--predict-only"],
         "--predict-only needs --output-dir"),
        (["--model", "openai-chat", "--model-args", "base_url=http://127.0.0.1:9/v1", "--system-instruction", " "],
         "--system-instruction is empty"),
    ],
)  # fmt: skip
def test_chat_options_are_checked_first(argv, message, capsys):
    assert main(["run", *argv, "--tasks", "gsm8k"]) == 2
    assert message in capsys.readouterr().err


def test_the_payload_and_the_answer(scripted, gen_task):  # noqa: F811
    script, url = scripted(
        chat_answer("<think>1+1</think> 2\nQ: more"), chat_answer("4"), chat_answer("6", "length")
    )
    backend = load_backend("openai-chat", base_url=url, model="m", think_end_token="</think>")
    tasks, _ = TaskIndex([gen_task], bundled=False).resolve(["add"])
    run = evaluate(
        backend,
        tasks,
        system_instruction="Be exact.",
        fewshot_as_multiturn=True,
        gen_kwargs="temperature=0.5,top_p=0.9",
    )
    records = run.tasks["add"].records
    assert [r["responses"] for r in records] == [
        ["2"],
        ["4"],
        ["6"],
    ]  # after the thinking, before the stop string
    assert records[2]["finish_reasons"] == ["length"]
    _, body = script.seen[0]
    assert body["messages"] == [
        {"role": "system", "content": "Be exact.\n\nAdd the numbers."},
        {"role": "user", "content": "Q: What is 5 + 5?\nA:"}, {"role": "assistant", "content": "10"},
        {"role": "user", "content": "Q: What is 7 + 1?\nA:"}, {"role": "assistant", "content": "8"},
        {"role": "user", "content": "Q: What is 1 + 1?\nA:"},
    ]  # fmt: skip
    assert {k: body[k] for k in ("model", "max_tokens", "temperature", "top_p", "stop")} == {
        "model": "m", "max_tokens": 8, "temperature": 0.5, "top_p": 0.9, "stop": ["\n"]}  # fmt: skip
    protocol = run.tasks["add"].protocol
    assert (
        protocol["chat"]["system_instruction"] == "Be exact."
        and protocol["chat"]["fewshot_as_multiturn"] is True
    )
    assert protocol["gen_kwargs"] == {"temperature": 0.5, "top_p": 0.9, "do_sample": True}
    assert protocol["decoding"]["temperature"] == 0.5 and protocol["decoding"]["max_gen_toks"] == 8
    assert (
        run.settings["system_instruction"] == "Be exact." and run.model["extra"]["api"] == "chat/completions"
    )


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ((200, {"choices": []}, None), "has no choices"),
        ((200, {"choices": [{"message": {"content": None}, "finish_reason": "content_filter"}]}, None),
         "answered without a text message (finish_reason 'content_filter'"),
        ((200, {"choices": [{"message": "oops"}]}, None), "answered without a text message"),
        ((200, ["not", "an", "object"], None), "is not a JSON object"),
        ((400, {"error": {"message": "messages: bad role"}}, None), "failed with HTTP 400: messages: bad role"),
    ],
)  # fmt: skip
def test_malformed_answers_are_clear_and_earlier_answers_kept(answer, message, scripted, gen_task, tmp_path):  # noqa: F811
    script, url = scripted(chat_answer("2"), chat_answer("4"), answer)
    cache = RequestCache(tmp_path / "cache.sqlite3")
    backend = CachedBackend(load_backend("openai-chat", base_url=url, model="m", max_retries=0), cache)
    tasks, _ = TaskIndex([gen_task], bundled=False).resolve(["add"])
    with pytest.raises(EndpointError, match=message.replace("(", r"\(").replace(")", r"\)")):
        evaluate(backend, tasks)
    script.answers[:] = [chat_answer("6")]  # the endpoint recovers: a rerun asks only for what is missing
    run = evaluate(backend, tasks)
    assert [r["responses"] for r in run.tasks["add"].records] == [["2"], ["4"], ["6"]]
    assert backend.hits == 2 and len(script.seen) == 4


def test_loglikelihood_tasks_are_refused_on_a_chat_only_endpoint(scripted, tmp_path):  # noqa: F811
    script, url = scripted(chat_answer("x"))
    (tmp_path / "d.jsonl").write_text('{"q": "Sky?", "c": ["blue", "green"], "a": 0}\n')
    (tmp_path / "mc.yaml").write_text(f"task: mc\ndataset_path: {tmp_path / 'd.jsonl'}\ntest_split: train\n"
                                      "output_type: multiple_choice\ndoc_to_text: q\ndoc_to_choice: c\ndoc_to_target: a\n")  # fmt: skip
    tasks, _ = TaskIndex([tmp_path], bundled=False).resolve(["mc"])
    backend = load_backend("openai-chat", base_url=url, model="m")
    with pytest.raises(ValueError, match=r"tasks \['mc'\] score log-likelihoods.*completions_logprobs=true"):
        evaluate(backend, tasks)
    with pytest.raises(ValueError, match="not available from a chat-completions endpoint"):
        backend.loglikelihood([LoglikelihoodRequest("Sky?", " blue")])
    assert script.seen == []
    with pytest.raises(ValueError, match="unknown openai-chat backend argument.*completions_logprobs"):
        load_backend("openai-chat", base_url=url, completion_logprobs=True)


@pytest.fixture(scope="module")
def endpoint(smollm2_dir):
    host, port = serve_process(str(smollm2_dir))
    return f"http://{host}:{port}/v1"


def test_completions_logprobs_scores_through_the_same_server(endpoint):
    requests = [
        LoglikelihoodRequest("The capital of France is", " Paris"),
        LoglikelihoodRequest("2 + 2 =", " 4"),
    ]
    chat = load_backend("openai-chat", base_url=endpoint, completions_logprobs=True)
    plain = load_backend("openai", base_url=endpoint)
    ours, theirs = chat.loglikelihood(requests), plain.loglikelihood(requests)
    assert [r.logprob for r in ours] == pytest.approx([r.logprob for r in theirs], abs=1e-4)
    assert [r.is_greedy for r in ours] == [r.is_greedy for r in theirs]
    answer = chat.generate_until([GenerationRequest("Say hi.", max_gen_toks=4)])  # no messages: one user turn
    assert answer[0].num_tokens >= 1


@pytest.mark.slow
def test_predict_only_then_rescore_equals_a_normal_run(endpoint, tmp_path, capsys):
    common = ["run", "--model", "openai-chat", "--model-args", f"base_url={endpoint},concurrency=2",
              "--tasks", "bbh_cot_fewshot_date_understanding", "--limit", "2", "--num-fewshot", "0",
              "--gen-kwargs", '{"max_gen_toks": 24, "until": ["\\n\\n", "Q:"]}', "--no-progress"]  # fmt: skip
    assert main([*common, "--predict-only", "--output-dir", str(tmp_path / "predicted")]) == 0
    assert main([*common, "--output-dir", str(tmp_path / "scored"), "--log-samples"]) == 0
    predicted = json.loads((tmp_path / "predicted" / "results.json").read_text())
    task = "bbh_cot_fewshot_date_understanding"
    assert predicted["results"] == {task: {"alias": task}} and predicted["intervals"] == {task: {}}
    assert predicted["protocol"][task]["predict_only"] is True
    samples = tmp_path / "predicted" / f"samples_{task}.jsonl"
    lines = [json.loads(line) for line in samples.read_text().splitlines()]
    assert len(lines) == 2 and all("metrics" not in line and line["responses"] for line in lines)
    assert all(line["messages"][-1]["role"] == "user" for line in lines)
    capsys.readouterr()
    rescore = ["rescore", str(samples), "--task", task, "--output", str(tmp_path / "rescored.json")]
    assert main([*rescore, "--samples-out", str(tmp_path / "rescored.jsonl")]) == 0
    rescored = json.loads((tmp_path / "rescored.json").read_text())["intervals"][task]
    normal = json.loads((tmp_path / "scored" / "results.json").read_text())
    scored_lines = [
        json.loads(line) for line in (tmp_path / "scored" / f"samples_{task}.jsonl").read_text().splitlines()
    ]
    assert [line["responses"] for line in scored_lines] == [line["responses"] for line in lines]
    rescored_lines = [json.loads(line) for line in (tmp_path / "rescored.jsonl").read_text().splitlines()]
    for mine, theirs in zip(rescored_lines, scored_lines, strict=True):
        assert mine["filtered"] == theirs["filtered"] and mine["metrics"] == theirs["metrics"]
    assert set(rescored) == set(normal["intervals"][task]) and rescored
    for key, value in normal["intervals"][task].items():
        assert rescored[key]["value"] == pytest.approx(value["value"], abs=1e-4)
        assert rescored[key]["n"] == value["n"] == 2
    assert normal["protocol"][task]["gen_kwargs"] == {"max_gen_toks": 24, "until": ["\n\n", "Q:"]}
