"""The project's import graph between files has no cycle, counting imports made inside functions.

import-linter sees only what grimp sees; a cycle hidden by an import inside a function still makes two
files depend on each other. So this test reads every module with ``ast`` and counts every import,
wherever it sits. The only imports allowed inside a function are lazy imports of heavy optional
libraries (``LAZY_ALLOWED``): loading torch in a web process for nothing costs seconds and memory.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

PACKAGES = ("config", "common", "arena", "leaderboard", "workers", "evalcore")
LAZY_ALLOWED = {
    "torch", "transformers", "vllm", "accelerate", "lm_eval", "datasets", "sacrebleu",
    # spaCy comes with Presidio (seconds to import), scikit-learn with the moderation tagger, Arrow with
    # releases: only the refit, the release writer and Parquet input need them.
    "presidio_analyzer", "tldextract", "detect_secrets", "profanity_check", "pyarrow",
    # the name model of the redaction step (spaCy itself, seconds to import, with the model)
    "spacy",
    # scipy.stats, scipy.optimize and scipy.integrate add 0.45, 0.17 and 0.25 s to the start of every
    # process that imports them: the few functions that need more than scipy.special import them.
    "scipy",
}  # fmt: skip


def module_files() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the project's packages (migrations excluded)."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            relative = path.relative_to(REPO_ROOT).with_suffix("")
            if "migrations" in relative.parts:
                continue
            parts = list(relative.parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def imported_names(tree: ast.AST, module: str, is_package: bool) -> list[tuple[str, bool, int]]:
    """(imported dotted name, inside a function?, line) for every import in ``tree``."""
    found: list[tuple[str, bool, int]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if isinstance(child, ast.Import):
                found.extend((alias.name, in_function, child.lineno) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = module.split(".") if is_package else module.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (child.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                found.extend((f"{base}:{alias.name}", in_function, child.lineno) for alias in child.names)
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                continue  # imports for annotations only: never executed
            visit(child, nested)

    visit(tree, False)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The project module an import lands in, or None. ``a.b:c`` (``from a.b import c``) is the
    submodule ``a.b.c`` when there is one, else ``a.b``; ``a.b.c`` is the deepest existing module."""
    base, _, member = name.partition(":")
    if member and f"{base}.{member}" in modules:
        return f"{base}.{member}"
    parts = base.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def build_graph() -> tuple[dict[str, set[str]], list[str]]:
    modules = module_files()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    lazy_violations = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for name, in_function, line in imported_names(tree, module, path.name == "__init__.py"):
            target = resolve(name, modules)
            if in_function and name.split(".")[0].split(":")[0] not in LAZY_ALLOWED:
                lazy_violations.append(f"{path.relative_to(REPO_ROOT)}:{line} imports {name.replace(':', '.')} inside a function")
            if target is not None and target != module:
                graph[module].add(target)
    return graph, sorted(set(lazy_violations))


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative: the components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def test_no_import_cycle_between_files():
    graph, _ = build_graph()
    cycles = strongly_connected(graph)
    assert not cycles, "import cycles between files:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_function_level_imports_are_only_heavy_optional_libraries():
    _, violations = build_graph()
    assert not violations, "\n".join(violations)


@pytest.mark.parametrize(
    ("files", "cyclic"),
    [
        ({"a.py": "from pkg import b\n", "b.py": "def f():\n    from pkg import a\n"}, True),
        ({"a.py": "from pkg import b\n", "b.py": "import os\n"}, False),
        ({"a.py": "from . import b\n", "b.py": "from .a import x\n"}, True),
    ],
)
def test_the_graph_sees_imports_inside_functions(tmp_path, monkeypatch, files, cyclic):
    """The checker itself: a cycle closed by an import inside a function is found."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, source in files.items():
        (package / name).write_text(source)
    monkeypatch.setattr("tests.test_import_graph.REPO_ROOT", tmp_path)
    monkeypatch.setattr("tests.test_import_graph.PACKAGES", ("pkg",))
    graph, _ = build_graph()
    assert bool(strongly_connected(graph)) is cyclic
