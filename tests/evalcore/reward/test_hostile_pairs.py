"""Hostile pairs files and bad options: one ``error:`` line naming the problem, exit status 2, nothing
written and no model loaded (the model path does not even exist)."""

from __future__ import annotations

import json

import pytest

from evalcore.cli import main
from evalcore.reward import read_reward_pairs

GOOD = {"input": "Say hi.", "output_1": "Hi!", "output_2": "Go away.", "label": 1}


@pytest.mark.parametrize(("content", "problem"), [
    ('[{"input": "a", "output_1": "b", ', "is not valid JSON"),
    (json.dumps(GOOD) + "\n{not json}\n", "pair 1 (line 2) is not valid JSON"),
    (json.dumps([GOOD, {"input": "a", "output_1": "b", "label": 1}]), "pairs.json: pair 1: missing field 'output_2'"),
    (json.dumps([{**GOOD, "label": 3}]), "pair 0: label 3 is not 1 or 2"),
    (json.dumps([{**GOOD, "label": "1"}]), "label '1' is not 1 or 2"),
    (json.dumps([{**GOOD, "label": True}]), "label True is not 1 or 2"),
    (json.dumps([{**GOOD, "output_2": 7}]), "field 'output_2' must be a string"),
    (json.dumps([{**GOOD, "output_1": "x" * 300_001}]), "field 'output_1' has 300001 characters, more than 200000"),
    ("", "holds no pairs"),
    ("[]", "holds no pairs"),
    ("[" * 100_000, "nests JSON too deeply"),
    ('"just a string"', "pairs.json: pair 0 (line 1): expected an object with input, output_1, output_2, label"),
])  # fmt: skip
def test_hostile_pairs_file(tmp_path, capsys, content, problem):
    path = tmp_path / "pairs.json"
    path.write_text(content)
    out = tmp_path / "out"
    code = main(
        [
            "reward",
            "--model",
            "hf",
            "--model-args",
            f"path={tmp_path / 'no-model'}",
            str(path),
            "--out",
            str(out),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and problem in err and err.count("\n") == 1, err
    assert not out.exists()


def test_undecodable_and_missing_files(tmp_path, capsys):
    path = tmp_path / "pairs.json"
    path.write_bytes(b"\xff\xfe[]")
    assert (
        main(["reward", "--model", "hf", "--model-args", "path=x", str(path), "--out", str(tmp_path / "o")])
        == 2
    )
    assert "is not UTF-8 text" in capsys.readouterr().err
    assert (
        main(
            [
                "reward",
                "--model",
                "hf",
                "--model-args",
                "path=x",
                str(tmp_path / "nope.json"),
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.parametrize(("args", "problem"), [
    (["--beta", "0.1"], "--beta and --ref-model need --ref-model-args"),
    (["--ref-model-args", "path=x", "--beta", "-1"], "--beta must be a positive number"),
    (["--ref-model-args", "path=x", "--beta", "nan"], "--beta must be a positive number"),
    (["--limit", "0"], "--limit must be at least 1"),
    (["--model-args", "path"], "--model-args / --ref-model-args"),
    (["--model", "vllm"], "runs on --model hf, not 'vllm'"),
])  # fmt: skip
def test_bad_options(tmp_path, capsys, args, problem):
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps([GOOD]))
    base = {"--model": "hf", "--model-args": "path=/nonexistent"}
    for flag in ("--model", "--model-args"):
        if flag in args:
            base[flag] = args[args.index(flag) + 1]
            args = args[: args.index(flag)] + args[args.index(flag) + 2 :]
    argv = ["reward", *[x for kv in base.items() for x in kv], *args, str(path), "--out", str(tmp_path / "o")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and problem in err, err


def test_two_files_one_category_and_bad_names(tmp_path, capsys):
    a, b = tmp_path / "a" / "x.json", tmp_path / "b" / "x.json"
    for path in (a, b):
        path.parent.mkdir()
        path.write_text(json.dumps([GOOD]))
    assert (
        main(
            [
                "reward",
                "--model",
                "hf",
                "--model-args",
                "path=x",
                str(a),
                str(b),
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    assert "two pairs files make category 'x'" in capsys.readouterr().err
    pairs, files = read_reward_pairs([f"first={a}", f"second={b}"])
    assert [f.category for f in files] == ["first", "second"] and [p.pair_id for p in pairs] == [
        "first/0",
        "second/0",
    ]
    odd = tmp_path / "£.json"
    odd.write_text(json.dumps([GOOD]))
    with pytest.raises(ValueError, match="is not a category name"):
        read_reward_pairs([str(odd)])


def test_a_causal_lm_is_not_a_reward_model(smollm2_dir, tmp_path, capsys):
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps([GOOD]))
    assert (
        main(
            [
                "reward",
                "--model",
                "hf",
                "--model-args",
                f"path={smollm2_dir}",
                str(path),
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    assert "is LlamaForCausalLM, not a sequence-classification reward model" in capsys.readouterr().err
