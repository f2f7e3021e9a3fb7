"""Model judges: protocols, both-order judging, cached judgments, audits and judge-based scores.

See ``docs/judging.md``. The public API::

    load_protocol(path_or_name, tokenizer=None) -> JudgeProtocol     # protocol.py
    read_pairs(path) -> list[PairItem]                               # records.py (LLMBar format)
    judge_pairs(backend, protocol, pairs, cache=...) -> list[Judgment]   # judge.py, both orders
    pair_outcomes(judgments) -> (list[PairOutcome], failed ids)      # swap-average, both-agree
    audit_report(judgments, labels, rounds=, seed=) -> dict          # audit.py
    grade_answers(backend, single_protocol, items, cache=...) -> list[Grade]   # grading.py, 1-10
    read_questions(path, references_path=) / questions_from_items(items) -> list[JudgeQuestion]  # questions.py
    answer_questions(backend, questions, max_new_tokens=) -> [(turn 1 answer, turn 2 answer), ...]  # answering.py
    grade_conversations(judge, load_grading_protocols(), questions, answers, cache=) -> list[Grade]  # per turn
    judge_references(judge, questions, max_new_tokens=, cache=) -> {question_id: (ref 1, ref 2)}
    judge_run(judge, protocol, answers, baseline=, ...) -> JudgeRunResult   # run.py
    JudgmentCache(store, judge_key=, protocol_sha256=), SqliteStore, MemoryStore   # cache.py
"""

from evalcore.judging.answering import answer_questions
from evalcore.judging.audit import (
    audit_report,
    self_preference_report,
    verbosity_pairs,
    verbosity_report,
)
from evalcore.judging.cache import AnswerCache, JudgmentCache, JudgmentStore, MemoryStore, SqliteStore
from evalcore.judging.grading import (
    Grade,
    GradeItem,
    GradingProtocols,
    grade_answers,
    grade_conversations,
    judge_references,
    load_grading_protocols,
)
from evalcore.judging.judge import judge_key, judge_pairs, parse_generated, parse_score, prompt_sha256
from evalcore.judging.protocol import (
    JudgeProtocol,
    Outcome,
    Verdict,
    bundled_protocols,
    load_protocol,
    protocol_from_dict,
)
from evalcore.judging.questions import (
    SAMPLE_QUESTIONS,
    JudgeQuestion,
    questions_from_items,
    questions_sha256,
    read_questions,
)
from evalcore.judging.records import (
    ORDERS,
    Judgment,
    PairItem,
    PairOutcome,
    combine_orders,
    pair_outcomes,
    read_pairs,
)

__all__ = [
    "ORDERS",
    "SAMPLE_QUESTIONS",
    "AnswerCache",
    "Grade",
    "GradeItem",
    "GradingProtocols",
    "JudgeProtocol",
    "JudgeQuestion",
    "Judgment",
    "JudgmentCache",
    "JudgmentStore",
    "MemoryStore",
    "Outcome",
    "PairItem",
    "PairOutcome",
    "SqliteStore",
    "Verdict",
    "answer_questions",
    "audit_report",
    "bundled_protocols",
    "combine_orders",
    "grade_answers",
    "grade_conversations",
    "judge_key",
    "judge_pairs",
    "judge_references",
    "load_grading_protocols",
    "load_protocol",
    "pair_outcomes",
    "parse_generated",
    "parse_score",
    "prompt_sha256",
    "protocol_from_dict",
    "questions_from_items",
    "questions_sha256",
    "read_questions",
    "read_pairs",
    "self_preference_report",
    "verbosity_pairs",
    "verbosity_report",
]
