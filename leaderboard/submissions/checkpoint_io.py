"""Copying and hashing checked checkpoint files in chunks (never a whole file in memory)."""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
from collections.abc import Iterable, Sequence
from pathlib import Path

from common.resumable_hash import ResumableSha256
from leaderboard.submissions.checkpoints import CHUNK, SAFETENSORS, CheckpointFile


def _weight_order(files: Iterable[CheckpointFile]) -> list[CheckpointFile]:
    return sorted(files, key=lambda f: f.name)


def hash_weights(files: Iterable[CheckpointFile]) -> str:
    """SHA-256 over the safetensors files' names (NUL-terminated) and bytes, in sorted name order.

    The same digest as ``evalcore.models.hf.hash_files``, so it matches the backend's identity.
    """
    digest = hashlib.sha256()
    for file in _weight_order(f for f in files if f.name.lower().endswith(SAFETENSORS)):
        digest.update(file.name.encode() + b"\0")
        with file.open() as stream:
            while block := stream.read(CHUNK):
                digest.update(block)
    return digest.hexdigest()


def copy_and_hash(files: Iterable[CheckpointFile], destination: Path) -> str:
    """Copy ``files`` into ``destination`` in chunks, hashing the weights on the way (see hash_weights)."""
    destination.mkdir(parents=True, exist_ok=False)
    digest = hashlib.sha256()
    for file in _weight_order(files):
        is_weights = file.name.lower().endswith(SAFETENSORS)
        if is_weights:
            digest.update(file.name.encode() + b"\0")
        with file.open() as source, open(destination / file.name, "xb") as target:
            while block := source.read(CHUNK):
                target.write(block)
                if is_weights:
                    digest.update(block)
    return digest.hexdigest()


def tensors_digest(entries: Iterable[tuple[str, str, Sequence[int], str]]) -> str:
    """The layout-independent digest of a checkpoint's tensors from (name, dtype, shape, SHA-256 of
    the tensor's bytes) of each: SHA-256 over, for each tensor in name order, its name, dtype and
    shape, then its bytes' digest. The same weights re-sharded or renamed give the same digest
    (``hash_weights`` changes with file names and layout), and each tensor's digest can be made
    while its bytes arrive, in whatever order the files come."""
    digest = hashlib.sha256()
    for name, dtype, shape, tensor_sha256 in sorted(entries, key=lambda entry: entry[0]):
        digest.update(f"{name}\0{dtype}\0{','.join(map(str, shape))}\0".encode() + bytes.fromhex(tensor_sha256))
    return digest.hexdigest()


def tensor_table(path: Path) -> list[list]:
    """A checked safetensors file's tensors as [start, end, name, dtype, shape], absolute offsets in
    the file, in the order of their bytes."""
    with open(path, "rb") as stream:
        size = struct.unpack("<Q", stream.read(8))[0]
        header = json.loads(stream.read(size))
    return table_of_header(header, 8 + size)


def table_of_header(header: dict, data_start: int) -> list[list]:
    rows = [[data_start + info["data_offsets"][0], data_start + info["data_offsets"][1], name, info["dtype"],
             list(info["shape"])] for name, info in header.items() if name != "__metadata__"]  # fmt: skip
    return sorted(rows)


class TensorDigester:
    """Each tensor's SHA-256 while a file's bytes go by in order; its state can be saved between chunks."""

    def __init__(self, table: list[list], *, position: int = 0, state: bytes = b"", digests: dict | None = None):
        self.table, self.position, self.digests = table, position, dict(digests or {})
        self.hasher = ResumableSha256.from_state(state) if state else ResumableSha256()
        self._close_empty()

    def _close_empty(self) -> None:
        while len(self.digests) < len(self.table) and self.table[len(self.digests)][0] == self.table[len(self.digests)][1]:
            self.digests[self.table[len(self.digests)][2]] = hashlib.sha256().hexdigest()

    def feed(self, block) -> None:
        """The next bytes of the file (from ``position`` on)."""
        view, position = memoryview(block), self.position
        while len(view) and len(self.digests) < len(self.table):
            start, end, name = self.table[len(self.digests)][:3]
            if position < start:  # the header, before the first tensor
                skip = min(len(view), start - position)
                view, position = view[skip:], position + skip
                continue
            take = min(len(view), end - position)
            self.hasher.update(view[:take])
            view, position = view[take:], position + take
            if position == end:
                self.digests[name] = self.hasher.hexdigest()
                self.hasher = ResumableSha256()
                self._close_empty()
        self.position += len(block)

    def state(self) -> bytes:
        return self.hasher.state()

    @property
    def complete(self) -> bool:
        return len(self.digests) == len(self.table)

    def entries(self) -> list[tuple[str, str, list, str]]:
        return [(name, dtype, shape, self.digests[name]) for _, _, name, dtype, shape in self.table]


def tensors_hash(paths: Iterable[Path]) -> str:
    """``tensors_digest`` of checked safetensors files (headers already validated), reading each
    file once in the order of its bytes, one chunk at a time."""
    entries = []
    for path in paths:
        digester = TensorDigester(tensor_table(path))
        with open(path, "rb") as stream:
            while not digester.complete and (block := stream.read(CHUNK)):
                digester.feed(block)
        if not digester.complete:
            raise OSError(f"{path.name} ends inside its tensors")
        entries.extend(digester.entries())
    return tensors_digest(entries)


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
