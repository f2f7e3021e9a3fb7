"""The ``python -m evalcore`` command line.

Each subcommand lives in its own module under ``evalcore.cli`` and exposes
``register(subparsers)``, which adds its parser and sets ``func`` (called with the parsed
namespace, returning an exit code). Modules are listed in ``SUBCOMMAND_MODULES`` and imported
lazily, so a subcommand whose heavy dependencies (torch, vllm) are missing does not break the others.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Subcommand modules, in the order they appear in --help. A missing module is skipped,
# so work on one subcommand never breaks the others.
SUBCOMMAND_MODULES = (
    "evalcore.cli.rate",
    "evalcore.cli.lc",
    "evalcore.cli.run",
    "evalcore.cli.tasks",
    "evalcore.cli.rescore",
    "evalcore.cli.serve",
    "evalcore.cli.judge",
    "evalcore.cli.contamination",
)


class CliError(Exception):
    """A user error: printed as one line, exit code 2, no traceback."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m evalcore", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except (CliError, ValueError, OSError) as exc:  # OSError: a path that is missing, a file, read-only, full
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
