"""Python code named by a task file (``!function utils.process_docs``), run only for trusted folders.

A harness task file may name a function in a module beside it: ``!function utils.process_docs``
is ``process_docs`` in ``utils.py`` of the folder that holds the YAML file where the tag is
written (not the folder of the file that includes it). Podium imports such a module only when
the folder is trusted: the bundled tasks, and include paths an operator marks with
``--trust-task-code`` (``TaskIndex(..., trust_task_code=True)``). Content a site user uploads is
never trusted; without the mark a task that names code is refused with a clear error.

A module is imported once per process under a private name (``podium_task_code.<hash>``); the
SHA-256 of its source is part of the tag's text, so a config's hash changes when its code does.
A module that loads Hugging Face ``evaluate``'s ``code_eval`` gets a stand-in that runs every
program in the jail (:mod:`evalcore.jail.code_eval`).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from evalcore.jail import jailed_evaluate

_MODULES: dict[Path, Any] = {}


class PythonFunction:
    """A ``!function module.name`` tag: where it was written and, once trusted, the function."""

    def __init__(self, target: str, base_dir: str = "") -> None:
        self.target = target
        self.base_dir = base_dir
        self.function = None
        self.source_sha256 = ""

    def __repr__(self) -> str:
        return f"!function {self.target}"

    def __str__(self) -> str:
        suffix = f" sha256:{self.source_sha256[:16]}" if self.source_sha256 else ""
        return f"!function {self.target}{suffix}"

    def __call__(self, *args, **kwargs):
        if self.function is None:
            raise ValueError(f"{self!r} was not loaded: the task folder is not trusted to run Python code")
        return self.function(*args, **kwargs)

    @property
    def name(self) -> str:
        return self.target.rpartition(".")[2]

    def load(self) -> PythonFunction:
        """Import the module and look the function up; errors name the file and the function."""
        if self.function is not None:
            return self
        module_name, _, function_name = self.target.rpartition(".")
        if not module_name or not function_name:
            raise ValueError(f"!function {self.target!r} must be module.function (in {self.base_dir})")
        path = (Path(self.base_dir) / f"{module_name.replace('.', '/')}.py").resolve()
        if path.is_file():
            module = _import(path)
        else:
            module = _import_installed(module_name, self)
            path = Path(getattr(module, "__file__", "") or path)
        function = getattr(module, function_name, None)
        if function is None:
            raise ValueError(f"!function {self.target}: {path} has no {function_name!r}")
        self.function = function
        self.source_sha256 = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
        return self


def _import_installed(module_name: str, function: PythonFunction):
    """A module that is not beside the file: an installed one (``lm_eval.tasks.x.utils``), as the harness."""
    try:
        return importlib.import_module(module_name)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - any import failure (sys.exit too) is a load error
        raise ValueError(
            f"!function {function.target}: no {module_name.replace('.', '/')}.py beside the task file in "
            f"{function.base_dir}, and importing {module_name} failed: {type(exc).__name__}: {exc}"
        ) from None


def _import(path: Path):
    module = _MODULES.get(path)
    if module is not None:
        return module
    name = "podium_task_code.m" + hashlib.sha256(str(path).encode()).hexdigest()[:16]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ValueError(f"cannot import task code {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    # Code that loads evaluate's code_eval gets Podium's, which runs every program in the jail.
    jail = jailed_evaluate(name) if b"code_eval" in path.read_bytes() else contextlib.nullcontext()
    try:
        with jail:
            spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - any import failure is a load error naming the file
        sys.modules.pop(name, None)
        # A task whose module calls sys.exit at import (one that needs a missing program) is one refused
        # file, never the end of the process loading the whole tree.
        what = f"called sys.exit({exc.code!r})" if isinstance(exc, SystemExit) else f"{type(exc).__name__}: {exc}"
        raise ValueError(f"task code {path} failed to import: {what}") from None
    _MODULES[path] = module
    return module


def functions_in(value) -> list[tuple[str, PythonFunction]]:
    """Every ``!function`` inside a mapping or list, with the key path where it appears."""
    found: list[tuple[str, PythonFunction]] = []

    def walk(item, where: str) -> None:
        if isinstance(item, PythonFunction):
            found.append((where, item))
        elif isinstance(item, dict):
            for key, inner in item.items():
                walk(inner, f"{where}.{key}" if where else str(key))
        elif isinstance(item, list):
            for position, inner in enumerate(item):
                walk(inner, f"{where}[{position}]")

    walk(value, "")
    return found


def check_functions(data: dict, source: str, *, trusted: bool) -> None:
    """Load every function of a trusted config; refuse any in an untrusted one."""
    for where, function in functions_in(data):
        if not trusted:
            raise ValueError(
                f"{source}: key {where!r} is {function!r}, Python code that Podium runs only from trusted task "
                "folders (the bundled tasks, or an include path given with --trust-task-code); "
                "write it as a Jinja2 template or a field name"
            )
        function.load()


def is_function(value) -> bool:
    return isinstance(value, PythonFunction) or callable(value)
