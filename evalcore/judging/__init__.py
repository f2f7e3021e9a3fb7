"""Model judges: protocols, both-order judging, cached judgments, audits and judge-based scores.

See ``docs/judging.md``. The public API::

    load_protocol(path_or_name, tokenizer=None) -> JudgeProtocol     # protocol.py
    read_pairs(path) -> list[PairItem]                               # records.py (LLMBar format)
    judge_pairs(backend, protocol, pairs, cache=...) -> list[Judgment]   # judge.py, both orders
    pair_outcomes(judgments) -> (list[PairOutcome], failed ids)      # swap-average, both-agree
    audit_report(judgments, labels, rounds=, seed=) -> dict          # audit.py
    grade_answers(backend, single_protocol, items, cache=...) -> list[Grade]   # grading.py, 1-10
    judge_run(judge, protocol, answers, baseline=, ...) -> JudgeRunResult   # run.py
    JudgmentCache(store, judge_key=, protocol_sha256=), SqliteStore, MemoryStore   # cache.py
"""

from evalcore.judging.audit import (
    audit_report,
    self_preference_report,
    verbosity_pairs,
    verbosity_report,
)
from evalcore.judging.cache import AnswerCache, JudgmentCache, JudgmentStore, MemoryStore, SqliteStore
from evalcore.judging.grading import Grade, GradeItem, grade_answers
from evalcore.judging.judge import judge_key, judge_pairs, parse_generated, parse_score, prompt_sha256
from evalcore.judging.protocol import (
    JudgeProtocol,
    Outcome,
    Verdict,
    bundled_protocols,
    load_protocol,
    protocol_from_dict,
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
    "AnswerCache",
    "Grade",
    "GradeItem",
    "JudgeProtocol",
    "Judgment",
    "JudgmentCache",
    "JudgmentStore",
    "MemoryStore",
    "Outcome",
    "PairItem",
    "PairOutcome",
    "SqliteStore",
    "Verdict",
    "audit_report",
    "bundled_protocols",
    "combine_orders",
    "grade_answers",
    "judge_key",
    "judge_pairs",
    "load_protocol",
    "pair_outcomes",
    "parse_generated",
    "parse_score",
    "prompt_sha256",
    "protocol_from_dict",
    "read_pairs",
    "self_preference_report",
    "verbosity_pairs",
    "verbosity_report",
]
