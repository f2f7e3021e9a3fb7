"""The leaderboard's data: submissions and their review, frozen suites, runs, scores and samples, judges.

A score is a model plus a protocol: every :class:`EvaluationRun` keeps the protocol and code version
that produced it and its per-document :class:`SampleRecord` rows, so scores can be recomputed from
stored outputs (the old values go to :class:`ScoreHistory`). Results are keyed (submission, suite,
task), (run, metric) and (run, doc_id), so a retried evaluation overwrites and never duplicates.
"""

from leaderboard.models.contamination import (  # noqa: F401
    ContaminationScan,
    MemorisationProbe,
    ScanKind,
    ScanStatus,
    ScanTaskResult,
    TrainingDataFile,
)
from leaderboard.models.evaluation import (  # noqa: F401
    BenchmarkSuite,
    EvaluationRun,
    RunStatus,
    SampleRecord,
    Score,
    ScoreHistory,
)
from leaderboard.models.judging import (  # noqa: F401
    JudgeAnswer,
    JudgeAudit,
    JudgeConfig,
    JudgeGrade,
    JudgeKind,
    JudgeOrder,
    JudgePanel,
    JudgeRun,
    JudgeRunStatus,
    Judgment,
    JudgmentCacheEntry,
    ReferenceMode,
)
from leaderboard.models.rewards import RewardKind, RewardModelResult, RewardStatus  # noqa: F401
from leaderboard.models.submissions import (  # noqa: F401
    NEEDS_BASE_MODEL,
    REVIEW_ACTIONS,
    ModelType,
    Precision,
    Review,
    ReviewAction,
    ReviewKind,
    ReviewTarget,
    Source,
    Submission,
    SubmissionStatus,
    new_public_id,
)
from leaderboard.models.uploads import ApiToken, DraftFile, DraftState, SubmissionDraft  # noqa: F401
