"""``--apply-chat-template NAME``: a tokenizer with several named chat templates renders benchmark prompts
with the named one, on every path that renders them (hf, vllm; the openai-chat endpoint renders its own
and refuses a name), and the protocol records which template it was. The choice is lm-eval 0.4.13's
(``lm_eval.api.model.TemplateLM.chat_template``, compared below); the tokenizer is SmolLM2's (the
``tiny_dir`` checkpoint carries it) with ``chat_template`` set to a dict of two templates."""

from __future__ import annotations

import hashlib
import json
import shutil
import textwrap
import types

import pytest

from evalcore.cli import main
from evalcore.engine import TaskIndex, evaluate, evaluate_task
from evalcore.models import load_backend
from evalcore.models.chat_templates import select_chat_template

# A second template beside SmolLM2's own ChatML: plain role tags, so the two renderings differ visibly.
TAGS = (
    "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}[assistant] {% endif %}"
)


@pytest.fixture
def mc_task(tmp_path):
    (tmp_path / "d.jsonl").write_text(
        '{"q": "What colour is the sky on a clear day?", "c": ["blue", "green"], "a": 0}\n'
        '{"q": "What colour is grass?", "c": ["blue", "green"], "a": 1}\n'
    )
    (tmp_path / "mc.yaml").write_text(textwrap.dedent(f"""
        task: mc
        dataset_path: {tmp_path / 'd.jsonl'}
        test_split: train
        fewshot_split: train
        num_fewshot: 1
        output_type: multiple_choice
        description: "Answer with a colour."
        doc_to_text: "Question: {{{{q}}}}\\nAnswer:"
        doc_to_choice: c
        doc_to_target: a
    """))
    tasks, _ = TaskIndex([tmp_path], bundled=False).resolve(["mc"])
    return tasks[0]


@pytest.fixture
def backend(tiny_dir):
    """The hf backend on the tiny Llama with SmolLM2's tokenizer; its own copy (the test changes it)."""
    return load_backend("hf", path=str(tiny_dir), dtype="float32", device="cpu")


@pytest.fixture
def chatml(backend) -> str:
    template = backend.tokenizer.chat_template
    assert isinstance(template, str) and "<|im_start|>" in template  # SmolLM2's own
    return template


def rendered(tokenizer, messages, name):
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, chat_template=name)


@pytest.mark.parametrize("name", ["tags", "default"])
def test_a_named_template_renders_the_prompt_on_the_hf_path(backend, chatml, mc_task, name):
    backend.tokenizer.chat_template = {"default": chatml, "tags": TAGS}
    result = evaluate_task(backend, mc_task, apply_chat_template=name)
    record = result.records[0]
    expected = rendered(backend.tokenizer, record["messages"], name)
    assert record["prompt"] == expected == result.protocol["first_prompt"]
    assert expected.startswith("[system] Answer with a colour.\n" if name == "tags" else "<|im_start|>system")
    other = rendered(backend.tokenizer, record["messages"], "default" if name == "tags" else "tags")
    assert record["prompt"] != other
    chat = result.protocol["chat"]
    text = TAGS if name == "tags" else chatml
    assert chat["template_name"] == name and chat["template_used"] == name
    assert chat["template_sha256"] == hashlib.sha256(text.encode()).hexdigest()


def test_no_name_on_a_dict_of_templates_is_its_default(backend, chatml, mc_task):
    backend.tokenizer.chat_template = {"default": chatml, "tags": TAGS}
    result = evaluate_task(backend, mc_task, apply_chat_template=True)
    messages = result.records[0]["messages"]
    assert result.records[0]["prompt"] == rendered(backend.tokenizer, messages, "default")
    assert result.records[0]["prompt"] == rendered(backend.tokenizer, messages, None)  # transformers' own choice
    assert result.protocol["chat"]["template_name"] is None and result.protocol["chat"]["template_used"] == "default"


def test_an_unknown_name_is_refused_before_any_request_naming_the_templates(backend, chatml, mc_task):
    backend.tokenizer.chat_template = {"default": chatml, "tags": TAGS}
    with pytest.raises(ValueError, match=r"'tool_use': the tokenizer has no chat template of that name; "
                                         r"its templates are \['default', 'tags'\]"):  # fmt: skip
        evaluate(backend, [mc_task], apply_chat_template="tool_use")
    backend.tokenizer.chat_template = {"a": chatml, "b": TAGS}
    with pytest.raises(ValueError, match=r"several chat templates and none is named 'default'.*\['a', 'b'\]"):
        evaluate(backend, [mc_task], apply_chat_template=True)


def test_a_name_for_a_tokenizer_with_one_template_uses_that_template_as_lm_eval_does(backend, chatml, mc_task):
    plain = evaluate_task(backend, mc_task, apply_chat_template=True)
    with pytest.warns(UserWarning, match="'tool_use': the tokenizer has one chat template, not named ones; it is used"):
        named = evaluate_task(backend, mc_task, apply_chat_template="tool_use")
    assert named.records[0]["prompt"] == plain.records[0]["prompt"]
    assert named.protocol["chat"]["template_name"] == "tool_use"
    assert named.protocol["chat"]["template_used"] == "the tokenizer's only template"
    assert named.protocol["chat"]["template_sha256"] == plain.protocol["chat"]["template_sha256"]


@pytest.mark.parametrize("templates", ["single", "dict", "dict without default"])
@pytest.mark.parametrize("name", [True, "tags", "default", "tool_use"])
@pytest.mark.filterwarnings("ignore")
def test_the_choice_is_lm_evals(backend, chatml, templates, name):
    """Podium's choice of template equals lm-eval's ``TemplateLM.chat_template`` (the template it logs
    with its results), refusals included."""
    from lm_eval.api.model import TemplateLM

    tokenizer = backend.tokenizer
    tokenizer.chat_template = {"single": chatml, "dict": {"default": chatml, "tags": TAGS},
                               "dict without default": {"chat": chatml, "tags": TAGS}}[templates]  # fmt: skip

    def choice(function):
        try:
            return function()
        except ValueError:
            return "refused"

    lm_eval = choice(lambda: TemplateLM.chat_template(types.SimpleNamespace(tokenizer=tokenizer), name))
    podium = choice(lambda: select_chat_template(tokenizer, None if name is True else name))
    assert podium == lm_eval


def test_the_name_reaches_the_vllm_rendering(backend, chatml):
    """vLLM's backend renders with the same rule (its method reads only the tokenizer, so no engine starts)."""
    from evalcore.models.vllm_backend import VLLMBackend

    tokenizer = backend.tokenizer
    tokenizer.chat_template = {"default": chatml, "tags": TAGS}
    stand_in = types.SimpleNamespace(tokenizer=tokenizer)
    messages = [{"role": "user", "content": "What colour is grass?"}]
    assert VLLMBackend.chat_context(stand_in, messages, chat_template="tags") == rendered(tokenizer, messages, "tags")
    assert VLLMBackend.chat_context(stand_in, messages) == rendered(tokenizer, messages, "default")
    with pytest.raises(ValueError, match=r"its templates are \['default', 'tags'\]"):
        VLLMBackend.chat_context(stand_in, messages, chat_template="tool_use")


def test_vllm_continues_a_final_assistant_message_as_hf_does(backend):
    """A task's gen_prefix is a final assistant message: both backends continue it (no end-of-turn, no
    new assistant header), so a chat benchmark reads the same prompt on hf and vllm."""
    from evalcore.models.vllm_backend import VLLMBackend

    stand_in = types.SimpleNamespace(tokenizer=backend.tokenizer)
    asked = [{"role": "user", "content": "What is 2 + 2?"}]
    prefixed = [*asked, {"role": "assistant", "content": "The answer is"}]
    for messages in (asked, prefixed):
        assert VLLMBackend.chat_context(stand_in, messages) == backend.chat_context(messages)
    continued = VLLMBackend.chat_context(stand_in, prefixed)
    assert continued.endswith("The answer is")
    assert continued == backend.tokenizer.apply_chat_template(prefixed, tokenize=False, continue_final_message=True)


def test_a_chat_endpoint_refuses_a_name_before_any_request(mc_task, tmp_path):
    (tmp_path / "g.yaml").write_text(textwrap.dedent(f"""
        task: g
        dataset_path: {mc_task.raw['dataset_path']}
        test_split: train
        output_type: generate_until
        doc_to_text: "{{{{q}}}}"
        doc_to_target: "{{{{c[a]}}}}"
    """))
    task = TaskIndex([tmp_path], bundled=False).resolve(["g"])[0][0]
    endpoint = load_backend("openai-chat", base_url="http://127.0.0.1:9/v1", model="m", max_retries=0)
    with pytest.raises(ValueError, match="the endpoint applies its own chat template"):
        evaluate(endpoint, [task], apply_chat_template="tool_use")
    with pytest.raises(ValueError, match="the endpoint applies its own chat template"):
        evaluate_task(endpoint, task, apply_chat_template="tool_use")


def test_the_command_line_renders_with_a_template_named_in_the_checkpoint(tiny_dir, mc_task, tmp_path):
    """End to end: a checkpoint whose tokenizer files carry two named templates, chosen by name."""
    from transformers import AutoTokenizer

    checkpoint = tmp_path / "two-templates"
    shutil.copytree(tiny_dir, checkpoint)
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    tokenizer.chat_template = {"default": tokenizer.chat_template, "tags": TAGS}
    tokenizer.save_pretrained(checkpoint)
    argv = ["run", "--model", "hf", "--model-args", f"path={checkpoint},dtype=float32,device=cpu", "--tasks", "mc",
            "--include-path", str(tmp_path), "--no-progress", "--output-dir", str(tmp_path / "out")]  # fmt: skip
    assert main([*argv, "--apply-chat-template", "tags"]) == 0
    protocol = json.loads((tmp_path / "out" / "results.json").read_text())["protocol"]["mc"]
    assert protocol["first_prompt"].startswith("[system] Answer with a colour.\n[user] ")
    assert protocol["first_prompt"].endswith("[assistant] ")
    assert protocol["chat"]["template_name"] == protocol["chat"]["template_used"] == "tags"
    settings = json.loads((tmp_path / "out" / "results.json").read_text())["settings"]
    assert settings["apply_chat_template"] == "tags"
    assert main([*argv, "--apply-chat-template", "tool_use"]) == 2


def test_lm_evals_hflm_renders_with_the_default_whatever_the_name(tiny_dir, chatml):
    """Why Podium's rendering is pinned to transformers' ``chat_template=NAME`` rather than to lm-eval's
    output: lm-eval 0.4.13 logs the named template (``lm.chat_template(NAME)``) but its
    ``HFLM.apply_chat_template`` calls ``tokenizer.apply_chat_template`` without the name, so the prompts
    it scores use the dict's default. If a later lm-eval renders the named template, this test fails and
    the parity can be pinned against lm-eval directly."""
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=str(tiny_dir), device="cpu", dtype="float32", batch_size=1)
    lm.tokenizer.chat_template = {"default": chatml, "tags": TAGS}
    messages = [{"role": "user", "content": "What colour is grass?"}]
    assert lm.chat_template("tags") == TAGS
    assert lm.apply_chat_template(messages) == rendered(lm.tokenizer, messages, "default")
