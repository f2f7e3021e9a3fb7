"""``python -m evalcore rescore SAMPLES.jsonl --task CONFIG``: recompute metrics from stored responses.

The task config (a YAML file or a task name) may change filters and metrics; the model is not
loaded. Prints the new numbers; ``--output FILE`` writes them as JSON, ``--samples-out FILE`` the
re-scored samples.
"""

from __future__ import annotations

import json
from pathlib import Path

from evalcore.cli import CliError, check_option
from evalcore.cli.run import print_table
from evalcore.engine import TaskConfig, TaskIndex, load_config_file, read_samples, score_records
from evalcore.engine.results import atomic_write, read_results, results_payload, sample_line
from evalcore.engine.scoring import aggregate


def register(subparsers) -> None:
    parser = subparsers.add_parser("rescore", help="recompute metrics from a samples file without a model")
    parser.add_argument("samples", help="samples_<task>.jsonl written by run --log-samples")
    parser.add_argument("--task", required=True, help="task YAML file, or the name of a bundled task")
    parser.add_argument("--include-path", action="append", default=[], metavar="DIR")
    parser.add_argument("--trust-task-code", action="store_true", help="run Python code beside task files (trusted folders only)")
    parser.add_argument("--seed", type=int, default=0, help="seed for bootstrap intervals")
    parser.add_argument("--output", default=None, help="write the numbers as JSON here")
    parser.add_argument("--samples-out", default=None, help="write the re-scored samples here")
    parser.set_defaults(func=run)


def run(args) -> int:
    check_option(args.seed, "--seed", minimum=0)
    if Path(args.task).is_file():
        config = load_config_file(args.task, trusted=args.trust_task_code)
    else:
        index = TaskIndex(args.include_path, trust_task_code=args.trust_task_code)
        if args.task not in index.tasks:
            raise CliError(f"--task {args.task!r} is neither a YAML file nor a task name")
        config = index.tasks[args.task]
    if not isinstance(config, TaskConfig):
        raise CliError(f"{args.task} is a group; rescore one task's samples at a time")
    records = read_samples(args.samples)
    scored = score_records(config, records)
    metrics = aggregate(config, scored, seed=args.seed)
    payload = results_payload({config.task: metrics})
    print_table(read_results(payload))
    if args.output:
        payload = {**payload, "config_sha256": config.sha256, "config": config.raw, "rescored_from": str(args.samples)}
        atomic_write(Path(args.output), json.dumps(payload, indent=2, default=str))
    if args.samples_out:
        atomic_write(Path(args.samples_out), "".join(sample_line(r) + "\n" for r in scored))
    return 0
