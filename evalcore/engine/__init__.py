"""The benchmark engine: harness-compatible YAML tasks, three request kinds, recorded protocols.

Entry points: :class:`TaskIndex` (find tasks by name), :func:`evaluate` (run tasks on a model
backend), :func:`write_run` (results JSON + samples), :func:`rescore` (re-score stored samples).
"""

from evalcore.engine.config import GroupConfig, TaskConfig, load_config_file, task_config_from_mapping
from evalcore.engine.metrics import MetricValue
from evalcore.engine.registry import TaskIndex
from evalcore.engine.results import read_samples, write_run
from evalcore.engine.runner import RunResult, TaskResult, evaluate, evaluate_task
from evalcore.engine.scoring import aggregate, score_records


def rescore(records: list[dict], config: TaskConfig, *, seed: int = 0) -> dict[str, MetricValue]:
    """Re-score stored records under ``config`` (its filters and metrics) without a model."""
    return aggregate(config, score_records(config, records), seed=seed)


__all__ = [
    "GroupConfig",
    "MetricValue",
    "RunResult",
    "TaskConfig",
    "TaskIndex",
    "TaskResult",
    "aggregate",
    "evaluate",
    "evaluate_task",
    "load_config_file",
    "read_samples",
    "rescore",
    "score_records",
    "task_config_from_mapping",
    "write_run",
]
