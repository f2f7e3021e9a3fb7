"""``python -m evalcore``: a bad option is refused in one line naming it, before any model loads.

Every case passes a model path that does not exist: were an option checked only after the model
loaded (minutes on a large checkpoint), the error would be about the path instead of the option.
Also: a YAML error is one line with its position, a skipped task file is one ``warning:`` line, and
a reader that goes away (``| head``) ends the command quietly.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from evalcore.cli import main
from tests.conftest import REPO_ROOT

NO_MODEL = ["--model", "hf", "--model-args", "path=/nonexistent/checkpoint"]

CASES = [
    (["run", *NO_MODEL, "--tasks", "gsm8k", "--limit", "0"], "--limit must be at least 1, got 0"),
    (["run", *NO_MODEL, "--tasks", "gsm8k", "--limit", "-1"], "--limit must be at least 1, got -1"),
    (["run", *NO_MODEL, "--tasks", ","], "--tasks names no task"),
    (["run", *NO_MODEL, "--tasks", "gsm8k", "--batch-size", "zero"], "--batch-size must be 'auto' or a whole number of at least 1, got 'zero'"),
    (["run", *NO_MODEL, "--tasks", "gsm8k", "--batch-size", "0"], "--batch-size must be 'auto' or a whole number of at least 1, got '0'"),
    (["run", *NO_MODEL, "--tasks", "gsm8k", "--batch-size", "2.5"], "--batch-size must be 'auto' or a whole number"),
    (["run", *NO_MODEL, "--tasks", "gsm8k", "--seed", "-1"], "--seed values must be from 0 to 4294967295 (numpy's seed range) or None, got -1"),
    (["run", *NO_MODEL, "--tasks", "gsm8k", "--seed", "1,2"], "--seed takes one integer (the random, numpy, torch and few-shot seeds all set to it) or 4"),
    (["run", *NO_MODEL, "--tasks", "gsm8k", "--seed", "1,2,3,x"], "--seed: 'x' is not an integer or None (in '1,2,3,x')"),
    (["run", *NO_MODEL, "--tasks", "gsm8k", "--fewshot-seed", "-3"], "--fewshot-seed must be a whole number from 0 to 4294967295, got '-3'"),
    (["run", *NO_MODEL, "--tasks", "gsm8k", "--seed", "1,2,3,4", "--fewshot-seed", "5"], "--fewshot-seed 5 contradicts --seed 1,2,3,4"),
    (["run", *NO_MODEL, "--tasks", "gsm8k", "--apply-chat-template", "false"], "--apply-chat-template takes a template name, not 'false'"),
    (["run", "--model", "openai-chat", "--model-args", "base_url=http://127.0.0.1:9/v1", "--tasks", "gsm8k",
      "--apply-chat-template", "tool_use"], "openai-chat: the endpoint applies its own chat template"),
    (["run", *NO_MODEL, "--tasks", "gsm8k", "--num-fewshot", "-2"], "--num-fewshot must be at least 0, got -2"),
    (["run", *NO_MODEL, "--tasks", "no_such_task"], "unknown task 'no_such_task'"),
    (["contamination", "probe", *NO_MODEL, "--tasks", "no_such_task", "--out", "{tmp}"], "unknown task 'no_such_task'"),
    (["contamination", "probe", *NO_MODEL, "--tasks", "gsm8k", "--words", "0", "--out", "{tmp}"], "--words must be at least 1, got 0"),
    (["contamination", "probe", *NO_MODEL, "--tasks", "gsm8k", "--words", "40", "--out", "{tmp}"], "--words must be at most 32"),
    (["contamination", "probe", *NO_MODEL, "--tasks", "gsm8k", "--limit", "0", "--out", "{tmp}"], "--limit must be at least 1, got 0"),
    (["contamination", "exchangeability", *NO_MODEL, "--tasks", "gsm8k", "--seed", "-1", "--out", "{tmp}"], "--seed must be at least 0, got -1"),
    (["contamination", "exchangeability", *NO_MODEL, "--tasks", "gsm8k", "--shard-size", "1", "--out", "{tmp}"], "--shard-size must be at least 2, got 1"),
    (["contamination", "exchangeability", *NO_MODEL, "--tasks", "gsm8k", "--permutations", "0", "--out", "{tmp}"], "--permutations must be at least 1, got 0"),
    (["contamination", "exchangeability", *NO_MODEL, "--tasks", "gsm8k,arc_easy", "--out", "{tmp}"], "--tasks must name one task"),
    (["judge", "audit", "{pairs}", *NO_MODEL, "--protocol", "alpaca_logprob", "--out", "{tmp}", "--seed", "-1"], "--seed must be at least 0, got -1"),
    (["judge", "audit", "{pairs}", *NO_MODEL, "--protocol", "alpaca_logprob", "--out", "{tmp}", "--token-budget", "0"], "--token-budget must be at least 1, got 0"),
    (["judge", "audit", "{pairs}", *NO_MODEL, "--protocol", "alpaca_logprob", "--out", "{tmp}", "--max-new-tokens", "0"], "--max-new-tokens must be at least 1, got 0"),
    (["judge", "run", *NO_MODEL, "--protocol", "alpaca_logprob", "--out", "{tmp}", "--instructions", "{pairs}",
      "--baseline", "b=hf:path=/nonexistent", "--candidate", "c=hf:path=/nonexistent", "--limit", "0"], "--limit must be at least 1, got 0"),
    (["rate", "{votes}", "--seed", "-1"], "--seed must be at least 0, got -1"),
    (["rescore", "{pairs}", "--task", "gsm8k", "--seed", "-5"], "--seed must be at least 0, got -5"),
    (["serve", *NO_MODEL, "--port", "0", "--queue-timeout", "nan"], "--queue-timeout must be 'none' (wait as long as the client does) or a number of seconds above 0"),
    (["serve", *NO_MODEL, "--port", "0", "--queue-timeout", "inf"], "--queue-timeout must be 'none' (wait as long as the client does) or a number of seconds above 0"),
    (["serve", *NO_MODEL, "--port", "0", "--queue-timeout", "-1"], "--queue-timeout must be 'none' (wait as long as the client does) or a number of seconds above 0"),
    (["serve", *NO_MODEL, "--port", "0", "--queue-timeout", "0"], "--queue-timeout must be 'none' (wait as long as the client does) or a number of seconds above 0"),
    (["serve", *NO_MODEL, "--port", "0", "--queue-timeout", "soon"], "--queue-timeout must be 'none' (wait as long as the client does) or a number of seconds above 0"),
    (["serve", *NO_MODEL, "--port", "0", "--queue-timeout", "1e400"], "--queue-timeout must be 'none' (wait as long as the client does) or a number of seconds above 0"),
    (["serve", *NO_MODEL, "--port", "0", "--queue-timeout", ""], "--queue-timeout must be 'none' (wait as long as the client does) or a number of seconds above 0"),
    (["serve", *NO_MODEL, "--port", "0", "--queue-timeout", "1e9"], "--queue-timeout must be 'none' (wait as long as the client does) or a number of seconds above 0"),
]  # fmt: skip


@pytest.fixture
def files(tmp_path, shared_data, monkeypatch):
    monkeypatch.setenv("PODIUM_DATA_DIR", str(shared_data))
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text('{"input": "q", "output_1": "a", "output_2": "b", "label": 1}\n')
    votes = tmp_path / "votes.csv"
    votes.write_text("model_a,model_b,winner\na,b,model_a\nb,a,model_a\n")
    return {"tmp": str(tmp_path / "out"), "pairs": str(pairs), "votes": str(votes)}


@pytest.mark.parametrize("argv, message", CASES, ids=[" ".join(a[:2]) + " " + m[:40] for a, m in CASES])
def test_a_bad_option_is_one_line_naming_it_before_the_model_loads(files, capsys, argv, message):
    assert main([part.format(**files) for part in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert message in err
    assert "nonexistent" not in err  # the model was never looked for


def test_batch_size_auto_and_numbers_pass_the_check():
    from evalcore.cli.run import batch_size

    assert [batch_size(v) for v in ("auto", "AUTO", " 8 ", "016")] == ["auto", "auto", "8", "16"]


def test_a_malformed_task_yaml_is_one_error_line_with_its_position(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("task: t\ndataset_path: json\n  doc_to_text: [x\n")
    samples = tmp_path / "s.jsonl"
    samples.write_text("{}\n")
    assert main(["rescore", str(samples), "--task", str(bad)]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"error: task file '{bad}' is not valid YAML: mapping values are not allowed here (line 3, column 14)\n"
    )


def test_a_skipped_include_file_is_one_warning_line_and_the_others_still_list(tmp_path):
    folder = tmp_path / "tasks"
    folder.mkdir()
    (folder / "bad.yaml").write_text("task: t\ndataset_path: json\n  doc_to_text: [x\n")
    (folder / "ok.yaml").write_text(
        "task: my_ok_task\ndataset_path: json\ndataset_kwargs: {data_files: {test: x.jsonl}}\n"
        'doc_to_text: "{{q}}"\ndoc_to_target: a\noutput_type: generate_until\n'
    )
    done = subprocess.run([sys.executable, "-m", "evalcore", "tasks", "--include-path", str(folder)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0
    assert done.stderr == (
        f"warning: skipped task file {folder / 'bad.yaml'}: task file '{folder / 'bad.yaml'}' is not valid YAML: "
        "mapping values are not allowed here (line 3, column 14)\n"
    )
    assert "my_ok_task\tgenerate_until\t-\n" in done.stdout  # no version: '-', not 'vNone'


@pytest.mark.parametrize("argv", [["tasks"], ["tasks", "--groups"]])
def test_a_reader_that_goes_away_ends_the_command_quietly(argv):
    # `python -m evalcore tasks | head -1`: before, "error: [Errno 32] Broken pipe" and exit 2, or (with
    # output shorter than the buffer) "Exception ignored ... BrokenPipeError" at exit. A pipe whose
    # reading end is already closed makes the first write or flush fail, whatever the output's size.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-m", "evalcore", *argv], cwd=REPO_ROOT, stdout=write_end,
                              stderr=subprocess.PIPE, timeout=120)  # fmt: skip
    finally:
        os.close(write_end)
    assert done.returncode == 141
    assert done.stderr == b""
