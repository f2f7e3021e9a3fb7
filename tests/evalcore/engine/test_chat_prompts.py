"""Conversations from documents (evalcore.engine.chat), as lm-evaluation-harness 0.4.13 builds them:
the plain text is the prompt the engine always built, a system instruction goes first, few-shot
examples are one user message or alternating turns, and gen_prefix is a final assistant message.

The expected conversations and texts were printed by lm-eval 0.4.13's own ``Task.fewshot_context`` on
this task file (system_instruction, apply_chat_template, fewshot_as_multiturn, gen_prefix), and are
pinned here; parity with its client through evalcore serve: tests/evalcore/models/test_chat_parity.py."""

from __future__ import annotations

import json
import textwrap

import pytest

from evalcore.engine import TaskIndex
from evalcore.engine.chat import ChatOptions, as_messages, as_text, conversation
from evalcore.engine.prompts import Prompter
from evalcore.engine.records import build_records


@pytest.fixture
def task(tmp_path):
    (tmp_path / "d.jsonl").write_text(
        '{"q": "What is 1 + 1?", "a": "2"}\n{"q": "What is 2 + 2?", "a": "4"}\n'
    )
    (tmp_path / "add.yaml").write_text(
        textwrap.dedent(f"""
        task: add
        dataset_path: {tmp_path / "d.jsonl"}
        test_split: train
        output_type: generate_until
        description: "Add the numbers."
        doc_to_text: "Q: {{{{q}}}}"
        doc_to_target: "{{{{a}}}}"
        target_delimiter: "\\n"
        gen_prefix: "A:"
        num_fewshot: 2
        fewshot_config: {{sampler: first_n, samples: [{{q: "What is 5 + 5?", a: "10"}}, {{q: "What is 7 + 1?", a: "8"}}]}}
    """)
    )
    (config,), _ = TaskIndex([tmp_path], bundled=False).resolve(["add"])
    return config


def records(config, options: ChatOptions | None = None):
    return build_records(config, num_fewshot=None, limit=None, seed=0, fewshot_seed=1234, chat=json.dumps,
                         options=options)  # fmt: skip


def test_the_plain_text_is_the_prompt_the_engine_always_built(task):
    prompter = Prompter(task)
    shots = task.fewshot_config["samples"]
    doc = {"q": "What is 1 + 1?", "a": "2"}
    text = as_text(conversation(prompter, doc, shots, system_instruction=None))
    assert text == prompter.context(doc, shots) == records(task, ChatOptions())[0]["prompt"]
    assert (
        text == "Add the numbers.Q: What is 5 + 5?\nA: 10\n\nQ: What is 7 + 1?\nA: 8\n\nQ: What is 1 + 1?\nA:"
    )
    with_system = records(task, ChatOptions(system_instruction="Be exact."))[0]
    assert with_system["prompt"] == "Be exact.\n\n" + text and "messages" not in with_system


def test_one_user_turn_or_alternating_turns(task):
    single = records(task, ChatOptions(apply_chat_template=True, system_instruction="Be exact."))[0]
    assert single["messages"] == [
        {"role": "system", "content": "Be exact.\n\nAdd the numbers."},
        {"role": "user", "content": "Q: What is 5 + 5?\nA: 10\n\nQ: What is 7 + 1?\nA: 8\n\nQ: What is 1 + 1?"},
        {"role": "assistant", "content": "A:"},
    ]  # fmt: skip
    assert json.loads(single["prompt"]) == single["messages"]
    turns = records(task, ChatOptions(apply_chat_template=True, fewshot_as_multiturn=True))[1]["messages"]
    assert turns == [
        {"role": "system", "content": "Add the numbers."},
        {"role": "user", "content": "Q: What is 5 + 5?"}, {"role": "assistant", "content": "A: 10"},
        {"role": "user", "content": "Q: What is 7 + 1?"}, {"role": "assistant", "content": "A: 8"},
        {"role": "user", "content": "Q: What is 2 + 2?"}, {"role": "assistant", "content": "A:"},
    ]  # fmt: skip
    assert as_messages(conversation(Prompter(task), {"q": "x", "a": "y"}, [], system_instruction=None),
                       multiturn=False)[-2:] == [{"role": "user", "content": "Q: x"},
                                                 {"role": "assistant", "content": "A:"}]  # fmt: skip


def test_multiturn_needs_a_template_and_the_instruction_a_string():
    with pytest.raises(ValueError, match="--fewshot-as-multiturn needs the chat template"):
        ChatOptions(fewshot_as_multiturn=True)
    with pytest.raises(ValueError, match="system_instruction must be a string"):
        ChatOptions(system_instruction=3)
