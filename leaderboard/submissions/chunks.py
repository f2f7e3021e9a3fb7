"""Receiving one chunk of a resumable upload: streamed to disk, checksummed, all or nothing.

The request body is read in blocks straight from the socket (``request.read``), never as
``request.body``, so a chunk of any size costs one block of memory; Django's
DATA_UPLOAD_MAX_MEMORY_SIZE applies only to ``request.body`` and form parsing, neither of which a
``application/offset+octet-stream`` body goes through. A chunk that ends early or whose checksum
does not match is cut off the file again, so the file always holds exactly the accepted offset.
"""

from __future__ import annotations

import base64
import binascii
import errno
import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from leaderboard.submissions import checkpoints, file_rules

BLOCK = 1 << 20
CHECKSUM_ALGORITHMS = ("sha256", "sha1")


class ChunkError(ValueError):
    """A refused chunk: ``status`` is the HTTP status tus prescribes for it."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def parse_checksum(header: str | None) -> tuple[str, bytes] | None:
    """``Upload-Checksum: <algorithm> <base64 digest>`` → (algorithm, digest); None when absent."""
    if not header:
        return None
    algorithm, _, encoded = header.strip().partition(" ")
    if algorithm not in CHECKSUM_ALGORITHMS:
        raise ChunkError(f"Checksum algorithm {algorithm[:20]!r} is not supported; use sha256 or sha1.", 400)
    try:
        digest = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ChunkError("Upload-Checksum's digest is not base64.", 400) from None
    if len(digest) != hashlib.new(algorithm).digest_size:
        raise ChunkError(f"Upload-Checksum's {algorithm} digest has the wrong length.", 400)
    return algorithm, digest


def receive(stream: BinaryIO, path: Path, *, offset: int, length: int, checksum: tuple[str, bytes] | None,
            on_block: Callable[[bytes], None] | None = None) -> None:  # fmt: skip
    """Append ``length`` bytes from ``stream`` to ``path`` at ``offset`` (its current size).

    ``on_block`` sees every block as it is written (the running weights hash). Raises ChunkError
    (the file cut back to ``offset``) when the body ends early or the checksum does not match.
    """
    verify = hashlib.new(checksum[0]) if checksum else None
    received = 0
    buffer = memoryview(bytearray(BLOCK))  # one block, reused (a stream with readinto fills it in place)
    readinto = getattr(stream, "readinto", None)
    with open(path, "r+b" if offset else "wb", buffering=0) as target:
        try:
            target.seek(offset)
            while received < length:
                want = min(BLOCK, length - received)
                try:
                    block = buffer[: readinto(buffer[:want])] if readinto else stream.read(want)
                except OSError:  # the connection dropped or stalled past the server's timeout
                    block = b""
                if not block:
                    raise ChunkError(
                        f"The chunk ended after {received} of the {length} bytes its Content-Length announced; "
                        f"nothing of it was kept. Resume from offset {offset}.", 400,
                    )  # fmt: skip
                written = 0
                try:
                    while written < len(block):  # an unbuffered write may take part of the block
                        written += target.write(block[written:])
                except OSError as exc:
                    if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                        raise
                    raise ChunkError("The server ran out of space while receiving this chunk; nothing of it "
                                     f"was kept. Try again later from offset {offset}.", 507) from None  # fmt: skip
                if verify is not None:
                    verify.update(block)
                if on_block is not None:
                    on_block(block)
                received += len(block)
            if verify is not None and verify.digest() != checksum[1]:
                raise ChunkError(
                    f"The chunk's {checksum[0]} checksum does not match its bytes; nothing of it was kept. "
                    f"Send it again from offset {offset}.", 460,
                )  # fmt: skip
        except BaseException:
            target.truncate(offset)
            raise


def check_safetensors_start(path: Path, *, received: int, size: int, name: str) -> list[list] | None:
    """Check a safetensors file's header as soon as its first bytes are here.

    Returns None while more bytes are needed, then, once the whole header was read and accepted,
    its tensors as [start, end, name, dtype, shape] (absolute offsets, in byte order); raises
    CheckpointError as soon as the header is impossible (its length, its JSON, or tensors that
    need more bytes than the declared ``size`` of the file).
    """
    if received < 8:
        return None
    with open(path, "rb") as stream:
        length = int.from_bytes(stream.read(8), "little")
        impossible = length > checkpoints.MAX_HEADER_BYTES or length > size - 8 or length < 2
        if received < 8 + length and not impossible:
            return None
        stream.seek(0)
        header = checkpoints.read_safetensors_header(stream, size, name=name)
    start = 8 + length
    return sorted([start + b, start + e, tensor, dtype, list(shape)] for tensor, (dtype, shape, (b, e)) in header.tensors.items())


def remove(path: Path) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def declared_problems(files: object, limits: checkpoints.Limits) -> list[str]:
    """What is wrong with a declared file list ``{name: size}``, judged before any byte is sent:
    the names (no pickles, code or paths), sizes, count and total, and the files every checkpoint
    needs (the contents are checked as they arrive and once all are here). The rules are
    :mod:`leaderboard.submissions.file_rules`, the ones the browser applies too."""
    if not isinstance(files, dict) or not files:
        return ["Declare the checkpoint's files as {name: size in bytes}."]
    wrong = [f"{str(n)[:200]}: its size must be a positive number of bytes." for n, s in files.items()
             if type(s) is not int or s <= 0]  # fmt: skip
    if wrong:
        return wrong
    return file_rules.file_list_problems(files.items(), max_files=limits.max_files, max_bytes=limits.max_bytes)


def weight_names(files: dict[str, int]) -> list[str]:
    """The weight files in the order the weights digest reads them (``checkpoint_io.hash_weights``)."""
    return sorted(n for n in files if n.lower().endswith(checkpoints.SAFETENSORS))
