"""The layering rules of DESIGN.md are enforced by import-linter; prove the contract bites."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, clean_env

LINT_IMPORTS = str(Path(sys.executable).parent / "lint-imports")


def _ini_value(value) -> str:
    if isinstance(value, list):
        return "\n    " + "\n    ".join(str(item) for item in value)
    return str(value)


def _touch_module(root: Path, dotted: str) -> None:
    """An empty module (and its parent packages) at ``dotted``; root packages exist already."""
    parts = dotted.split(".")
    if len(parts) < 2:
        return
    for depth in range(2, len(parts)):
        package = root.joinpath(*parts[:depth])
        package.with_suffix(".py").unlink(missing_ok=True)  # a module named earlier becomes a package
        package.mkdir(exist_ok=True)
        (package / "__init__.py").touch()
    module = root.joinpath(*parts[:-1], f"{parts[-1]}.py")
    if not module.with_suffix("").is_dir():
        module.touch()


def write_config(tmp_path: Path) -> None:
    """The project's own contracts, over a throwaway tree of packages with the same names (and, for
    layers contracts with containers, an empty module for every layer they name)."""
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    lines = ["[importlinter]", "root_packages =\n    " + "\n    ".join(config["root_packages"])]
    lines.append("include_external_packages = True")
    for package in config["root_packages"]:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    for index, contract in enumerate(config["contracts"]):
        lines.append(f"\n[importlinter:contract:{index}]")
        lines += [f"{key} = {_ini_value(value)}" for key, value in contract.items()]
        containers = contract.get("containers") or [""]
        for container in containers:
            for layer in contract.get("layers", []):
                for tail in re.split(r"[|:]", layer):
                    name = tail.strip().strip("()")
                    _touch_module(tmp_path, f"{container}.{name}" if container else name)
    for contract in config["contracts"]:  # then the submodules forbidden contracts name (evalcore.jail, ...)
        for key in ("source_modules", "forbidden_modules"):
            for name in contract.get(key, []):
                if name.split(".")[0] in config["root_packages"]:
                    _touch_module(tmp_path, name)
    (tmp_path / ".importlinter").write_text("\n".join(lines) + "\n")


def lint(tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [LINT_IMPORTS, "--config", ".importlinter", "--no-cache"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def lint_tree(tmp_path: Path, files: dict[str, str]) -> subprocess.CompletedProcess:
    """The project's contracts over a throwaway tree with ``files`` (path: text) written into it."""
    write_config(tmp_path)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return lint(tmp_path)


KEPT = {
    "a clean tree": {"evalcore/ratings.py": "import numpy\n"},
    "imports downwards": {
        "leaderboard/views.py": "import arena\nimport common\nimport evalcore\n",
        "common/health.py": "import workers\n",
    },
    "the arena's downward direction": {
        "arena/tasks.py": "from arena.play import battles, dispatch\n",
        "arena/votes/casting.py": "from arena.play import dispatch\nfrom arena import models\n",
        "arena/votes/exports.py": "from arena.votes import selectors\n",
    },
}

# What is written, and what the report must say: the contract that breaks, and the import or module.
BROKEN = {
    "evalcore imports Django": ({"evalcore/ratings.py": "from django.db import models\n"}, ["evalcore is a library"]),
    "workers import an app": ({"workers/runtime.py": "import arena\n"}, ["workers import no Django app"]),
    "a lower layer imports a higher one": (
        {"common/streaming.py": "import arena\n"},
        ["Layers: config -> leaderboard -> arena -> common -> workers -> evalcore BROKEN"],
    ),
    "an arena service imports a task": (
        {"arena/votes/casting.py": "from arena import tasks\n"},
        ["arena: the wiring above six rooms", "arena.votes.casting -> arena.tasks"],
    ),
    "two arena entry points import each other": (
        {"arena/play/views.py": "from arena.publication import api\n"},
        ["arena: entry points, then services"],
    ),
    "a flat module at the arena's top level": ({"arena/vote_helpers.py": ""}, ["arena.vote_helpers"]),
    "a room module not placed": ({"arena/ratings/shortcuts.py": ""}, ["arena.ratings.shortcuts"]),
    "a room importing a room it may not": (
        {"arena/play/sampling.py": "from arena.ratings import selectors\n"},
        ["arena.play never imports ratings", "arena.play.sampling -> arena.ratings.selectors"],
    ),
    "the jail imports the engine": (
        {"evalcore/jail/sandbox.py": "import evalcore.engine\n"},
        ["evalcore.jail is not allowed to import evalcore.engine"],
    ),
    "a flat module in evalcore": ({"evalcore/helpers.py": ""}, ["evalcore.helpers"]),
}


@pytest.mark.parametrize("files", KEPT.values(), ids=KEPT.keys())
def test_contracts_keep_what_points_down(tmp_path, files):
    result = lint_tree(tmp_path, files)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(("files", "said"), BROKEN.values(), ids=BROKEN.keys())
def test_contracts_break_on_what_they_forbid(tmp_path, files, said):
    """Each contract bites: the import or module named, under a BROKEN contract (a long name wraps)."""
    result = lint_tree(tmp_path, files)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "BROKEN" in result.stdout
    for text in said:
        assert text in result.stdout, result.stdout


def test_the_web_process_does_not_import_model_libraries(tmp_path):
    """The WSGI and ASGI applications with every URL module loaded, and a battle's work dispatched by
    name: none of it loads torch or transformers (seconds and hundreds of MB per web process), nor
    scipy.stats or scipy.optimize (0.45 s and 0.17 s of every process's start: scipy.special's functions
    do the same sums; the rest is imported where it is used)."""
    script = (
        "import sys, django; django.setup(); import config.wsgi, config.asgi; "
        "from django.urls import get_resolver; get_resolver().url_patterns; "
        "from arena.play import battles, dispatch; from arena.votes import casting, voters; "
        "from arena.publication import holds, releases; dispatch.app.tasks; "
        "print(sorted(m for m in ('torch', 'transformers', 'vllm', 'arena.tasks', 'scipy.stats', 'scipy.optimize') if m in sys.modules))"
    )
    env = clean_env(DJANGO_SETTINGS_MODULE="config.settings.dev", PODIUM_VAR_DIR=str(tmp_path))
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, env=env, capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_workers_name_no_app_task():
    """workers/ holds the Celery app and runtime: routes, beat entries and the like that name an app's
    task belong to the app (the task's own queue) or to settings (the beat schedule)."""
    named = [
        f"{path.relative_to(REPO_ROOT)}: {match}"
        for path in sorted((REPO_ROOT / "workers").rglob("*.py"))
        for match in re.findall(r"\b(?:arena|leaderboard)\.tasks(?:\.\w+)?", path.read_text())
    ]
    assert not named, named
