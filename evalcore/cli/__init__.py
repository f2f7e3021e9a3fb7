"""The ``python -m evalcore`` command line.

Each subcommand lives in its own module under ``evalcore.cli`` and exposes
``register(subparsers)``, which adds its parser and sets ``func`` (called with the parsed
namespace, returning an exit code). Modules are listed in ``SUBCOMMAND_MODULES`` and imported
lazily, so a subcommand whose heavy dependencies (torch, vllm) are missing does not break the others.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings

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
    "evalcore.cli.grade",  # judge grade; after judge, whose subcommands it joins
    "evalcore.cli.judge_panel",  # judge panel; likewise
    "evalcore.cli.categorize",
    "evalcore.cli.contamination",
    "evalcore.cli.reward",
)


class CliError(Exception):
    """A user error: printed as one line, exit code 2, no traceback."""


def check_option(value, option: str, *, minimum: int = 1) -> None:
    """Refuse an integer option below ``minimum``, naming the option as the user typed it.

    Commands call this first, before any file is read or model loaded, so a typo costs nothing.
    ``None`` (an option left out) passes.
    """
    if value is not None and value < minimum:
        raise CliError(f"{option} must be at least {minimum}, got {value}")


def task_names(text: str, option: str = "--tasks") -> list[str]:
    """The comma-separated names in ``text``; an empty list is refused."""
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise CliError(f"{option} names no task")
    return names


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


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_default_showwarning = warnings.showwarning


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """evalcore's own warnings (a skipped task file) as one ``warning:`` line; others as Python shows them."""
    if os.path.abspath(filename).startswith(_PACKAGE_DIR + os.sep):
        print(f"warning: {message}", file=file or sys.stderr)
    else:
        _default_showwarning(message, category, filename, lineno, file, line)


def main(argv: list[str] | None = None) -> int:
    previous, warnings.showwarning = warnings.showwarning, _show_warning
    try:
        return _main(argv)
    finally:
        warnings.showwarning = previous


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
        return code
    except BrokenPipeError:
        # The reader went away (`... | head`): stop quietly, as Unix tools do. Point stdout at
        # /dev/null so the interpreter's final flush does not raise a second time.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (AttributeError, ValueError, OSError):  # stdout is not a file (captured): nothing to flush
            pass
        return 141
    except (CliError, ValueError, OSError) as exc:  # OSError: a path that is missing, a file, read-only, full
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
