"""Copying and hashing checked checkpoint files in chunks (never a whole file in memory)."""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
from collections.abc import Iterable
from pathlib import Path

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


def tensors_hash(paths: Iterable[Path]) -> str:
    """SHA-256 over the tensors themselves, whatever the files: for each tensor in name order, its
    name, dtype and shape, then its bytes. The same weights re-sharded or renamed give the same
    digest (``hash_weights`` changes with file names and layout).

    ``paths`` are checked safetensors files (headers already validated); tensors are read one
    chunk at a time from their offsets.
    """
    entries = []
    for path in paths:
        with open(path, "rb") as stream:
            size = struct.unpack("<Q", stream.read(8))[0]
            header = json.loads(stream.read(size))
        base = 8 + size
        for name, info in header.items():
            if name != "__metadata__":
                start, end = info["data_offsets"]
                entries.append((name, info["dtype"], tuple(info["shape"]), path, base + start, end - start))
    entries.sort(key=lambda entry: entry[0])
    digest = hashlib.sha256()
    streams: dict[Path, object] = {}
    try:
        for name, dtype, shape, path, offset, length in entries:
            digest.update(f"{name}\0{dtype}\0{','.join(map(str, shape))}\0".encode())
            stream = streams.get(path) or streams.setdefault(path, open(path, "rb"))  # noqa: SIM115
            stream.seek(offset)
            while length > 0:
                block = stream.read(min(CHUNK, length))
                if not block:
                    raise OSError(f"{path.name} ends inside tensor {name}")
                digest.update(block)
                length -= len(block)
    finally:
        for stream in streams.values():
            stream.close()
    return digest.hexdigest()


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
