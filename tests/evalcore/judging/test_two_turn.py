"""Two-turn (MT-Bench style) and reference-guided single-answer grading: the two-turn protocols, the
answers to both turns (turn 2 with turn 1's answer in its context), one grade per turn with the right
protocol, judge-written references, and the caches that make a re-run free. The real SmolLM2-135M
answers and judges (it grades poorly: these tests check the pipeline, not the grades); a scripted
OpenAI-compatible chat endpoint gives the deterministic paths (scores read, cache hits, endpoint errors)."""

from __future__ import annotations

import dataclasses
import json

import pytest
import yaml

from evalcore.judging import (
    JudgmentCache,
    MemoryStore,
    judge_key,
    load_protocol,
    prompt_sha256,
    protocol_from_dict,
)
from evalcore.judging.answering import MT_BENCH_TEMPERATURES, answer_questions
from evalcore.judging.grading import (
    GradingProtocols,
    conversation_slots,
    grade_conversations,
    judge_references,
    load_grading_protocols,
)
from evalcore.judging.questions import SAMPLE_QUESTIONS, JudgeQuestion, read_questions
from evalcore.models import load_backend
from tests.evalcore.models.test_openai_backend import scripted  # noqa: F401 - a fixture

TWO_TURN = {
    "name": "t2",
    "kind": "single",
    "turns": 2,
    "user": "{question_1} {answer_1} {question_2} {answer_2}",
    "verdict": {"method": "generate", "max_new_tokens": 8, "score": {"regex": r"\[\[(\d+)\]\]", "min": 1, "max": 10}},
}
# The hashes of the protocols bundled before two-turn protocols existed: the judgments and grades
# cached under them must stay valid (a one-turn protocol's hash does not mention turns).
PINNED = {
    "alpacaeval-logprob": "f62bd94ead20acaa370429ec2c9d71e4953e6156fd9bcaab63dfede75e476fd8",
    "arena-hard": "755c295984b0f0a0a62bed5aca08239eba845492f0677fab164d46a193bbb3b2",
    "mt-bench-pairwise": "1980aab80a4b7ff39e832a648f221c35cf96b9b68c8b762c81b8ceef4a87ea6d",
    "mt-bench-single": "5844684ad00af29ba8349101e34fabfca5ceda8c9e0fda4c158865d4089cc85f",
}


class Recording:
    """A backend that records every generation request and chat call of the backend it wraps."""

    def __init__(self, backend):
        self.backend = backend
        self.requests: list = []
        self.chats: list = []

    def __getattr__(self, name):
        return getattr(self.backend, name)

    def generate_until(self, requests, *, progress=None):
        self.requests.extend(requests)
        return self.backend.generate_until(requests, progress=progress)

    def chat(self, messages, params=None):
        self.chats.append(messages)
        return self.backend.chat(messages, params)


def short(family: GradingProtocols, max_new_tokens: int, **verdict) -> GradingProtocols:
    """The same family with short judge answers (CPU time) and other verdict fields changed."""
    def cut(p):
        return p and dataclasses.replace(p, verdict=dataclasses.replace(p.verdict, max_new_tokens=max_new_tokens,
                                                                        **verdict))

    return GradingProtocols(cut(family.single), cut(family.single_multi), cut(family.reference),
                            cut(family.reference_multi), family.reference_categories)  # fmt: skip


def sample(*ids: str) -> list[JudgeQuestion]:
    by_id = {q.question_id: q for q in read_questions(SAMPLE_QUESTIONS)}
    return [by_id[i] for i in ids]


def events(text: str):
    """A scripted chat answer: one streamed delta, then [DONE]."""
    delta = json.dumps({"choices": [{"delta": {"content": text}, "finish_reason": "stop"}]})
    return ("events", [delta, "[DONE]"], None)


# -- protocols -----------------------------------------------------------------------------------------
def test_one_turn_hashes_are_unchanged_and_the_family_loads():
    for name, sha in PINNED.items():
        protocol = load_protocol(name)
        assert protocol.sha256 == sha and "turns" not in protocol.as_dict()
    # the bundled sample covers MT-Bench's eight categories, each with FastChat's answer temperature
    assert {q.category for q in read_questions(SAMPLE_QUESTIONS)} == set(MT_BENCH_TEMPERATURES)
    family = load_grading_protocols()
    assert (family.single.name, family.single_multi.name, family.reference.name, family.reference_multi.name) == (
        "mt-bench-single", "mt-bench-single-multi", "mt-bench-single-reference", "mt-bench-single-reference-multi"
    )  # fmt: skip
    assert family.single_multi.turns == family.reference_multi.turns == 2
    assert family.reference.uses_reference and family.reference_multi.reference_placeholders == (
        "reference_1", "reference_2")
    for member in (family.single_multi, family.reference, family.reference_multi):
        assert member.source.startswith("Podium's own wording, after FastChat's") and "judge_prompts.jsonl" in member.source
    assert len(family.sha256) == 64
    assert family.sha256 != dataclasses.replace(family, reference_categories=("math",)).sha256
    assert family.sha256 != dataclasses.replace(family, reference_multi=None).sha256
    one = load_grading_protocols("mt-bench-single")
    assert one == GradingProtocols(single=family.single) and one.sha256 != family.sha256
    with pytest.raises(ValueError, match="neither a grading family"):
        load_grading_protocols("mt-bench-single-multi")
    with pytest.raises(ValueError, match="neither a grading family"):
        load_grading_protocols("arena-hard")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"user": "{question} {answer}"}, "placeholder {question}, not allowed in a two-turn single protocol"),
        ({"user": "{question_1} {answer_1} {question_2}"}, "missing the placeholder {answer_2}"),
        ({"user": "{question_1} {answer_1} {question_2} {answer_2} {reference}"}, "placeholder {reference}, not allowed"),
        ({"user": "{question_1} {answer_1} {question_2} {answer_2} {answer_3}"}, "placeholder {answer_3}"),
        ({"system": "{question_3}"}, "system template has placeholder {question_3}"),
        ({"turns": 3}, "turns must be 1 or 2, got 3"),
        ({"turns": True}, "turns must be 1 or 2, got True"),
        ({"turns": "2"}, "turns must be 1 or 2"),
        ({"turns": 2.0}, "turns must be 1 or 2, got 2.0"),
        ({"kind": "pairwise"}, "placeholder {answer_1}, not allowed in a two-turn pairwise protocol"),
        ({"turns": 1}, "placeholder {question_1}, not allowed in a single protocol"),
    ],
)
def test_two_turn_protocols_are_validated(changes, message):
    with pytest.raises(ValueError, match=message.replace("{", r"\{").replace("}", r"\}")):
        protocol_from_dict({**TWO_TURN, **changes})


def test_two_turn_placeholders_are_filled_in_one_pass(tmp_path):
    guided = {**TWO_TURN, "user": TWO_TURN["user"] + " {reference_2}"}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(guided))
    protocol = load_protocol(path)
    assert protocol.turns == 2 and protocol.reference_placeholders == ("reference_2",)
    assert protocol.as_dict()["turns"] == 2 and protocol.sha256 != protocol_from_dict({**guided, "turns": 1,
        "user": "{question} {answer}"}).sha256  # fmt: skip
    messages = protocol.conversation_messages(questions=("Q1", "Q2 {answer_1}"), answers=("A1 {answer_2}", "A2"),
                                              references=("R1", "R2"))  # fmt: skip
    assert messages == [{"role": "user", "content": "Q1 A1 {answer_2} Q2 {answer_1} A2 R2"}]
    with pytest.raises(ValueError, match="reference-guided: it needs a reference answer per turn"):
        protocol.conversation_messages(questions=("Q1", "Q2"), answers=("A1", "A2"))
    with pytest.raises(ValueError, match="grades 2 turn"):
        protocol.conversation_messages(questions=("Q1",), answers=("A1",))
    with pytest.raises(ValueError, match="build its prompt with conversation_messages"):
        protocol.messages(question="Q", answer="A")


def test_families_and_inputs_are_checked_before_any_model_call():
    family = load_grading_protocols()
    with pytest.raises(ValueError, match="single_multi: protocol 'mt-bench-single' grades 1 turn"):
        GradingProtocols(single=family.single, single_multi=family.single)
    with pytest.raises(ValueError, match="reference: protocol 'mt-bench-single' needs a reference placeholder"):
        GradingProtocols(single=family.single, reference=family.single)
    # A reference-guided protocol alone grades every question against its reference; beside reference
    # members, or with a plain turn-2 protocol, it is refused.
    lone = GradingProtocols(single=family.reference, single_multi=family.reference_multi)
    assert lone.all_guided and lone.guided("writing") and not family.all_guided
    with pytest.raises(ValueError, match="a family with reference members needs a single protocol without a reference"):
        GradingProtocols(single=family.reference, reference=family.reference)
    with pytest.raises(ValueError, match="single_multi: protocol 'mt-bench-single-multi' needs a reference placeholder"):
        GradingProtocols(single=family.reference, single_multi=family.single_multi)
    with pytest.raises(ValueError, match=r"question 'writing-1' \(index 1\): the protocol 'mt-bench-single-reference' "
                                         "grades against a reference answer, and this question has none"):
        grade_conversations(None, lone, sample("math-1", "writing-1"), [("a", "b"), ("c", "d")])
    with pytest.raises(ValueError, match="single-answer protocols"):
        GradingProtocols(single=load_protocol("arena-hard"))
    questions = sample("math-1", "writing-1")
    answers = [("a", "b"), ("c", "d")]
    with pytest.raises(ValueError, match="has two turns, and the protocol 'mt-bench-single' grades one turn only"):
        grade_conversations(None, GradingProtocols(single=family.single), questions, answers)
    with pytest.raises(ValueError, match="1 answer tuples for 2 questions"):
        grade_conversations(None, family, questions, answers[:1])
    with pytest.raises(ValueError, match=r"question 'writing-1' \(index 1\): needs 2 answer string"):
        grade_conversations(None, family, questions, [("a", "b"), ("c",)])
    with pytest.raises(ValueError, match="question 'math-1' \\(index 0\\): 1 reference"):
        grade_conversations(None, family, questions, answers, references={"math-1": ("only one",)})
    with pytest.raises(ValueError, match="max_new_tokens must be a positive integer"):
        judge_references(None, questions, max_new_tokens=0)
    with pytest.raises(ValueError, match="not one string"):
        judge_references(None, questions, max_new_tokens=4, categories="math")
    assert GradingProtocols(single=family.single, reference_categories=["math"]).reference_categories == ("math",)
    one_turn = [JudgeQuestion("q", ("Hi?",))]  # a family of one grades one-turn questions
    assert [s.protocol.name for s in conversation_slots(GradingProtocols(single=family.single), one_turn, [("Hello",)])] \
        == ["mt-bench-single"]  # fmt: skip


def test_the_reference_protocol_is_chosen_by_category_and_reference():
    family = load_grading_protocols()
    questions = sample("math-1", "writing-1", "coding-1")
    answers = [("A1", "A2")] * 3
    slots = conversation_slots(family, questions, answers, references={"writing-1": ("W1", "W2")})
    assert [(s.item_id, s.protocol.name) for s in slots] == [
        ("math-1/t1", "mt-bench-single-reference"), ("math-1/t2", "mt-bench-single-reference-multi"),
        ("writing-1/t1", "mt-bench-single"), ("writing-1/t2", "mt-bench-single-multi"),  # not a reference category
        ("coding-1/t1", "mt-bench-single-reference"), ("coding-1/t2", "mt-bench-single-reference-multi"),
    ]  # fmt: skip
    math = questions[0]
    turn2 = slots[1].messages[-1]["content"]
    for text in (*math.turns, *math.references, "A1", "A2"):
        assert text in turn2
    assert turn2.index(math.references[1]) < turn2.index("conversation between the user and the assistant")
    ours = turn2[turn2.index("conversation between the user and the assistant"):]  # after the reference conversation
    assert ours.index(math.turns[0]) < ours.index("A1") < ours.index(math.turns[1]) < ours.index("A2")
    # references given to the call win over the question's own; none at all: the plain protocols
    slots = conversation_slots(family, questions[:1], answers[:1], references={"math-1": ("R-one", "R-two")})
    assert "R-two" in slots[1].messages[-1]["content"] and math.references[1] not in slots[1].messages[-1]["content"]
    bare = [dataclasses.replace(q, references=()) for q in questions]
    assert {s.protocol.name for s in conversation_slots(family, bare, answers)} == {
        "mt-bench-single", "mt-bench-single-multi"}
    assert {s.protocol.name for s in conversation_slots(dataclasses.replace(family, reference=None,
            reference_multi=None), questions, answers)} == {"mt-bench-single", "mt-bench-single-multi"}  # fmt: skip


# -- the real SmolLM2 ------------------------------------------------------------------------------------
def test_turn_two_is_answered_with_turn_one_in_its_context(judge):
    smollm2 = judge  # the same real SmolLM2, loaded once for this file
    model = Recording(smollm2)
    questions = [*sample("math-1"), JudgeQuestion("one", ("Say hello.",))]
    done = []
    answers = answer_questions(model, questions, max_new_tokens=8, system_prompt="Be brief.", progress=done.append)
    assert [len(a) for a in answers] == [2, 1] and all(isinstance(t, str) for a in answers for t in a)
    assert len(model.requests) == 3 and sum(done) == 3  # turn 1 of both, in one batch; then turn 2
    assert [(r.seed, r.do_sample, r.max_gen_toks) for r in model.requests] == [(0, False, 8), (1, False, 8), (0, False, 8)]
    system = {"role": "system", "content": "Be brief."}
    math = questions[0]
    assert model.requests[0].context == smollm2.chat_context([system, {"role": "user", "content": math.turns[0]}])
    expected = smollm2.chat_context([
        system, {"role": "user", "content": math.turns[0]}, {"role": "assistant", "content": answers[0][0]},
        {"role": "user", "content": math.turns[1]},
    ])  # fmt: skip
    assert model.requests[2].context == expected and answers[0][0].strip() in expected
    # sampled: seeded per question, so a retry gives the same answers
    sampled = Recording(smollm2)
    first = answer_questions(sampled, questions[1:], max_new_tokens=4, temperature=0.9, seed=7)
    assert [(r.seed, r.do_sample) for r in sampled.requests] == [(7, True)]
    assert answer_questions(smollm2, questions[1:], max_new_tokens=4, temperature=0.9, seed=7) == first


def test_grading_conversations_with_the_real_judge(judge):
    # Any number the judge writes is its score (a 135M judge rarely writes [[n]] in 6 tokens): some
    # grades succeed, others fail, and both paths run.
    family = short(load_grading_protocols(), 6, score_regex=r"(\d+)", score_min=0.0, score_max=1e6)
    questions = sample("math-1", "writing-1")
    answers = [("The area is 108 square centimetres.", "It grows by 52."), ("Dear neighbours, ...", "Roses are red.")]
    cache = JudgmentCache(MemoryStore(), judge_key=judge_key(judge), protocol_sha256=family.sha256)
    recorded = Recording(judge)
    grades = grade_conversations(recorded, family, questions, answers, cache=cache)
    assert [(g.item_id, g.protocol, g.reference) for g in grades] == [
        ("math-1/t1", "mt-bench-single-reference", True), ("math-1/t2", "mt-bench-single-reference-multi", True),
        ("writing-1/t1", "mt-bench-single", False), ("writing-1/t2", "mt-bench-single-multi", False),
    ]  # fmt: skip
    assert len(recorded.requests) == 4 and all(r.max_gen_toks == 6 for r in recorded.requests)
    for grade, slot in zip(grades, conversation_slots(family, questions, answers)):
        assert grade.prompt_sha256 == prompt_sha256(slot.messages, None) and grade.protocol_sha256 == slot.protocol.sha256
        assert grade.status in ("ok", "failed") and (grade.score is not None) == (grade.status == "ok")
        assert grade.raw is not None and not grade.cached
        if grade.status == "failed":  # kept as failed, never a score
            assert "no score" in grade.error or "outside" in grade.error
    # A re-run: the successful grades come from the cache, only the failed ones are asked again.
    again = Recording(judge)
    rerun = grade_conversations(again, family, questions, answers, cache=cache)
    failed = [g.item_id for g in grades if g.status != "ok"]
    assert len(again.requests) == len(failed)
    assert [g.cached for g in rerun] == [g.status == "ok" for g in grades]
    assert [(g.status, g.score, g.raw) for g in rerun] == [(g.status, g.score, g.raw) for g in grades]  # greedy


def test_judge_written_references_are_cached(judge):
    questions = [dataclasses.replace(q, references=()) for q in sample("math-1", "writing-1")]
    cache = JudgmentCache(MemoryStore(), judge_key=judge_key(judge), protocol_sha256="f" * 64)
    recorded = Recording(judge)
    references = judge_references(recorded, questions, max_new_tokens=6, cache=cache)
    assert len(recorded.requests) == 4 and set(references) <= {"math-1", "writing-1"}
    assert all(len(r) == 2 for r in references.values())
    if "math-1" in references:  # its second turn was written with its own first answer in context
        assert references["math-1"][0].strip() in recorded.requests[2].context
    again = Recording(judge)
    assert judge_references(again, questions, max_new_tokens=6, cache=cache) == references and not again.requests
    other_protocol = JudgmentCache(cache.store, judge_key=cache.judge_key, protocol_sha256="0" * 64)
    assert judge_references(again, questions[:1], max_new_tokens=6, cache=other_protocol, categories=("Math",)) \
        == {k: v for k, v in references.items() if k == "math-1"} and not again.requests  # fmt: skip
    judge_references(again, questions[:1], max_new_tokens=5, cache=cache)  # another length: written again
    assert len(again.requests) == 2
    slots = conversation_slots(load_grading_protocols(), questions, [("a", "b")] * 2, references=references)
    if "math-1" in references:
        assert slots[1].protocol.name == "mt-bench-single-reference-multi"
        assert references["math-1"][1] in slots[1].messages[-1]["content"]


# -- an OpenAI-compatible chat endpoint ------------------------------------------------------------------------
def test_answers_and_grades_through_a_chat_endpoint(scripted, smollm2_dir):  # noqa: F811 - the fixture
    script, url = scripted(events("Paris."))
    model = load_backend("openai", base_url=url, model="m")
    questions = [JudgeQuestion("geo", ("Capital of France?", "And of Italy?"), "stem"), JudgeQuestion("hi", ("Hi",))]
    done = []
    answers = answer_questions(model, questions, max_new_tokens=5, seed=3, progress=done.append)
    assert answers == [("Paris.", "Paris."), ("Paris.",)] and sum(done) == 3
    bodies = [body for _, body in script.seen]
    assert [b["messages"] for b in bodies] == [
        [{"role": "user", "content": "Capital of France?"}],
        [{"role": "user", "content": "Hi"}],
        [{"role": "user", "content": "Capital of France?"}, {"role": "assistant", "content": "Paris."},
         {"role": "user", "content": "And of Italy?"}],
    ]  # fmt: skip
    assert [(b["seed"], b["max_tokens"], b["temperature"]) for b in bodies] == [(3, 5, 0.0), (4, 5, 0.0), (3, 5, 0.0)]
    answer_questions(model, questions, max_new_tokens=5, temperatures={"STEM": 0.5})  # a temperature by category
    assert [body["temperature"] for _, body in script.seen[3:]] == [0.5, 0.0, 0.5]
    for bad in ({"temperature": -1.0}, {"temperature": float("nan")}, {"temperatures": {"stem": True}},
                {"top_p": 0.0}, {"max_new_tokens": 0}):
        with pytest.raises(ValueError, match="temperature|top_p|max_new_tokens"):
            answer_questions(model, questions, **{"max_new_tokens": 5, **bad})
    assert len(script.seen) == 6  # refused before any request
    # openai-chat renders its tokenizer's template only for log-likelihood tasks: answers go as messages
    chat = load_backend("openai-chat", base_url=url, model="m", tokenizer=str(smollm2_dir))
    assert answer_questions(chat, questions[:1], max_new_tokens=5) == [("Paris.", "Paris.")]
    assert script.seen[-1][1]["messages"] == bodies[2]["messages"]

    script, url = scripted(events("The answer is fine. Rating: [[7]]"))
    judge = load_backend("openai", base_url=url, model="judge")
    family = load_grading_protocols()
    cache = JudgmentCache(MemoryStore(), judge_key=judge_key(judge), protocol_sha256=family.sha256)
    grades = grade_conversations(judge, family, questions, answers, cache=cache)
    assert [(g.item_id, g.status, g.score, g.cached) for g in grades] == [
        ("geo/t1", "ok", 7.0, False), ("geo/t2", "ok", 7.0, False), ("hi/t1", "ok", 7.0, False)
    ]  # fmt: skip
    judged = script.seen[1][1]["messages"][-1]["content"]  # geo, turn 2: the whole conversation
    assert all(t in judged for t in ("Capital of France?", "Paris.", "And of Italy?"))
    calls = len(script.seen)
    assert [g.cached for g in grade_conversations(judge, family, questions, answers, cache=cache)] == [True] * 3
    assert len(script.seen) == calls  # a re-run costs nothing
    # An openai-chat judge given a tokenizer (for log-likelihood tasks) still sends the judge prompt as
    # messages: the server applies its template once, never to a prompt already rendered by ours.
    chat_judge = load_backend("openai-chat", base_url=url, model="judge", tokenizer=str(smollm2_dir))
    grade_conversations(chat_judge, family, questions[1:], answers[1:])
    sent = script.seen[-1][1]["messages"]
    assert sent[-1]["role"] == "user" and "<|im_start|>" not in json.dumps(sent) and "Hi" in sent[-1]["content"]

    script, url = scripted((500, {"error": {"message": "engine died"}}, None))
    broken = load_backend("openai", base_url=url, model="judge", max_retries=0)
    cache = JudgmentCache(MemoryStore(), judge_key=judge_key(broken), protocol_sha256=family.sha256)
    failed = grade_conversations(broken, family, questions, answers, cache=cache)
    assert [g.status for g in failed] == ["failed"] * 3 and all("engine died" in g.error for g in failed)
    assert all(g.score is None for g in failed) and cache.store.data == {}  # failures are not cached
