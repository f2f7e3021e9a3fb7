"""The flags Podium shares with lm-evaluation-harness 0.4.13 mean what they mean there: for every
combination of ``--apply-chat-template`` and ``--fewshot-as-multiturn`` (absent, bare, true, false),
Podium's command line resolves the same settings as lm-eval's own command line and configuration
(``lm_eval._cli.run.Run`` and ``EvaluatorConfig.from_cli``), or refuses where lm-eval refuses; and the
prompts rendered under those settings are the conversations lm-eval builds (tests/evalcore/engine/
test_chat_prompts.py pins them against lm-eval's ``Task.fewshot_context``)."""

from __future__ import annotations

import argparse
import itertools

import pytest

from evalcore.cli import CliError
from evalcore.cli import run as podium_run

TEMPLATE = [[], ["--apply-chat-template"]]
MULTITURN = [[], ["--fewshot-as-multiturn"], ["--fewshot-as-multiturn", "true"], ["--fewshot-as-multiturn", "false"]]


def lm_eval_settings(argv: list[str]) -> tuple[bool, bool] | str:
    """(apply_chat_template, fewshot_as_multiturn) as lm-eval 0.4.13 resolves these flags, or "refused"."""
    from lm_eval._cli.run import Run
    from lm_eval.config.evaluate_config import EvaluatorConfig

    parser = argparse.ArgumentParser()
    Run(parser.add_subparsers(dest="command"))
    names = ["--" + a[2:].replace("-", "_") if a.startswith("--") else a for a in argv]
    namespace = parser.parse_args(["run", "--model", "hf", "--tasks", "gsm8k", *names])
    try:
        config = EvaluatorConfig.from_cli(namespace)
    except ValueError:
        return "refused"
    return bool(config.apply_chat_template), bool(config.fewshot_as_multiturn)


def podium_settings(argv: list[str], model: str = "hf") -> tuple[bool, bool] | str:
    parser = argparse.ArgumentParser()
    podium_run.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["run", "--model", model, "--tasks", "gsm8k", *argv])
    try:
        return bool(args.apply_chat_template), podium_run.multiturn_in_force(args)
    except CliError:
        return "refused"


@pytest.mark.parametrize(("template", "multiturn"), list(itertools.product(TEMPLATE, MULTITURN)))
def test_the_chat_flags_resolve_as_in_lm_eval(template, multiturn):
    argv = [*template, *multiturn]
    assert podium_settings(argv) == lm_eval_settings(argv), argv


def test_the_chat_template_turns_multiturn_on_by_default():
    assert podium_settings(["--apply-chat-template"]) == (True, True)
    assert podium_settings(["--apply-chat-template", "--fewshot-as-multiturn", "false"]) == (True, False)
    assert podium_settings([]) == (False, False)
    # A chat endpoint applies its own template: the same default as --apply-chat-template.
    assert podium_settings([], model="openai-chat") == (False, True)
    assert podium_settings(["--fewshot-as-multiturn", "false"], model="openai-chat") == (False, False)


@pytest.mark.parametrize("value", ["maybe", "", "2", "on"])
def test_a_value_that_is_not_a_boolean_is_refused(value, capsys):
    from evalcore.cli import main

    assert main(["run", "--model", "hf", "--model-args", "path=/nonexistent", "--tasks", "gsm8k",
                 "--apply-chat-template", "--fewshot-as-multiturn", value]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "--fewshot-as-multiturn expected true or false" in err and err.count("\n") == 1


def test_limit_below_one_is_a_fraction_of_the_documents_as_in_lm_eval():
    from lm_eval.evaluator_utils import get_sample_size

    from evalcore.engine.records import documents_limit

    class Task:
        eval_docs = list(range(1319))

    for limit in (0.1, 0.5, 0.0001, 0.999, 1, 5, 1319, 5000):
        assert min(documents_limit(limit, 1319), 1319) == min(get_sample_size(Task, limit), 1319), limit
    assert [podium_run.limit_value(v) for v in ("10", "0.25", "1e1")] == [10, 0.25, 10]
    for hostile in ("0", "-1", "2.5", "nan", "inf", "ten", ""):
        with pytest.raises(CliError, match="--limit must be at least 1"):
            podium_run.limit_value(hostile)
