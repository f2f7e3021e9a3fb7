"""Which candidate names the tests may see (evalcore/jail/testplan.py), and what the completion's text
says about bending the tests (issue 47). No jail: these run on the worker before one starts."""

from __future__ import annotations

import pytest

from evalcore.engine.config import TaskConfig, task_config_from_mapping
from evalcore.engine.scoring import _test_names
from evalcore.jail.testplan import global_names, plan_tests
from evalcore.jail.verdicts import static_tampering

HUMANEVAL_38 = (
    "def check(candidate):\n    from random import randint, choice\n    import string\n"
    "    for _ in range(100):\n        s = ''.join(choice(string.ascii_lowercase) for i in range(randint(10, 20)))\n"
    "        assert candidate(encode_cyclic(s)) == s\n\ncheck(decode_cyclic)\n"
)


def test_the_names_the_tests_take_are_those_they_use_and_never_bind():
    plan = plan_tests(HUMANEVAL_38)
    assert plan.names == ("decode_cyclic", "encode_cyclic")  # check, string, randint: the tests' own
    assert plan.builtins_used == ("range",)
    tests = (
        "import math\nMETADATA = {}\nclass T:\n    x = helper(1)\n"
        "def g():\n    global made\n    made = 1\n    return [f(i) for i in range(3)] + [made, len(__name__)]\n"
        "assert g() and math.pi and Node(1).left is None\n"
    )
    plan = plan_tests(tests)
    assert plan.names == ("Node", "f", "helper")  # not math, METADATA, T, g, made, __name__, builtins
    assert set(plan.builtins_used) == {"range", "len"}


def test_a_protocols_names_and_setup_take_precedence():
    setup = "def encode_cyclic(s):\n    return s[::-1]\ndef decode_cyclic(s):\n    '''stub'''\n"
    plan = plan_tests(HUMANEVAL_38, names=["decode_cyclic"], setup=setup)
    assert plan.names == ("decode_cyclic",) and plan.setup_names == ("encode_cyclic",) and plan.setup == setup
    # a setup without the protocol's names would let its stubs stand in for the candidate's functions
    with pytest.raises(ValueError, match="needs the names the tests take"):
        plan_tests(HUMANEVAL_38, setup=setup)


@pytest.mark.parametrize("names", ["f", ["__builtins__"], ["f", "not an identifier"], [3], ["__import__"]])
def test_bad_names_are_refused_with_a_clear_error(names):
    with pytest.raises(ValueError, match="identifiers not starting with '__'"):
        plan_tests("assert f(1)\n", names=names)


def test_tests_that_do_not_compile_give_an_empty_plan():
    assert global_names("def (:\n") == (set(), set())
    assert plan_tests("def (:\n").names == ()
    with pytest.raises(ValueError, match="must be strings"):
        plan_tests(b"assert f()")


def test_the_completion_text_shows_reading_and_bending_the_tests():
    plan = plan_tests(HUMANEVAL_38, names=["decode_cyclic"], setup="def encode_cyclic(s):\n    return s\n")
    prompt = "def encode_cyclic(s):\n    return s[1:] + s[:1]\ndef decode_cyclic(s):\n    '''Decode.'''\n"
    cheat = prompt + "    return s\ndef encode_cyclic(s):\n    return s\nabs = len\nx = open('/program/tests.py')\n"
    found = static_tampering(cheat, plan_tests(HUMANEVAL_38 + "assert abs(1)\n", names=["decode_cyclic"]))
    assert "names the jail's hidden files ('/program') (line 9)" in found
    assert "rebinds the builtin abs, which the tests use (line 8)" in found
    assert "redefines encode_cyclic, which the tests call (line 6)" in static_tampering(cheat, plan)
    # an honest instruct model writes the whole function again over the prompt's stub: nothing to flag
    rewritten = prompt + "    pass\ndef decode_cyclic(s):\n    return s[-1:] + s[:-1]\n"
    assert static_tampering(rewritten, plan) == []
    # the same helper written out again, unchanged, is no redefinition either
    assert static_tampering(prompt + "    return s\n" + prompt.split("def decode")[0], plan) == []


def config(entry: dict) -> TaskConfig:
    return task_config_from_mapping({"task": "codes", "dataset_path": "json", "output_type": "generate_until",
                                 "doc_to_text": "{{prompt}}", "doc_to_target": "{{test}}",
                                 "metric_list": [{"metric": "pass@k", **entry}]})  # fmt: skip


def test_the_pass_at_k_entry_renders_the_names_and_setup_per_document():
    doc = {"prompt": "def f(x):\n", "test": "assert f(1)", "entry_point": "f", "helpers": "f, g"}
    assert _test_names(config({}), {}, doc) == (None, "")
    entry = {"entry_point": "{{helpers}}", "setup": "{{prompt}}"}
    assert _test_names(config(entry), entry, doc) == (["f", "g"], "def f(x):\n")
    for bad in ("{{prompt}}", "__import__", "{{ missing }}"):
        with pytest.raises(ValueError, match="entry_point|missing"):
            _test_names(config({"entry_point": bad}), {"entry_point": bad}, doc)


@pytest.mark.parametrize(("entry", "message"), [
    ({"setup": "{{prompt}}"}, "setup needs entry_point too"),
    ({"entry_point": ["f"]}, "entry_point must be a template string"),
    ({"entry_point": "f", "setup": 3}, "setup must be a template string"),
])  # fmt: skip
def test_a_malformed_pass_at_k_entry_is_refused_when_the_task_loads(entry, message):
    with pytest.raises(ValueError, match=message):
        config(entry)
