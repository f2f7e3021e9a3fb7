"""The flags Podium shares with lm-evaluation-harness 0.4.13 mean what they mean there: for every
combination of ``--apply-chat-template`` (absent, bare, a template name) and ``--fewshot-as-multiturn``
(absent, bare, true, false), and for ``--seed`` written every way lm-eval reads or refuses it, Podium's
command line resolves the same settings as lm-eval's own command line and configuration
(``lm_eval._cli.run.Run`` and ``EvaluatorConfig.from_cli``, then the seeding that starts
``lm_eval.evaluator.simple_evaluate``), or refuses where lm-eval refuses; the few places where Podium
refuses what lm-eval accepts are listed with the reason. The prompts rendered under those settings are
the conversations lm-eval builds (tests/evalcore/engine/test_chat_prompts.py pins them against lm-eval's
``Task.fewshot_context``); tests/evalcore/engine/test_named_chat_templates.py renders named templates."""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import random

import pytest

from evalcore.cli import CliError
from evalcore.cli import run as podium_run

TEMPLATE = [[], ["--apply-chat-template"], ["--apply-chat-template", "tool_use"]]
MULTITURN = [[], ["--fewshot-as-multiturn"], ["--fewshot-as-multiturn", "true"], ["--fewshot-as-multiturn", "false"]]


def lm_eval_flag(arg: str) -> str:
    """``--apply-chat-template=x`` -> ``--apply_chat_template=x`` (values kept as they are)."""
    if not arg.startswith("--"):
        return arg
    name, equals, value = arg.partition("=")
    return "--" + name[2:].replace("-", "_") + equals + value


def lm_eval_config(argv: list[str]):
    """lm-eval 0.4.13's ``EvaluatorConfig`` for ``lm_eval run --model hf --tasks gsm8k ARGV`` (Podium's
    dashed flag names turned into lm-eval's underscores), or "refused" where its parser or its
    configuration refuses them."""
    from lm_eval._cli.run import Run
    from lm_eval.config.evaluate_config import EvaluatorConfig

    parser = argparse.ArgumentParser()
    Run(parser.add_subparsers(dest="command"))
    names = [lm_eval_flag(a) for a in argv]
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # argparse prints its refusal, then exits
            namespace = parser.parse_args(["run", "--model", "hf", "--tasks", "gsm8k", *names])
        return EvaluatorConfig.from_cli(namespace)
    except (SystemExit, ValueError):
        return "refused"


def lm_eval_settings(argv: list[str]) -> tuple[bool | str, bool] | str:
    """(apply_chat_template, fewshot_as_multiturn) as lm-eval 0.4.13 resolves these flags, or "refused"."""
    config = lm_eval_config(argv)
    if config == "refused":
        return config
    return config.apply_chat_template, bool(config.fewshot_as_multiturn)


def podium_args(argv: list[str], model: str = "hf") -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    podium_run.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(["run", "--model", model, "--tasks", "gsm8k", *argv])


def podium_settings(argv: list[str], model: str = "hf") -> tuple[bool | str, bool] | str:
    args = podium_args(argv, model)
    try:
        return podium_run.chat_template_value(args.apply_chat_template), podium_run.multiturn_in_force(args)
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


# --------------------------------------------------------------------------------------------------
# --apply-chat-template NAME


@pytest.mark.parametrize(
    "argv",
    [[], ["--apply-chat-template"], ["--apply-chat-template", "tool_use"], ["--apply-chat-template", "default"],
     ["--apply-chat-template=tool_use"], ["--apply-chat-template", "true"], ["--apply-chat-template", ""],
     ["--apply-chat-template", "--seed", "3"]],
)  # fmt: skip
def test_a_template_name_resolves_as_in_lm_eval(argv):
    """lm-eval 0.4.13 (``--apply_chat_template``: ``type=str, nargs="?", const=True``) keeps the value as
    the template's name, ``true`` included (a name the tokenizer's templates must have); an empty value
    is dropped by ``EvaluatorConfig.from_cli``, so no template."""
    assert podium_settings(argv) == lm_eval_settings(argv), argv


@pytest.mark.parametrize("word", ["false", "False", "0", "no", "off", "none"])
def test_a_word_that_reads_as_off_is_refused_where_lm_eval_would_still_apply_the_template(word):
    # lm-eval takes it as a template name: the template is applied (a one-template tokenizer ignores names).
    assert lm_eval_settings(["--apply-chat-template", word]) == (word, True)
    assert podium_settings(["--apply-chat-template", word]) == "refused"
    with pytest.raises(CliError, match="leave the flag out to run without it"):
        podium_run.chat_template_value(word)


def test_a_template_name_on_a_chat_endpoint_is_refused_before_anything_loads(capsys):
    from evalcore.cli import main

    code = main(["run", "--model", "openai-chat", "--model-args", "base_url=http://127.0.0.1:9/v1", "--tasks", "gsm8k",
                 "--apply-chat-template", "tool_use"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "the endpoint applies its own chat template" in err and "--chat-template" in err


# --------------------------------------------------------------------------------------------------
# --seed


def lm_eval_seeds(argv: list[str]) -> list[int | None] | str:
    """The four seeds lm-eval 0.4.13 runs with (``EvaluatorConfig.seed``), or "refused": by its parser
    (``_int_or_none_list_arg_type(3, 4, "0,1234,1234,1234")``) or by the seeding ``simple_evaluate``
    does before anything else (``np.random.seed`` refuses numbers outside 0..2**32-1). Called for real,
    with no tasks, so it stops at its "No tasks specified" right after seeding; the generators' states
    are put back."""
    import numpy as np
    import torch
    from lm_eval.evaluator import simple_evaluate

    config = lm_eval_config(argv)
    if config == "refused":
        return config
    states = random.getstate(), np.random.get_state(), torch.get_rng_state()
    try:
        simple_evaluate(model="hf", tasks=[], random_seed=config.seed[0], numpy_random_seed=config.seed[1],
                        torch_random_seed=config.seed[2], fewshot_random_seed=config.seed[3])  # fmt: skip
    except ValueError as exc:
        if "No tasks specified" not in str(exc):
            return "refused"
    except RuntimeError:
        return "refused"
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])
    return list(config.seed)


def podium_seeds(argv: list[str]) -> list[int | None] | str:
    args = podium_args(argv)
    try:
        return podium_run.seeds_value(args.seed, args.fewshot_seed).as_list()
    except CliError:
        return "refused"


SEEDS_READ = [[], ["--seed", "42"], ["--seed", "0"], ["--seed", "None"], ["--seed", "none,NONE,None,5"],
              ["--seed", "0,None,8,52"], ["--seed", "1,2,3,4"], ["--seed", " 7 , 8 ,9,10"], ["--seed", "+3"],
              ["--seed", "1_0"], ["--seed", "4294967295"], ["--seed", "1,2,3"], ["--seed", "None,None,None"]]  # fmt: skip
SEEDS_REFUSED = [["--seed", "1,2"], ["--seed", "1,2,3,4,5"], ["--seed", "abc"], ["--seed", "-1"],
                 ["--seed", "1,2,3,x"], ["--seed", ""], ["--seed", "1.5"], ["--seed", "1,,3,4"],
                 ["--seed", "4294967296"], ["--seed", "99999999999999999999"], ["--seed", "1,-2,3,4"]]  # fmt: skip


@pytest.mark.parametrize("argv", SEEDS_READ + SEEDS_REFUSED, ids=lambda a: " ".join(a) or "default")
@pytest.mark.filterwarnings("ignore:--seed")
def test_seed_resolves_as_in_lm_eval(argv):
    expected = lm_eval_seeds(argv)
    assert podium_seeds(argv) == expected, argv
    assert (expected == "refused") == (argv in SEEDS_REFUSED)


def test_the_default_and_one_integer_are_lm_evals():
    assert podium_seeds([]) == [0, 1234, 1234, 1234]
    assert podium_seeds(["--seed", "42"]) == [42, 42, 42, 42]
    with pytest.warns(UserWarning, match="3 values: the few-shot seed is the default 1234"):
        assert podium_seeds(["--seed", "5,6,7"]) == [5, 6, 7, 1234]


@pytest.mark.parametrize("text", ["-1,None,5,6", "1,2,-3,4", "1,2,3,-1", "0,0,4294967296,0", "5,None,None,99999999999"])
def test_podium_refuses_seeds_that_lm_eval_takes_only_where_numpy_is_not_given_them(text):
    """lm-eval seeds python's random, torch and the few-shot sampler with any integer (torch up to 2**64-1)
    and refuses only what numpy refuses. Podium's seeds also seed numpy generators (the bootstrap
    intervals, from the random seed) and per-request sampling generators (from the torch seed): every
    value must be in numpy's range, and the error says so."""
    assert lm_eval_seeds([f"--seed={text}"]) != "refused"  # "=": a value starting with "-" is not an option
    assert podium_seeds([f"--seed={text}"]) == "refused"
    with pytest.raises(CliError, match=r"--seed values must be from 0 to 4294967295 \(numpy's seed range\)"):
        podium_run.seeds_value(text, None)


@pytest.mark.parametrize(
    ("seed", "fewshot", "expected"),
    [(None, "7", [0, 1234, 1234, 7]), ("42", "7", [42, 42, 42, 7]), ("1,2,3", "7", [1, 2, 3, 7]),
     ("1,2,3,7", "7", [1, 2, 3, 7]), ("None", "0", [None, None, None, 0]), (None, None, [0, 1234, 1234, 1234])],
)  # fmt: skip
def test_fewshot_seed_sets_the_fourth_value(seed, fewshot, expected):
    assert podium_run.seeds_value(seed, fewshot).as_list() == expected


@pytest.mark.parametrize(
    ("seed", "fewshot", "message"),
    [("1,2,3,4", "7", "--fewshot-seed 7 contradicts --seed 1,2,3,4, whose fourth value is the few-shot seed"),
     ("1,2,3,None", "7", "--fewshot-seed 7 contradicts"),
     (None, "-3", "--fewshot-seed must be a whole number from 0 to 4294967295, got '-3'"),
     (None, "None", "--fewshot-seed must be a whole number"), (None, "x", "--fewshot-seed must be a whole number")],
)  # fmt: skip
def test_fewshot_seed_refuses_what_it_cannot_mean(seed, fewshot, message):
    with pytest.raises(CliError, match=message):
        podium_run.seeds_value(seed, fewshot)


def test_fewshot_seed_is_a_name_lm_eval_does_not_use():
    """A flag Podium adds beside lm-eval's must not be one of lm-eval's, nor an abbreviation argparse
    would take for one (it would mean something else there)."""
    for flag in ("--fewshot-seed", "--fewshot_seed"):
        assert lm_eval_config([flag, "1"]) == "refused", flag
        assert lm_eval_config([f"{flag}=1"]) == "refused", flag
