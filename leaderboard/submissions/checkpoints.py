"""Checkpoint validation: pure functions over names, sizes and byte streams (no Django).

Nothing here ever unpickles, imports or executes what it checks. Safetensors files are checked by
reading their header only (an 8-byte little-endian length, then that many bytes of JSON naming
each tensor's dtype, shape and byte range), so a hostile header cannot make us allocate what it
claims. :func:`inspect_checkpoint` returns every problem it finds as a sentence for the form.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from evalcore.boundary import boundedjson
from leaderboard.submissions.file_rules import CONFIG, INDEX, SAFETENSORS, file_list_problems

CHUNK = 1 << 22
MAX_HEADER_BYTES = 100_000_000  # the safetensors library's own limit
MAX_JSON_BYTES = 20_000_000  # config, tokenizer and index files are small; tokenizer.json can reach ~10 MB
MAX_JSON_DEPTH = 64  # real configs and tokenizers nest a handful of levels; deeper is hostile
MAX_TENSOR_DIMS = 16  # real tensors have at most 5 or 6; a 40,000-dimension shape took seconds to multiply
TOKENIZER_CONFIG = "tokenizer_config.json"
CHAT_TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")
DTYPE_BYTES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8,
}  # fmt: skip


class CheckpointError(ValueError):
    """A problem with one file, stated so that the owner can fix it."""


@dataclass(frozen=True)
class Limits:
    max_parameters: int
    max_bytes: int
    max_files: int
    architectures: tuple[str, ...]


@dataclass(frozen=True)
class CheckpointFile:
    """A file to check: its name, its size, and a way to open it for binary reading."""

    name: str
    size: int
    open: Callable[[], BinaryIO]


@dataclass(frozen=True)
class SafetensorsHeader:
    tensors: dict[str, tuple[str, tuple[int, ...], tuple[int, int]]]
    metadata: dict[str, str]

    @property
    def parameter_count(self) -> int:
        return sum(math.prod(shape) for _, shape, _ in self.tensors.values())


@dataclass
class CheckpointReport:
    """What a checkpoint is (when ``errors`` is empty) and everything wrong with it (when not)."""

    errors: list[str] = field(default_factory=list)
    architecture: str = ""
    parameter_count: int = 0
    total_bytes: int = 0
    weight_files: list[str] = field(default_factory=list)
    has_chat_template: bool = False

    @property
    def ok(self) -> bool:
        return not self.errors


# -- names ----------------------------------------------------------------------------------------


# -- safetensors ------------------------------------------------------------------------------------


def _read_exactly(stream: BinaryIO, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        block = stream.read(min(CHUNK, n - len(data)))
        if not block:
            break
        data += block
    return bytes(data)


def read_safetensors_header(stream: BinaryIO, size: int, *, name: str = "file") -> SafetensorsHeader:
    """Parse and check the header of a safetensors file of ``size`` bytes; raise CheckpointError.

    The tensors' byte ranges must tile the data section exactly, and each range must hold exactly
    ``prod(shape) * itemsize`` bytes, so a header cannot claim more data than the file has.
    """
    if size < 8:
        raise CheckpointError(f"{name} is not a safetensors file: it is shorter than its 8-byte header length.")
    first = _read_exactly(stream, 8)
    if len(first) < 8:
        raise CheckpointError(f"{name} is not a safetensors file: it ends inside its header length.")
    length = int.from_bytes(first, "little")
    if length > MAX_HEADER_BYTES or length > size - 8 or length < 2:
        raise CheckpointError(
            f"{name} is not a safetensors file: its header length ({length} bytes) is impossible for a "
            f"file of {size} bytes (a pickle or zip file renamed .safetensors looks like this)."
        )
    raw = _read_exactly(stream, length)
    if len(raw) != length:
        raise CheckpointError(f"{name} is not a safetensors file: it ends inside its header.")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CheckpointError(f"{name} is not a safetensors file: its header is not UTF-8 JSON.") from None
    header = _loads(text, name=f"{name}'s safetensors header")
    if not isinstance(header, dict):
        raise CheckpointError(f"{name} is not a safetensors file: its header is not a JSON object.")
    metadata = header.pop("__metadata__", {}) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise CheckpointError(f"{name}: __metadata__ in the safetensors header must map strings to strings.")
    data_size = size - 8 - length
    tensors: dict[str, tuple[str, tuple[int, ...], tuple[int, int]]] = {}
    for tensor, info in header.items():
        tensors[tensor] = _tensor_entry(name, tensor, info, data_size)
    ranges = sorted(offsets for _, _, offsets in tensors.values())
    position = 0
    for begin, end in ranges:
        if begin != position:
            raise CheckpointError(f"{name}: the tensors' byte ranges overlap or leave gaps in the file.")
        position = end
    if position != data_size:
        raise CheckpointError(
            f"{name}: the header describes {position} bytes of tensor data but the file holds {data_size}."
        )
    return SafetensorsHeader(tensors, dict(metadata))


def _tensor_entry(name: str, tensor: str, info: object, data_size: int):
    where = f"{name}: tensor {tensor[:80]!r}"
    if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
        raise CheckpointError(f"{where} needs exactly dtype, shape and data_offsets.")
    dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if not isinstance(dtype, str) or dtype not in DTYPE_BYTES:
        raise CheckpointError(f"{where} has an unknown dtype {str(dtype)[:20]!r}.")
    if not isinstance(shape, list) or not all(type(d) is int and 0 <= d < 2**53 for d in shape):
        raise CheckpointError(f"{where} has a shape that is not a list of non-negative integers.")
    if len(shape) > MAX_TENSOR_DIMS:
        raise CheckpointError(f"{where} has {len(shape)} dimensions; at most {MAX_TENSOR_DIMS} are accepted.")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(type(o) is int for o in offsets)
        or not 0 <= offsets[0] <= offsets[1]
    ):
        raise CheckpointError(f"{where} has data_offsets that are not [begin, end] with 0 <= begin <= end.")
    nbytes = math.prod(shape) * DTYPE_BYTES[dtype]  # at most 16 factors below 2**53: a small integer
    if offsets[1] > data_size or nbytes > data_size:
        claimed = f"{nbytes} bytes" if nbytes < 10**30 else "more than 10^30 bytes"
        raise CheckpointError(f"{where} claims {claimed} of data, more than the file holds ({data_size} bytes).")
    if offsets[1] - offsets[0] != nbytes:
        raise CheckpointError(f"{where}: its byte range does not match its shape and dtype.")
    return dtype, tuple(shape), (offsets[0], offsets[1])


# -- JSON files -----------------------------------------------------------------------------------


def _loads(text: str, *, name: str) -> object:
    try:
        return boundedjson.loads(text, name=name, max_depth=MAX_JSON_DEPTH)
    except ValueError as exc:
        raise CheckpointError(str(exc)) from None


def read_json_object(stream: BinaryIO, size: int, *, name: str) -> dict:
    """A small UTF-8 JSON object file; raise CheckpointError naming what is wrong."""
    if size > MAX_JSON_BYTES:
        raise CheckpointError(f"{name} is larger than {MAX_JSON_BYTES // 1_000_000} MB.")
    raw = _read_exactly(stream, size + 1)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CheckpointError(f"{name} is not UTF-8 text.") from None
    value = _loads(text, name=name)
    if not isinstance(value, dict):
        raise CheckpointError(f"{name} must hold a JSON object.")
    return value


def config_architecture(config: dict, architectures: Sequence[str]) -> str:
    """The supported architecture ``config.json`` names; refuses remote code (``auto_map``)."""
    if "auto_map" in config:
        raise CheckpointError(
            "config.json has auto_map: it asks to run code shipped with the checkpoint, which Podium never does."
        )
    named = config.get("architectures")
    if not isinstance(named, list) or len(named) != 1 or not isinstance(named[0], str):
        raise CheckpointError("config.json must name exactly one architecture in 'architectures'.")
    if named[0] not in architectures:
        raise CheckpointError(
            f"config.json names the architecture {named[0][:80]!r}, which is not supported; "
            f"supported: {', '.join(architectures)}."
        )
    return named[0]


def chat_template_in(tokenizer_config: dict | None) -> bool:
    template = (tokenizer_config or {}).get("chat_template")
    return bool(template) and isinstance(template, (str, list))


# -- the whole checkpoint -------------------------------------------------------------------------


def inspect_checkpoint(files: Sequence[CheckpointFile], *, limits: Limits, want_chat_template: bool) -> CheckpointReport:
    """Check every rule on a set of files (one folder, no subfolders); never loads the weights."""
    report = CheckpointReport(total_bytes=sum(f.size for f in files))
    errors = report.errors
    errors += file_list_problems(((f.name, f.size) for f in files), max_files=limits.max_files,
                                 max_bytes=limits.max_bytes)  # fmt: skip
    if errors:
        return report  # names, sizes and required files first: nothing is opened when those are wrong
    by_name = {f.name: f for f in files}

    json_files: dict[str, dict] = {}
    for name in (CONFIG, TOKENIZER_CONFIG, INDEX, "chat_template.json"):
        if name in by_name:
            try:
                with by_name[name].open() as stream:
                    json_files[name] = read_json_object(stream, by_name[name].size, name=name)
            except CheckpointError as exc:
                errors.append(str(exc))
    if CONFIG in json_files:  # file_list_problems saw that it is there
        try:
            report.architecture = config_architecture(json_files[CONFIG], limits.architectures)
        except CheckpointError as exc:
            errors.append(str(exc))
    if TOKENIZER_CONFIG in json_files and "auto_map" in json_files[TOKENIZER_CONFIG]:
        errors.append("tokenizer_config.json has auto_map: custom tokenizer code is never run.")

    weights = sorted(n for n in by_name if n.lower().endswith(SAFETENSORS))
    report.weight_files = weights  # at least one, and an index beside several (file_list_problems)
    parameters = 0
    header_tensors: dict[str, str] = {}
    for name in weights:
        try:
            with by_name[name].open() as stream:
                header = read_safetensors_header(stream, by_name[name].size, name=name)
        except CheckpointError as exc:
            errors.append(str(exc))
            continue
        parameters += header.parameter_count
        for tensor in header.tensors:
            if tensor in header_tensors:
                errors.append(f"The tensor {tensor[:80]!r} is in both {header_tensors[tensor]} and {name}.")
                break
            header_tensors[tensor] = name
    report.parameter_count = parameters
    if parameters > limits.max_parameters:
        errors.append(f"The checkpoint has {parameters:,} parameters; at most {limits.max_parameters:,} are accepted.")
    elif weights and parameters == 0 and not errors:
        errors.append("The safetensors files hold no parameters.")
    _check_index(report, weights, json_files.get(INDEX), header_tensors)

    report.has_chat_template = chat_template_in(json_files.get(TOKENIZER_CONFIG)) or any(
        n in by_name for n in CHAT_TEMPLATE_FILES
    )
    if want_chat_template and not report.has_chat_template:
        errors.append(
            "Apply chat template is ticked but the checkpoint has none: add chat_template to "
            "tokenizer_config.json or a chat_template.jinja file."
        )
    return report


def _check_index(report: CheckpointReport, weights: list[str], index: dict | None, tensors: dict[str, str]) -> None:
    errors = report.errors
    if index is None:
        return
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        errors.append(f"{INDEX} has no weight_map of tensor name to shard file.")
        return
    named = set(weight_map.values())
    missing = sorted(named - set(weights))
    if missing:
        errors.append(f"{INDEX} refers to shards that are not here: {', '.join(m[:80] for m in missing[:5])}.")
    unused = sorted(set(weights) - named)
    if unused:
        errors.append(f"{INDEX} does not mention {', '.join(unused[:5])}.")
    if tensors and not missing:
        wrong = [t for t, shard in weight_map.items() if tensors.get(t) != shard]
        if wrong:
            errors.append(f"{INDEX} places {len(wrong)} tensor(s) in the wrong shard, e.g. {wrong[0][:80]!r}.")


# -- folders on the shared model store ------------------------------------------------------------


def store_folder(root: str | Path, relative: str) -> Path:
    """The checkpoint folder ``relative`` inside the store ``root``; refuses any escape from it."""
    if not str(root):
        raise CheckpointError("No shared model store is configured on this server.")
    if "\x00" in relative:
        raise CheckpointError("The path contains a NUL character.")
    parts = PurePosixPath(relative.replace("\\", "/"))
    if parts.is_absolute() or ".." in parts.parts or not parts.parts:
        raise CheckpointError("Give a path relative to the model store, without '..'.")
    base = Path(root).resolve(strict=True)
    try:
        folder = (base / parts).resolve(strict=True)
    except (FileNotFoundError, RuntimeError):
        raise CheckpointError(f"{relative!r} does not exist in the model store.") from None
    if not folder.is_relative_to(base):
        raise CheckpointError(f"{relative!r} leads outside the model store (a symbolic link?).")
    if not folder.is_dir():
        raise CheckpointError(f"{relative!r} is not a folder.")
    return folder


def folder_files(folder: Path, *, root: Path) -> list[CheckpointFile]:
    """The plain files of a checkpoint folder (subfolders are ignored); links must stay inside ``root``."""
    base = root.resolve(strict=True)
    files = []
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        target = Path(entry.path).resolve(strict=False)
        if entry.is_symlink() and not target.is_relative_to(base):
            raise CheckpointError(f"{entry.name} is a link that leads outside the model store.")
        if not target.is_file():
            continue
        files.append(CheckpointFile(entry.name, target.stat().st_size, lambda t=target: open(t, "rb")))
    return files
