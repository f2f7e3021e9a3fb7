"""FastChat llm_judge's ``judge_prompts.jsonl`` read as the user supplies it (evalcore/judging/fastchat.py).

The prompt file here is written for the test in FastChat's format (its eight names, fields and output
formats; our own wording, with ``{{``/``}}`` escapes as ``str.format`` reads them). What is checked:

- every prompt renders exactly as FastChat's ``run_judge_single`` / ``run_judge_pair`` render it
  (``prompt_template.format(**kwargs)`` with FastChat's keyword names, the system prompt as written);
- FastChat's names pick each prompt's role, its reference categories pick reference-guided grading;
- verdicts are read by FastChat's rules (first ``[[n]]``, then ``[n]``; ``[[A]]`` before ``[[B]]``
  before ``[[C]]`` wherever they sit; two ratings within 0.1 tie) on the strings its parser meets;
- hostile files are refused with one message naming the line and problem, and nothing is run;
- ``judge grade`` and ``judge run`` with the file and the real SmolLM2 judge: the prompts in the
  records are FastChat's renderings, each grade is what FastChat's parser reads from the judge's text,
  and the report names every prompt, its hash and that it is not FastChat's published wording.
"""

from __future__ import annotations

import ast
import json
import re

import pytest

from evalcore.cli import main
from evalcore.judging.answer_files import read_model_answers
from evalcore.judging.fastchat import (
    fastchat_grading_family,
    fastchat_pairwise_family,
    published_name,
    read_fastchat_prompts,
    split_spec,
    verdict_lookalikes,
)
from evalcore.judging.judge import order_messages, parse_generated, parse_score, prompt_sha256
from evalcore.judging.protocol import protocol_from_dict
from evalcore.judging.questions import SAMPLE_QUESTIONS, read_questions
from evalcore.judging.records import PairItem

SYSTEM_PAIR = 'Be a fair referee between two assistants. End with "[[A]]", "[[B]]" or "[[C]]" for a tie.'
SYSTEM_PAIR_MULTI = "Be a fair referee; judge the answers to the second question only. End with [[A]], [[B]] or [[C]]."
PROMPTS = [
    {"name": "pair-v2", "type": "pairwise", "system_prompt": SYSTEM_PAIR,
     "prompt_template": "[Question]\n{question}\n\n[A]\n{answer_a}\n[/A]\n\n[B]\n{answer_b}\n[/B]\n"
                        'Reply as {{"winner": "A"}} braces aside.',
     "description": "general pairs", "category": "general", "output_format": "[[A]]"},
    {"name": "pair-v2-multi-turn", "type": "pairwise", "system_prompt": SYSTEM_PAIR_MULTI,
     "prompt_template": "<A>\nU: {question_1}\nA: {answer_a_1}\nU: {question_2}\nA: {answer_a_2}\n</A>\n"
                        "<B>\nU: {question_1}\nB: {answer_b_1}\nU: {question_2}\nB: {answer_b_2}\n</B>",
     "description": "two-turn pairs", "category": "general", "output_format": "[[A]]"},
    {"name": "pair-math-v1", "type": "pairwise", "system_prompt": SYSTEM_PAIR + " Check against the reference.",
     "prompt_template": "[Question]\n{question}\n[Reference]\n{ref_answer_1}\n[A]\n{answer_a}\n[B]\n{answer_b}",
     "description": "maths pairs", "category": "math", "output_format": "[[A]]"},
    {"name": "pair-math-v1-multi-turn", "type": "pairwise", "system_prompt": SYSTEM_PAIR_MULTI + " Use the references.",
     "prompt_template": "<Ref>\nU: {question_1}\nR: {ref_answer_1}\nU: {question_2}\nR: {ref_answer_2}\n</Ref>\n"
                        "<A>\nA: {answer_a_1}\nA: {answer_a_2}\n</A>\n<B>\nB: {answer_b_1}\nB: {answer_b_2}\n</B>",
     "description": "two-turn maths pairs", "category": "general", "output_format": "[[A]]"},
    {"name": "single-v1", "type": "single", "system_prompt": "You are a helpful assistant.",
     "prompt_template": "[Instruction]\nRate the answer from 1 to 10 as \"[[rating]]\".\n\n[Question]\n{question}\n\n"
                        "[Answer]\n{answer}\n[End]",
     "description": "general grading", "category": "general", "output_format": "[[rating]]"},
    {"name": "single-math-v1", "type": "single", "system_prompt": "You are a helpful assistant.",
     "prompt_template": "[Instruction]\nCompare with the reference; rate 1 to 10 as [[rating]].\n[Question]\n{question}\n"
                        "[Reference]\n{ref_answer_1}\n[Answer]\n{answer}",
     "description": "maths grading", "category": "math", "output_format": "[[rating]]"},
    {"name": "single-v1-multi-turn", "type": "single",
     "system_prompt": "Rate the assistant's answer to the second question from 1 to 10 as [[rating]].\n\n",
     "prompt_template": "<Chat>\nU: {question_1}\nA: {answer_1}\nU: {question_2}\nA: {answer_2}\n</Chat>",
     "description": "two-turn grading", "category": "general", "output_format": "[[rating]]"},
    {"name": "single-math-v1-multi-turn", "type": "single",
     "system_prompt": "Rate the second answer against the reference, 1 to 10, as [[rating]].\n\n",
     "prompt_template": "<Ref>\nU: {question_1}\nR: {ref_answer_1}\nU: {question_2}\nR: {ref_answer_2}\n</Ref>\n"
                        "<Chat>\nU: {question_1}\nA: {answer_1}\nU: {question_2}\nA: {answer_2}\n</Chat>",
     "description": "two-turn maths grading", "category": "math", "output_format": "[[rating]]"},
]  # fmt: skip
JUDGE_TOKENS = 24  # SmolLM2-135M rarely writes a verdict at any length; the prompts are what is checked
ANSWER_TOKENS = 8


def _write(tmp_path, records, name="judge_prompts.jsonl") -> str:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


def _fastchat_kwargs(record: dict, questions, answers_a, answers_b=None, references=None) -> dict:
    """The keywords FastChat's run_judge_single / run_judge_pair pass to ``prompt_template.format``."""
    multi = "{question_1}" in record["prompt_template"]
    kwargs = {}
    if references is not None:
        kwargs["ref_answer_1"] = references[0]
        if multi:
            kwargs["ref_answer_2"] = references[1]
    if record["type"] == "single":
        if multi:
            return {"question_1": questions[0], "question_2": questions[1], "answer_1": answers_a[0],
                    "answer_2": answers_a[1], **kwargs}  # fmt: skip
        return {"question": questions[0], "answer": answers_a[0], **kwargs}
    if multi:
        return {"question_1": questions[0], "question_2": questions[1], "answer_a_1": answers_a[0],
                "answer_b_1": answers_b[0], "answer_a_2": answers_a[1], "answer_b_2": answers_b[1], **kwargs}  # fmt: skip
    return {"question": questions[0], "answer_a": answers_a[0], "answer_b": answers_b[0], **kwargs}


def _fastchat_messages(record: dict, **kwargs) -> list[dict]:
    user = record["prompt_template"].format(**_fastchat_kwargs(record, **kwargs))
    system = [{"role": "system", "content": record["system_prompt"]}] if record["system_prompt"] else []
    return [*system, {"role": "user", "content": user}]


def _fastchat_rating(text: str):
    """FastChat's single-answer rating (common.run_judge_single), restated: -1 when none is found."""
    match = re.search(r"\[\[(\d+\.?\d*)\]\]", text) or re.search(r"\[(\d+\.?\d*)\]", text)
    return ast.literal_eval(match.groups()[0]) if match else -1


def _fastchat_winner(text: str) -> str:
    """FastChat's pairwise winner for output_format [[A]] (common.run_judge_pair), restated."""
    for label, winner in (("[[A]]", "A"), ("[[B]]", "B"), ("[[C]]", "tie")):
        if label in text:
            return winner
    return "error"


# -- rendering ---------------------------------------------------------------------------------------
# Answers and questions holding braces and placeholder-like text: FastChat fills them in verbatim.
Q = ("What is {answer}? Use {{braces}}.", "And in French, {question_2}?")
A = ("It is {ref_answer_1} and }{.", "C'est {answer_b_2}.")
B = ("Forty-two {{x}}.", "Quarante-deux.")
R = ("The reference {answer_a}.", "La référence.")


def test_every_prompt_renders_exactly_as_fastchat_formats_it(tmp_path):
    prompts = read_fastchat_prompts(_write(tmp_path, PROMPTS))
    assert list(prompts) == [r["name"] for r in PROMPTS]
    for record in PROMPTS:
        protocol = prompts[record["name"]]
        multi = "-multi-turn" in record["name"]
        guided = "-math-" in record["name"]
        assert (protocol.kind, protocol.turns, protocol.uses_reference) == (record["type"], 2 if multi else 1, guided)
        assert protocol.verdict.as_dict() == {"method": "generate", "max_new_tokens": 2048, "parse": "fastchat",
                                              "output_format": record["output_format"]}  # fmt: skip
        turns = 2 if multi else 1
        refs = R[:turns] if guided else None
        if record["type"] == "single":
            expected = _fastchat_messages(record, questions=Q, answers_a=A, references=R if guided else None)
            got = protocol.conversation_messages(questions=Q[:turns], answers=A[:turns], references=refs)
            assert got == expected, record["name"]
        else:
            expected = _fastchat_messages(record, questions=Q, answers_a=A, answers_b=B, references=R if guided else None)
            item = PairItem("p", Q[turns - 1], A[turns - 1], B[turns - 1], reference=R[0] if guided and not multi else None,
                            **({"questions": Q, "answers_1": A, "answers_2": B, "references": R if guided else ()}
                               if multi else {}))  # fmt: skip
            assert order_messages(protocol, item, "ab") == expected, record["name"]
            swapped = _fastchat_messages(record, questions=Q, answers_a=B, answers_b=A, references=R if guided else None)
            assert order_messages(protocol, item, "ba") == swapped, record["name"]
        assert "not a prompt FastChat has published" in protocol.source and published_name(protocol) is None
    # the escaped braces became single ones, as str.format makes them
    assert 'Reply as {"winner": "A"} braces aside.' in prompts["pair-v2"].user


def test_fastchat_names_pick_the_roles_and_its_categories_the_references(tmp_path):
    prompts = read_fastchat_prompts(_write(tmp_path, PROMPTS))
    family = fastchat_grading_family(prompts)
    assert [getattr(family, r).name for r in ("single", "single_multi", "reference", "reference_multi")] == [
        "single-v1", "single-v1-multi-turn", "single-math-v1", "single-math-v1-multi-turn"]  # fmt: skip
    assert family.reference_categories == ("math", "reasoning", "coding", "arena-hard-200")
    assert family.guided("Coding") and not family.guided("writing")
    pairwise = fastchat_pairwise_family(prompts)
    # pair-math-v1-multi-turn says category "general" (as FastChat's own file does): its name decides
    assert {r: p.name for r, p in pairwise.members.items()} == {
        "single": "pair-v2", "multi": "pair-v2-multi-turn", "reference": "pair-math-v1",
        "reference_multi": "pair-math-v1-multi-turn"}  # fmt: skip
    assert pairwise.pick(2, guided=True).name == "pair-math-v1-multi-turn" and pairwise.pick(1, guided=False).name == "pair-v2"

    # Without FastChat's names, the one prompt of each shape takes the role; two of one shape are ambiguous.
    renamed = [{**r, "name": "my-" + r["name"]} for r in PROMPTS]
    family = fastchat_grading_family(read_fastchat_prompts(_write(tmp_path, renamed, "renamed.jsonl")))
    assert family.reference_multi.name == "my-single-math-v1-multi-turn"
    twice = [*renamed, {**PROMPTS[4], "name": "single-v2"}]
    with pytest.raises(ValueError, match="could all take its role"):
        fastchat_grading_family(read_fastchat_prompts(_write(tmp_path, twice, "twice.jsonl")))
    # A prompt named like FastChat's but shaped for another role is refused.
    wrong = [{**PROMPTS[4], "name": "single-math-v1"}]
    with pytest.raises(ValueError, match="does not fit that role"):
        fastchat_grading_family(read_fastchat_prompts(_write(tmp_path, wrong, "wrong.jsonl")))


def test_specs():
    assert split_spec("judge_prompts.jsonl") == (split_spec("judge_prompts.jsonl")[0], None)
    assert split_spec("dir/judge_prompts.jsonl:single-v1")[1] == "single-v1"
    assert split_spec("mt-bench") is None and split_spec("my.yaml") is None


# -- verdicts ----------------------------------------------------------------------------------------
SINGLE = protocol_from_dict({"name": "s", "kind": "single", "user": "{question} {answer}",
                             "verdict": {"method": "generate", "max_new_tokens": 9, "parse": "fastchat",
                                         "output_format": "[[rating]]"}})  # fmt: skip
PODIUM_SINGLE = protocol_from_dict({"name": "p", "kind": "single", "user": "{question} {answer}",
                                    "verdict": {"method": "generate", "max_new_tokens": 9,
                                                "score": {"regex": r"\[\[(\d+(?:\.\d+)?)\]\]", "min": 1, "max": 10}}})  # fmt: skip
RATINGS = [  # what judges write, and what FastChat's parser reads (None: its -1, a failed grade here)
    ('The answer is fine. Rating: [[7]]', 7),
    ('I must answer as "[[rating]]", e.g. "Rating: [[5]]". My rating: [[8]]', 5),  # the issue's example
    ("Rating: [8]", 8),
    ("See [1]. Final: [[6]]", 6),  # the double-bracket form anywhere beats an earlier single one
    ("Rating: [[8.5]]", 8.5),
    ("Rating: [[9.]]", 9.0),
    ("Rating: [[0]]", 0),  # FastChat keeps a rating outside 1-10
    ("Rating: [[11]]", 11),
    ("Rating: 8/10", None),
    ("Rating: [[ 8 ]]", None),
    ("Rating: [[08]]", None),  # Python's literal syntax refuses a leading zero (FastChat's thread would fail)
    ("Rating: [[٨]]", None),  # \d matches Arabic-Indic digits; literal_eval does not read them
    ("", None),
]


@pytest.mark.parametrize(("text", "rating"), RATINGS)
def test_single_verdicts_read_as_fastchat_reads_them(text, rating):
    if rating is None:
        with pytest.raises(ValueError):
            parse_score(SINGLE, text)
        if "٨" not in text and "08" not in text:
            assert _fastchat_rating(text) == -1
        return
    assert parse_score(SINGLE, text) == pytest.approx(float(rating))
    assert _fastchat_rating(text) == rating


def test_podium_rule_differs_where_the_issue_says():
    text = 'e.g. "Rating: [[5]]". My rating: [[8]]'
    assert parse_score(PODIUM_SINGLE, text) == 8 and parse_score(SINGLE, text) == 5
    with pytest.raises(ValueError, match="outside"):
        parse_score(PODIUM_SINGLE, "Rating: [[11]]")


PAIR = protocol_from_dict({"name": "p", "kind": "pairwise", "user": "{question} {answer_a} {answer_b}",
                           "verdict": {"method": "generate", "max_new_tokens": 9, "parse": "fastchat",
                                       "output_format": "[[A]]"}})  # fmt: skip
PAIR_SCORES = protocol_from_dict({"name": "p2", "kind": "pairwise", "user": "{question} {answer_a} {answer_b}",
                                  "verdict": {"method": "generate", "max_new_tokens": 9, "parse": "fastchat",
                                              "output_format": "[[rating_a,rating_b]]"}})  # fmt: skip
VERDICTS = [
    ("Assistant A is better. [[A]]", "A"),
    ("[[B]]", "B"),
    ("Both fine: [[C]]", "tie"),
    ("At first I thought [[B]], but on reflection [[A]]", "A"),  # [[A]] is checked first, wherever it sits
    ("Not [[C]]; my verdict: [[B]]", "B"),
    ("Verdict: [A]", None),
    ("Verdict: A", None),
]


@pytest.mark.parametrize(("text", "winner"), VERDICTS)
def test_pair_verdicts_read_as_fastchat_reads_them(text, winner):
    if winner is None:
        with pytest.raises(ValueError, match="no verdict"):
            parse_generated(PAIR, text)
        assert _fastchat_winner(text) == "error"
        return
    assert parse_generated(PAIR, text)[1] == winner == _fastchat_winner(text)


@pytest.mark.parametrize(("text", "winner"), [
    ("Scores: [[8, 6]]", "A"), ("[[7,7.05]]", "tie"), ("[[7, 7.2]]", "B"), ("Scores [3, 9]", "B"),
    ("[[3, 9]] then [[9, 1]]", "B"), ("[[9]]", None), ("[[8,  6]]", None),
])  # fmt: skip
def test_two_score_verdicts(text, winner):
    if winner is None:
        with pytest.raises(ValueError):
            parse_generated(PAIR_SCORES, text)
    else:
        assert parse_generated(PAIR_SCORES, text)[1] == winner


def test_podium_and_fastchat_verdicts_hash_apart():
    assert PODIUM_SINGLE.sha256 != SINGLE.sha256
    assert "parse" not in PODIUM_SINGLE.verdict.as_dict()  # older protocols' hashes (and cached grades) stand


# -- hostile files -----------------------------------------------------------------------------------
GOOD = PROMPTS[4]
HOSTILE = [
    (["not json"], "line 1 is not valid JSON"),
    ([json.dumps([GOOD])], "must be a JSON object"),
    ([json.dumps({k: v for k, v in GOOD.items() if k != "system_prompt"})], "missing key 'system_prompt'"),
    ([json.dumps({**GOOD, "type": "triple"})], "type 'triple' is not one of"),
    ([json.dumps({**GOOD, "output_format": "[[A]]"})], "output_format '[[A]]' is not one FastChat reads"),
    ([json.dumps({**GOOD, "prompt_template": 7})], "'prompt_template' must be a string"),
    ([json.dumps({**GOOD, "name": "a:b"})], "name must be"),
    ([json.dumps(GOOD), json.dumps(GOOD)], "also on line 1"),
    ([json.dumps({**GOOD, "prompt_template": "{question} {answer} {}"})], "not a plain name"),
    ([json.dumps({**GOOD, "prompt_template": "{question} {answer!r}"})], "format spec or conversion"),
    ([json.dumps({**GOOD, "prompt_template": "{question} {answer:>99999999}"})], "format spec or conversion"),
    ([json.dumps({**GOOD, "prompt_template": "{question.__class__} {answer}"})], "not a plain name"),
    ([json.dumps({**GOOD, "prompt_template": "{question} {answer} {ref_answer_2}"})], "is not one FastChat fills"),
    ([json.dumps({**GOOD, "prompt_template": "{question} {answer} {secret}"})], "{secret} is not one FastChat fills"),
    ([json.dumps({**GOOD, "prompt_template": "{question} only"})], "never shows {answer}"),
    ([json.dumps({**GOOD, "prompt_template": "{question} {answer} {{question}}"})], "cannot tell from a placeholder"),
    ([json.dumps({**GOOD, "prompt_template": "{question} {answer} }"})], "not a valid str.format template"),
    ([json.dumps({**GOOD, "system_prompt": "Grade {answer}"})], "sends as written"),
    ([""], "holds no prompt"),
]  # fmt: skip


@pytest.mark.parametrize(("lines", "message"), HOSTILE)
def test_hostile_prompt_files_are_refused(tmp_path, lines, message):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ValueError) as caught:
        read_fastchat_prompts(path)
    assert message in str(caught.value) and str(path) in str(caught.value)


def test_not_utf8_and_oversized_files(tmp_path):
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes(json.dumps(GOOD).replace("helpful", "h\u00e9lpful").encode("latin-1"))
    with pytest.raises(ValueError, match="not UTF-8"):
        read_fastchat_prompts(bad)
    big = tmp_path / "big.jsonl"
    big.write_text(json.dumps({**GOOD, "description": "x" * (1024 * 1024)}))
    with pytest.raises(ValueError, match="larger than"):
        read_fastchat_prompts(big)


def test_cli_refuses_a_bad_prompt_file_before_any_model_loads(tmp_path, capsys):
    bad = _write(tmp_path, [{**GOOD, "prompt_template": "{question} {answer} {oops}"}], "bad.jsonl")
    common = ["--out", str(tmp_path / "out"), "--cache", str(tmp_path / "c.sqlite")]
    code = main(["judge", "grade", "--questions", "sample", "--answers-from", "m=hf:path=/nonexistent", "--judge", "hf",
                 "--judge-args", "path=/nonexistent", "--protocol", bad, *common])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: ") and "{oops}" in err and "\n" not in err
    good = _write(tmp_path, PROMPTS)
    for protocol, extra, message in (
        (good + ":no-such-prompt", [], "no prompt is named 'no-such-prompt'"),
        (good, ["--protocol-multi", good + ":single-v1-multi-turn"], "--protocol-multi completes one prompt"),
        ("mt-bench", ["--judge-max-new-tokens", "24"], "--judge-max-new-tokens sets the token limit"),
        (good, ["--judge-max-new-tokens", "0"], "--judge-max-new-tokens must be at least 1"),
    ):
        code = main(["judge", "grade", "--questions", "sample", "--answers-from", "m=hf:path=/nonexistent", "--judge",
                     "hf", "--judge-args", "path=/nonexistent", "--protocol", protocol, *extra, *common])  # fmt: skip
        err = capsys.readouterr().err.strip()
        assert code == 2 and message in err, err
    code = main(["judge", "run", "--model", "hf", "--model-args", "path=/nonexistent", "--protocol", bad,
                 "--questions", "sample", "--baseline", "a=hf:path=/x", "--candidate", "b=hf:path=/y", *common])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and "{oops}" in err


# -- the commands, with the real judge ---------------------------------------------------------------
def _questions_file(tmp_path, ids=("math-1", "writing-1")) -> str:
    lines = {json.loads(line)["question_id"]: line for line in SAMPLE_QUESTIONS.read_text().splitlines()}
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(lines[i] + "\n" for i in ids))
    return str(path)


def test_judge_grade_with_fastchat_prompts(tmp_path, smollm2_dir, capsys):
    prompts_path = _write(tmp_path, PROMPTS)
    records = {r["name"]: r for r in PROMPTS}
    questions_path = _questions_file(tmp_path)
    questions = read_questions(questions_path)
    model = f"path={smollm2_dir},dtype=float32,device=cpu"
    out = tmp_path / "out"
    code = main(["judge", "grade", "--questions", questions_path, "--answers-from", f"smol=hf:{model}", "--judge", "hf",
                 "--judge-args", model, "--protocol", prompts_path, "--judge-max-new-tokens", str(JUDGE_TOKENS),
                 "--max-new-tokens", str(ANSWER_TOKENS), "--rounds", "20", "--out", str(out)])  # fmt: skip
    capsys.readouterr()
    answers = read_model_answers(out / "answers" / "smol.jsonl", questions)
    rows = {g["item_id"]: g for g in map(json.loads, (out / "grades.jsonl").read_text().splitlines())}
    expected_names = {"math-1/t1": "single-math-v1", "math-1/t2": "single-math-v1-multi-turn",
                      "writing-1/t1": "single-v1", "writing-1/t2": "single-v1-multi-turn"}  # fmt: skip
    assert {k: g["protocol"] for k, g in rows.items()} == expected_names
    for question, turns in zip(questions, answers):
        for turn in (1, 2):
            row = rows[f"{question.question_id}/t{turn}"]
            record = records[row["protocol"]]
            guided = question.category == "math"
            messages = _fastchat_messages(record, questions=question.turns, answers_a=turns,
                                          references=question.references if guided else None)  # fmt: skip
            assert row["prompt_sha256"] == prompt_sha256(messages, None), row["item_id"]
            rating = _fastchat_rating(row["raw"]) if row["raw"] is not None else -1
            if rating == -1:
                assert row["status"] == "failed" and row["score"] is None
            else:
                assert row["status"] == "ok" and row["score"] == pytest.approx(float(rating))
    assert code == (0 if all(g["status"] == "ok" for g in rows.values()) else 1)
    report = json.loads((out / "report.json").read_text())
    members = report["protocol"]["members"]
    assert {role: m["name"] for role, m in members.items()} == {
        "single": "single-v1", "single_multi": "single-v1-multi-turn", "reference": "single-math-v1",
        "reference_multi": "single-math-v1-multi-turn"}  # fmt: skip
    for member in members.values():
        assert member["verdict"] == {"method": "generate", "max_new_tokens": JUDGE_TOKENS, "parse": "fastchat",
                                     "output_format": "[[rating]]"}  # fmt: skip
        assert "FastChat judge_prompts.jsonl format" in member["source"] and "not a prompt FastChat has published" in member["source"]
    assert report["protocol"]["reference_categories"] == ["math", "reasoning", "coding", "arena-hard-200"]

    # One reference-guided prompt alone grades every question against its reference; a question without
    # one is refused before any model call.
    alone = tmp_path / "alone"
    code = main(["judge", "grade", "--questions", _questions_file(tmp_path, ("math-1",)), "--answers",
                 f"smol={out / 'answers' / 'smol.jsonl'}", "--judge", "hf", "--judge-args", model,
                 "--protocol", prompts_path + ":single-math-v1", "--protocol-multi",
                 prompts_path + ":single-math-v1-multi-turn", "--judge-max-new-tokens", str(JUDGE_TOKENS),
                 "--rounds", "20", "--cache", str(out / "cache.sqlite"), "--out", str(alone)])  # fmt: skip
    capsys.readouterr()
    again = {g["item_id"]: g for g in map(json.loads, (alone / "grades.jsonl").read_text().splitlines())}
    assert {k: (g["protocol"], g["prompt_sha256"]) for k, g in again.items()} == {
        k: (rows[k]["protocol"], rows[k]["prompt_sha256"]) for k in ("math-1/t1", "math-1/t2")}
    assert code in (0, 1)


def test_judge_run_compares_both_turns_with_fastchat_pairwise_prompts(tmp_path, smollm2_dir, capsys):
    prompts_path = _write(tmp_path, PROMPTS)
    records = {r["name"]: r for r in PROMPTS}
    questions_path = _questions_file(tmp_path)
    questions = read_questions(questions_path)
    model = f"path={smollm2_dir},dtype=float32,device=cpu"
    out = tmp_path / "run"
    code = main(["judge", "run", "--model", "hf", "--model-args", model, "--protocol", prompts_path,
                 "--judge-max-new-tokens", str(JUDGE_TOKENS), "--questions", questions_path,
                 "--baseline", f"base=hf:{model},gen.max_new_tokens={ANSWER_TOKENS}",
                 "--candidate", f"terse=hf:{model},gen.max_new_tokens={ANSWER_TOKENS},gen.system=Answer in one word.",
                 "--rounds", "20", "--out", str(out)])  # fmt: skip
    capsys.readouterr()
    base = read_model_answers(out / "answers" / "base.jsonl", questions)
    terse = read_model_answers(out / "answers" / "terse.jsonl", questions)
    judgments = [json.loads(line) for line in (out / "judgments.jsonl").read_text().splitlines()]
    assert len(judgments) == 2 * 2 * 2  # questions x turns x orders
    names = {"math-1/t1": "pair-math-v1", "math-1/t2": "pair-math-v1-multi-turn", "writing-1/t1": "pair-v2",
             "writing-1/t2": "pair-v2-multi-turn"}  # fmt: skip
    for j in judgments:
        item = j["pair_id"].removeprefix("terse/")
        qid = item.split("/")[0]
        k = [q.question_id for q in questions].index(qid)
        question = questions[k]
        first, second = (base[k], terse[k]) if j["order"] == "ab" else (terse[k], base[k])
        record = records[names[item]]
        guided = question.category == "math"
        messages = _fastchat_messages(record, questions=question.turns, answers_a=first, answers_b=second,
                                      references=question.references if guided else None)  # fmt: skip
        assert j["prompt_sha256"] == prompt_sha256(messages, None), (item, j["order"])
        winner = _fastchat_winner(j.get("raw") or "")
        assert (j["status"], j.get("winner")) == (("failed", None) if winner == "error" else ("ok", winner))
    results = json.loads((out / "results.json").read_text())
    assert {role: m["name"] for role, m in results["protocol"]["members"].items()} == {
        "single": "pair-v2", "multi": "pair-v2-multi-turn", "reference": "pair-math-v1",
        "reference_multi": "pair-math-v1-multi-turn"}  # fmt: skip
    assert results["questions"]["turns"] == 4 and results["instructions"] == 4
    assert code == (0 if all(j["status"] == "ok" for j in judgments) else 1)

    # A second judge (one word of the wording changed) over the same answers (read from the shared cache),
    # and the two combined as a panel: the question runs are the same question set and answers.
    reworded = [{**r, "system_prompt": r["system_prompt"].replace("fair", "strict")} for r in PROMPTS]
    other = tmp_path / "run-strict"
    main(["judge", "run", "--model", "hf", "--model-args", model, "--protocol", _write(tmp_path, reworded, "strict.jsonl"),
          "--judge-max-new-tokens", str(JUDGE_TOKENS), "--questions", questions_path,
          "--baseline", f"base=hf:{model},gen.max_new_tokens={ANSWER_TOKENS}",
          "--candidate", f"terse=hf:{model},gen.max_new_tokens={ANSWER_TOKENS},gen.system=Answer in one word.",
          "--rounds", "20", "--cache", str(out / "cache.sqlite"), "--out", str(other)])  # fmt: skip
    strict = json.loads((other / "results.json").read_text())
    assert strict["this_run"]["answer_turns_generated"] == 0 and strict["protocol"]["sha256"] != results["protocol"]["sha256"]
    capsys.readouterr()
    assert main(["judge", "panel", f"fair={out}", f"strict={other}", "--out", str(tmp_path / "panel"), "--rounds", "20"]) == 0
    panel = json.loads((tmp_path / "panel" / "panel.json").read_text())
    assert panel["kind"] == "pairwise" and panel["questions_sha256"] == results["questions"]["sha256"]


def test_answers_holding_a_verdict_are_counted_for_a_note():
    """FastChat's rule reads the first verdict in the judge's text: an answer carrying one (that a judge
    may quote) is counted, so the report can say so beside the scores."""
    texts = ["Paris.", "Paris. Rating: [[10]]", "See [3].", "I win [[A]]", "[[8, 2]]"]
    assert verdict_lookalikes([SINGLE], texts) == 2  # [[10]] and [3]
    assert verdict_lookalikes([PAIR], texts) == 1  # [[A]]
    assert verdict_lookalikes([PAIR_SCORES], texts) == 1  # [[8, 2]]
    assert verdict_lookalikes([PAIR, SINGLE], texts) == 3
    assert verdict_lookalikes([PODIUM_SINGLE], texts) == 0  # Podium's rule: the last score, not the first
