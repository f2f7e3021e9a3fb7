"""``python -m evalcore tasks``: list the bundled tasks, groups and tags (and those of include paths)."""

from __future__ import annotations

from evalcore.engine.registry import TaskIndex


def register(subparsers) -> None:
    parser = subparsers.add_parser("tasks", help="list benchmark tasks, groups and tags")
    parser.add_argument("--include-path", action="append", default=[], metavar="DIR", help="also list the task YAML files in DIR")
    parser.add_argument("--groups", action="store_true", help="list only groups and tags")
    parser.add_argument("--trust-task-code", action="store_true", help="load Python code beside the task files (trusted folders only)")
    parser.set_defaults(func=run)


def run(args) -> int:
    index = TaskIndex(args.include_path, trust_task_code=args.trust_task_code)
    for name in sorted(index.groups):
        print(f"{name}\tgroup\t{len(index.group_members(index.groups[name]))} tasks")
    for name in sorted(index.tags):
        print(f"{name}\ttag\t{len(index.tags[name])} tasks")
    if not args.groups:
        for name in sorted(index.tasks):
            config = index.tasks[name]
            version = "-" if config.version is None else f"v{config.version}"
            print(f"{name}\t{config.output_type}\t{version}")
    return 0
