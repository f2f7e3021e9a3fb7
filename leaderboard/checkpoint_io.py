"""Copying and hashing checked checkpoint files in chunks (never a whole file in memory)."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterable
from pathlib import Path

from leaderboard.checkpoints import CHUNK, SAFETENSORS, CheckpointFile


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


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
