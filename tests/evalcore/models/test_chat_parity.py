"""lm-evaluation-harness 0.4.13's own ``local-chat-completions`` client and Podium's ``openai-chat``
backend, both against ``python -m evalcore serve`` with the real SmolLM2-135M-Instruct, on the
harness's own task files (GSM8K, BBH date_understanding chain-of-thought; the data location is all
that is overridden): the same conversations per document (system instruction, few-shot as one user
turn or as alternating turns), the same request settings, and the same answers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evalcore.engine import TaskIndex, evaluate_task
from evalcore.models import GenerationRequest, load_backend
from tests.evalcore.models.test_serve import MODEL_NAME, serve_process

SHARED = Path("/work/shared/data/benchmarks")
N_DOCS = 2
GEN_KWARGS = {"max_gen_toks": 16}


def _harness_tasks() -> Path:
    import lm_eval

    return Path(lm_eval.__file__).parent / "tasks"


def _write_case(case: str, folder: Path) -> str:
    """The harness's task file, included unchanged but for the data location; returns the task name."""
    folder.mkdir(parents=True, exist_ok=True)
    tasks = _harness_tasks()
    if case == "gsm8k":
        shutil.copy(tasks / "gsm8k" / "gsm8k.yaml", folder / "gsm8k.yaml")
        (folder / "test.jsonl").write_text(
            "".join((SHARED / "gsm8k" / "test.jsonl").read_text().splitlines(True)[:N_DOCS])
        )
        splits = {"train": SHARED / "gsm8k" / "train.jsonl", "test": folder / "test.jsonl"}
        included = "gsm8k.yaml"
    else:
        for name in ("_cot_fewshot_template_yaml", "date_understanding.yaml"):
            shutil.copy(tasks / "bbh" / "cot_fewshot" / name, folder / name)
        examples = json.loads((SHARED / "bbh" / "date_understanding.json").read_text())["examples"][:N_DOCS]
        (folder / "test.jsonl").write_text("".join(json.dumps(e) + "\n" for e in examples))
        splits = {"test": folder / "test.jsonl"}
        included = "date_understanding.yaml"
    task = f"podium_chat_{case}"
    data_files = "".join(f"    {split}: {path}\n" for split, path in splits.items())
    (folder / f"{task}.yaml").write_text(
        f"include: {included}\ntask: {task}\ndataset_path: json\ndataset_name: null\n"
        f"dataset_kwargs:\n  data_files:\n{data_files}"
    )
    return task


# case -> (system instruction, few-shot as multi-turn, few-shot count)
CASES = {
    "gsm8k": ("Solve the problem; end with '#### <number>'.", False, 2),
    "bbh_date_understanding": (None, True, 2),
}


@pytest.fixture(scope="module")
def harness_tasks(tmp_path_factory):
    """Both cases' folders and one harness TaskManager over them (indexing its tasks takes seconds)."""
    from lm_eval.tasks import TaskManager

    root = tmp_path_factory.mktemp("harness_chat_tasks")
    names = {case: _write_case(case, root / case) for case in CASES}
    return root, names, TaskManager(include_path=str(root))


@pytest.fixture(scope="module")
def endpoint(smollm2_dir):
    host, port = serve_process(str(smollm2_dir))
    return f"http://{host}:{port}/v1"


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_lm_eval_local_chat_completions_and_openai_chat_agree_per_document(case, endpoint, harness_tasks):
    from lm_eval import simple_evaluate
    from lm_eval.models.openai_completions import LocalChatCompletion

    system_instruction, multiturn, shots = CASES[case]
    root, names, manager = harness_tasks
    task = names[case]
    harness = LocalChatCompletion(base_url=f"{endpoint}/chat/completions", model=MODEL_NAME, max_retries=1)
    theirs = simple_evaluate(
        model=harness, tasks=[task], task_manager=manager, limit=N_DOCS,
        num_fewshot=shots, apply_chat_template=True, fewshot_as_multiturn=multiturn,
        system_instruction=system_instruction, gen_kwargs=dict(GEN_KWARGS), log_samples=True, bootstrap_iters=0,
        random_seed=0, fewshot_random_seed=1234,
    )  # fmt: skip
    rows = {}
    for row in theirs["samples"][task]:
        rows.setdefault(row["doc_id"], row)

    ours_backend = load_backend("openai-chat", base_url=endpoint, concurrency=2, max_retries=1)
    (config,), _ = TaskIndex([root / case], bundled=False, trust_task_code=True).resolve([task])
    ours = evaluate_task(ours_backend, config, limit=N_DOCS, num_fewshot=shots, system_instruction=system_instruction,
                         fewshot_as_multiturn=multiturn, gen_kwargs=dict(GEN_KWARGS), seed=0, fewshot_seed=1234)  # fmt: skip

    assert sorted(rows) == [r["doc_id"] for r in ours.records] == list(range(N_DOCS))
    for record in ours.records:
        row = rows[record["doc_id"]]
        (context, settings), *_ = row["arguments"]
        messages = json.loads(
            context if isinstance(context, str) else context[0]
        )  # the harness's JsonChatStr
        where = f"{case} doc {record['doc_id']}"
        assert record["messages"] == messages, f"{where}: the conversations differ"
        assert json.loads(record["prompt"]) == messages
        roles = [m["role"] for m in messages]
        assert roles[0] == ("system" if system_instruction or config.get("description") else "user")
        assert roles.count("assistant") == (shots if multiturn else 0), f"{where}: {roles}"
        if system_instruction:
            assert messages[0]["content"].startswith(system_instruction)
        assert record["responses"] == [row["resps"][0][0]], f"{where}: the answers differ"
        assert settings["max_gen_toks"] == GEN_KWARGS["max_gen_toks"]
    # The same requests: what Podium posts is what the harness posted (its seed aside).
    first = ours.records[0]
    request_settings = dict(rows[0]["arguments"][0][1])
    payload = ours_backend.chat_payload(GenerationRequest(
        context=first["prompt"], messages=tuple((m["role"], m["content"]) for m in first["messages"]),
        until=tuple(request_settings["until"]), max_gen_toks=GEN_KWARGS["max_gen_toks"],
    ))  # fmt: skip
    assert (
        payload["stop"] == request_settings["until"][:4]
        and payload["max_tokens"] == GEN_KWARGS["max_gen_toks"]
    )
    assert payload["temperature"] == 0.0 and payload["model"] == MODEL_NAME
    # Both runs score the same answers the same way.
    for key, value in ours.metrics.items():
        harness_key = key if "," in key else f"{key},none"
        assert value.value == pytest.approx(theirs["results"][task][harness_key], abs=1e-4), key
    protocol = ours.protocol
    assert (
        protocol["apply_chat_template"] is True and protocol["chat"]["template"] == "applied by the endpoint"
    )
    assert protocol["chat"]["system_instruction"] == system_instruction
    assert protocol["chat"]["fewshot_as_multiturn"] is multiturn
    assert (
        protocol["gen_kwargs"] == GEN_KWARGS
        and protocol["decoding"]["max_gen_toks"] == GEN_KWARGS["max_gen_toks"]
    )
    ours_backend.close()
