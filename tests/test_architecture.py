"""The layering rules of DESIGN.md are enforced by import-linter; prove the contract bites."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

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


def test_contract_passes_on_a_clean_tree(tmp_path):
    write_config(tmp_path)
    (tmp_path / "evalcore" / "ratings.py").write_text("import numpy\n")
    result = lint(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_contract_fails_when_evalcore_imports_django(tmp_path):
    write_config(tmp_path)
    (tmp_path / "evalcore" / "ratings.py").write_text("from django.db import models\n")
    result = lint(tmp_path)
    assert result.returncode != 0
    assert "evalcore is a library" in result.stdout
    assert "BROKEN" in result.stdout


def test_contract_fails_when_workers_import_an_app(tmp_path):
    write_config(tmp_path)
    (tmp_path / "workers" / "runtime.py").write_text("import arena\n")
    result = lint(tmp_path)
    assert result.returncode != 0
    assert "workers import no Django app" in result.stdout


def test_layers_contract_fails_when_a_lower_layer_imports_a_higher_one(tmp_path):
    write_config(tmp_path)
    (tmp_path / "common" / "streaming.py").write_text("import arena\n")
    result = lint(tmp_path)
    assert result.returncode != 0
    assert "Layers: config -> leaderboard -> arena -> common -> workers -> evalcore BROKEN" in result.stdout


def test_layers_contract_allows_importing_downwards(tmp_path):
    write_config(tmp_path)
    (tmp_path / "leaderboard" / "views.py").write_text("import arena\nimport common\nimport evalcore\n")
    (tmp_path / "common" / "health.py").write_text("import workers\n")
    result = lint(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_arena_layers_contract_fails_when_a_service_imports_a_task(tmp_path):
    write_config(tmp_path)
    (tmp_path / "arena" / "votes" / "casting.py").write_text("from arena import tasks\n")
    result = lint(tmp_path)
    assert result.returncode != 0
    assert "arena: the wiring above six rooms" in result.stdout and "BROKEN" in result.stdout
    assert "arena.votes.casting -> arena.tasks" in result.stdout


def test_arena_layers_contract_fails_when_two_entry_points_import_each_other(tmp_path):
    write_config(tmp_path)
    (tmp_path / "arena" / "play" / "views.py").write_text("from arena.publication import api\n")
    result = lint(tmp_path)
    assert result.returncode != 0
    assert "arena: entry points, then services" in result.stdout and "BROKEN" in result.stdout


def test_arena_layers_contract_accepts_the_downward_direction(tmp_path):
    write_config(tmp_path)
    (tmp_path / "arena" / "tasks.py").write_text("from arena.play import battles, dispatch\n")
    (tmp_path / "arena" / "votes" / "casting.py").write_text("from arena.play import dispatch\nfrom arena import models\n")
    (tmp_path / "arena" / "votes" / "exports.py").write_text("from arena.votes import selectors\n")
    result = lint(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_module_outside_the_arena_rooms_breaks_the_contract(tmp_path):
    """Only the app's wiring sits at the arena's top level: a new flat module is refused until placed."""
    write_config(tmp_path)
    (tmp_path / "arena" / "vote_helpers.py").write_text("")
    result = lint(tmp_path)
    assert result.returncode != 0
    assert "arena.vote_helpers" in result.stdout


def test_a_room_module_not_placed_breaks_the_contract(tmp_path):
    write_config(tmp_path)
    (tmp_path / "arena" / "ratings" / "shortcuts.py").write_text("")
    result = lint(tmp_path)
    assert result.returncode != 0
    assert "arena.ratings.shortcuts" in result.stdout


def test_a_room_importing_a_room_it_may_not_breaks_the_contract(tmp_path):
    write_config(tmp_path)
    (tmp_path / "arena" / "play" / "sampling.py").write_text("from arena.ratings import selectors\n")
    result = lint(tmp_path)
    assert result.returncode != 0
    assert "arena.play never imports ratings" in result.stdout and "BROKEN" in result.stdout
    assert "arena.play.sampling -> arena.ratings.selectors" in result.stdout


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


def test_jail_contract_fails_when_the_jail_imports_the_engine(tmp_path):
    write_config(tmp_path)
    (tmp_path / "evalcore" / "jail" / "sandbox.py").write_text("import evalcore.engine\n")
    result = lint(tmp_path)
    assert result.returncode == 1
    assert "evalcore.jail is not allowed to import evalcore.engine" in result.stdout


def test_a_flat_module_in_evalcore_breaks_the_contract(tmp_path):
    """evalcore's modules live in subpackages (boundary/, engine/, jail/, ...): a new flat one is refused."""
    write_config(tmp_path)
    (tmp_path / "evalcore" / "helpers.py").write_text("")
    result = lint(tmp_path)
    assert result.returncode != 0
    assert "evalcore.helpers" in result.stdout
