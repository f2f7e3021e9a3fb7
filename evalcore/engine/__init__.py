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


def run_tasks(backend, names: list[str], *, include_paths=(), **options) -> RunResult:
    """Resolve task/group/tag ``names`` (bundled + ``include_paths``) and :func:`evaluate` them.

    ``options`` are :func:`evaluate`'s: ``num_fewshot``, ``limit``, ``seed``, ``fewshot_seed``,
    ``progress``.
    """
    index = TaskIndex(list(include_paths))
    tasks, groups = index.resolve(list(names))
    return evaluate(backend, tasks, groups=groups, index=index, **options)


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
    "run_tasks",
    "score_records",
    "task_config_from_mapping",
    "write_run",
]
