"""The layering rules of DESIGN.md are enforced by import-linter; prove the contract bites."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from tests.conftest import REPO_ROOT

LINT_IMPORTS = str(Path(sys.executable).parent / "lint-imports")


def write_config(tmp_path: Path) -> None:
    """The project's own contracts, over a throwaway tree of packages with the same names."""
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    lines = ["[importlinter]", "root_packages =\n    " + "\n    ".join(config["root_packages"])]
    lines.append("include_external_packages = True")
    for index, contract in enumerate(config["contracts"]):
        if contract.get("containers"):
            continue  # layers inside an app: its modules do not exist in the throwaway tree
        lines += [f"\n[importlinter:contract:{index}]", f"name = {contract['name']}", f"type = {contract['type']}"]
        for key in ("source_modules", "forbidden_modules", "layers"):
            if key in contract:
                lines.append(f"{key} =\n    " + "\n    ".join(contract[key]))
    (tmp_path / ".importlinter").write_text("\n".join(lines) + "\n")
    for package in config["root_packages"]:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")


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
