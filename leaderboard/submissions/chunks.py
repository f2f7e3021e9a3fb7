"""Receiving one chunk of a resumable upload: streamed to disk, checksummed, all or nothing.

The request body is read in blocks straight from the socket (``request.read``), never as
``request.body``, so a chunk of any size costs a few blocks of memory; Django's
DATA_UPLOAD_MAX_MEMORY_SIZE applies only to ``request.body`` and form parsing, neither of which a
``application/offset+octet-stream`` body goes through. A chunk that ends early or whose checksum
does not match is cut off the file again, so the file always holds exactly the accepted offset.

Two threads share the work of a chunk: this one receives each block, writes it and feeds the
chunk's checksum; a second one runs the running weights digests (``consumers``) over the blocks
already written, so hashing overlaps receiving (hashlib and OpenSSL through ctypes release the GIL
over a block). See docs/uploads.md, "Where the server's CPU goes".

A chunk is on disk before the server acknowledges it (``durable``, setting
``LEADERBOARD_UPLOAD_FSYNC``): the aligned blocks are written with direct I/O, the others' writeback
is started at once (``sync_file_range``), so the disk works while the next blocks arrive, and
``fdatasync`` at the chunk's end waits only for the last of them and the file's size. The offset a client resumes from is then never ahead of
the bytes a crash of the server's machine leaves in the file. See docs/uploads.md, "Durable chunks".
"""

from __future__ import annotations

import base64
import binascii
import ctypes
import errno
import hashlib
import mmap
import os
import queue
import threading
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO

from leaderboard.submissions import checkpoints, file_rules

BLOCK = 1 << 21  # bytes handed to the hashing thread at once (a few of these are all a chunk costs)
BUFFERS = 4  # blocks in flight between the receiving and the hashing thread
ALIGN = 4096  # file positions, lengths and buffers that direct I/O accepts (any logical block size up to 4 KiB)
DIRECT_MIN = 1 << 20  # chunks from this size on are written with direct I/O (see _Writer)
CHECKSUM_ALGORITHMS = ("crc32", "sha256", "sha1")  # crc32 first: the one our clients send


def _libc_function(name: str, argtypes: list) -> Callable | None:
    try:
        function = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):  # not Linux (or no such call): writeback starts at fdatasync
        return None
    function.argtypes, function.restype = argtypes, ctypes.c_int
    return function


_sync_file_range = _libc_function("sync_file_range", [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint])
SYNC_FILE_RANGE_WRITE = 2  # start writing the range's dirty pages; do not wait for them


def writeback_start(fd: int, offset: int, length: int) -> None:
    """Ask the kernel to start writing these bytes of ``fd`` to disk now; returns without waiting
    (a full device queue makes it wait for room, which paces the receiving to the disk). Errors are
    left to the ``fdatasync`` that follows, which reports them."""
    if _sync_file_range is not None:
        _sync_file_range(fd, offset, length, SYNC_FILE_RANGE_WRITE)  # ctypes releases the GIL over the call


def sync_folder(path: Path) -> None:
    """fsync a folder, so the names created or renamed in it survive a crash."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class ChunkError(ValueError):
    """A refused chunk: ``status`` is the HTTP status tus prescribes for it."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


class Crc32:
    """CRC-32 (IEEE 802.3, zlib's) with hashlib's ``update``/``digest``: 4 bytes, big-endian, as
    other tus servers (tusd) and clients encode it. A transport check, not a cryptographic one: it
    catches damaged bytes (every burst of up to 32 bits, and all but 2^-32 of other damage); the
    weights' own SHA-256 digests are what identifies them."""

    digest_size = 4

    def __init__(self) -> None:
        self.value = 0

    def update(self, data) -> None:
        self.value = zlib.crc32(data, self.value)  # releases the GIL over large blocks

    def digest(self) -> bytes:
        return self.value.to_bytes(4, "big")


def checksum_hasher(algorithm: str):
    """A fresh hasher for one of CHECKSUM_ALGORITHMS."""
    return Crc32() if algorithm == "crc32" else hashlib.new(algorithm)


def parse_checksum(header: str | None) -> tuple[str, bytes] | None:
    """``Upload-Checksum: <algorithm> <base64 digest>`` → (algorithm, digest); None when absent.

    A header that is present but blank is refused: the client meant to send a checksum, and storing
    the chunk unchecked would hide its mistake.
    """
    if header is None:
        return None
    if not header.strip():
        raise ChunkError("Upload-Checksum is empty; send '<algorithm> <base64 digest>' (crc32, sha256 or sha1) or leave the header out.", 400)
    algorithm, _, encoded = header.strip().partition(" ")
    if algorithm not in CHECKSUM_ALGORITHMS:
        raise ChunkError(f"Checksum algorithm {algorithm[:20]!r} is not supported; use crc32, sha256 or sha1.", 400)
    try:
        digest = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ChunkError("Upload-Checksum's digest is not base64.", 400) from None
    if len(digest) != checksum_hasher(algorithm).digest_size:
        raise ChunkError(f"Upload-Checksum's {algorithm} digest has the wrong length.", 400)
    return algorithm, digest


_spare_buffers: list[list[memoryview]] = []  # the blocks of finished chunks, for the next ones
_spare_lock = threading.Lock()


def _take_buffers() -> list[memoryview]:
    """BUFFERS blocks for one chunk: a finished chunk's (a process keeps as many sets as it ever
    received chunks at once, one under gunicorn's sync worker), else new ones. New ones cost page
    faults, ~2 ms per chunk measured, which reuse saves."""
    with _spare_lock:
        if _spare_buffers:
            return _spare_buffers.pop()
    return [memoryview(mmap.mmap(-1, BLOCK)) for _ in range(BUFFERS)]  # page-aligned: direct I/O takes them


class _Hashing(threading.Thread):
    """Runs ``consumers`` over each block the receiving thread hands over, in order, beside it.

    Blocks come through ``full`` as (buffer, length) and go back through ``free`` once every
    consumer has seen them, so the receiving thread never overwrites bytes still being hashed.
    A consumer's exception is kept in ``error`` (the rest of the blocks are only handed back).
    """

    def __init__(self, consumers: Sequence[Callable[[memoryview], None]]):
        super().__init__(name="chunk-hashing", daemon=True)
        self.consumers = consumers
        self.full: queue.SimpleQueue = queue.SimpleQueue()
        self.free: queue.SimpleQueue = queue.SimpleQueue()
        self.error: BaseException | None = None
        self.cancelled = False
        self.buffers = _take_buffers()
        for buffer in self.buffers:
            self.free.put(buffer)

    def run(self) -> None:
        while (item := self.full.get()) is not None:
            buffer, length = item
            if self.error is None and not self.cancelled:
                try:
                    for consume in self.consumers:
                        consume(buffer[:length])
                except BaseException as exc:  # handed to the receiving thread, which raises it
                    self.error = exc
            self.free.put(buffer)

    def finish(self) -> None:
        """Wait until every block handed over was hashed; raise a consumer's error."""
        self.stop()
        if self.error is not None:
            raise self.error

    def stop(self, *, cancel: bool = False) -> None:
        """End the thread (``cancel``: without hashing what is still queued) and give the blocks back."""
        if self.buffers is None:
            return
        self.cancelled = self.cancelled or cancel
        if self.is_alive():
            self.full.put(None)
            self.join()
        with _spare_lock:
            _spare_buffers.append(self.buffers)
        self.buffers = None


def _fill(stream: BinaryIO, buffer: memoryview, want: int) -> int:
    """Read up to ``want`` bytes into ``buffer``; fewer only when the body ends (or the connection drops)."""
    readinto = getattr(stream, "readinto", None)
    filled = 0
    while filled < want:
        try:
            if readinto is not None:
                n = readinto(buffer[filled:want])
            else:  # Django's request stream (the test client, ASGI): one copy more
                data = stream.read(want - filled)
                n = len(data)
                buffer[filled : filled + n] = data
        except OSError:  # the connection dropped or stalled past the server's timeout
            n = 0
        if not n:
            break
        filled += n
    return filled


class _Writer:
    """Writes a chunk's blocks into its file, the aligned part with direct I/O where it can.

    A block at a file position and of a length that are multiples of ALIGN goes from the (page-aligned)
    receive buffer straight to the disk (``O_DIRECT``), without passing through the page cache; the
    rest (a chunk that starts or ends off the alignment, a file system without direct I/O) is written
    through the page cache, with its writeback started at once when ``durable``. Copying into new
    page-cache pages was half of the web worker's CPU per byte on this project's virtual machines
    (docs/uploads.md, "Durable chunks"), and a 150 GB upload no longer fills the page cache.
    """

    def __init__(self, path: Path, *, offset: int, length: int, durable: bool, direct: bool = True):
        # a later chunk's file must exist already: never a new, sparse one with a hole before ``offset``
        self.fd = os.open(path, os.O_WRONLY | (0 if offset else os.O_CREAT | os.O_TRUNC), 0o644)
        self.direct, self.durable = None, durable
        if direct and length >= DIRECT_MIN and getattr(os, "O_DIRECT", 0):
            try:
                self.direct = os.open(path, os.O_WRONLY | os.O_DIRECT)
            except OSError:  # EINVAL: this file system has no direct I/O
                self.direct = None

    def want(self, position: int, left: int) -> int:
        """How many bytes the next block should hold: at an unaligned position, just those up to the
        next aligned one (through the page cache), so the blocks after it can go direct."""
        if self.direct is not None and position % ALIGN:
            return min(ALIGN - position % ALIGN, left)
        return min(BLOCK, left)

    def write(self, block: memoryview, position: int) -> None:
        direct = 0
        if self.direct is not None and position % ALIGN == 0:
            direct = len(block) - len(block) % ALIGN
        if direct:
            try:
                _write_all(self.direct, block[:direct], position)
            except OSError as exc:
                if exc.errno != errno.EINVAL:
                    raise
                os.close(self.direct)  # the device wants another alignment: the page cache from here on
                self.direct, direct = None, 0
        if direct < len(block):
            _write_all(self.fd, block[direct:], position + direct)
            if self.durable:
                writeback_start(self.fd, position + direct, len(block) - direct)

    def close(self) -> None:
        for fd in (self.direct, self.fd):
            if fd is not None:
                os.close(fd)


def _write_all(fd: int, block: memoryview, position: int) -> None:
    written = 0
    while written < len(block):  # a write may take part of the block
        written += os.pwrite(fd, block[written:], position + written)


def receive(stream: BinaryIO, path: Path, *, offset: int, length: int, checksum: tuple[str, bytes] | None,
            consumers: Sequence[Callable[[memoryview], None]] = (), durable: bool = False,
            direct: bool = True) -> None:  # fmt: skip
    """Append ``length`` bytes from ``stream`` to ``path`` at ``offset`` (its current size).

    Every consumer sees every block, in order, after it was written (the running weights digests),
    on the hashing thread; when this returns they have seen the whole chunk, and with ``durable``
    the chunk is on disk (``fdatasync``). ``direct=False`` (``LEADERBOARD_UPLOAD_DIRECT_IO``) writes every
    block through the page cache. Raises ChunkError (the file cut back to ``offset``) when
    the body ends early, the checksum does not match or the disk refuses the bytes, or a consumer's
    own exception.
    """
    verify = checksum_hasher(checksum[0]) if checksum else None
    received = 0
    writer = _Writer(path, offset=offset, length=length, durable=durable, direct=direct)
    hashing = _Hashing(consumers)
    try:
        hashing.start()
        while received < length:
            if hashing.error is not None:
                raise hashing.error
            buffer = hashing.free.get()
            want = writer.want(offset + received, length - received)
            got = _fill(stream, buffer, want)
            if got < want:
                raise ChunkError(
                    f"The chunk ended after {received + got} of the {length} bytes its Content-Length announced; "
                    f"nothing of it was kept. Resume from offset {offset}.", 400,
                )  # fmt: skip
            block = buffer[:got]
            try:
                writer.write(block, offset + received)
            except OSError as exc:
                if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
                raise ChunkError("The server ran out of space while receiving this chunk; nothing of it "
                                 f"was kept. Try again later from offset {offset}.", 507) from None  # fmt: skip
            if verify is not None:
                verify.update(block)
            hashing.full.put((buffer, got))
            received += got
        hashing.finish()
        if verify is not None and verify.digest() != checksum[1]:
            raise ChunkError(
                f"The chunk's {checksum[0]} checksum does not match its bytes; nothing of it was kept. "
                f"Send it again from offset {offset}.", 460,
            )  # fmt: skip
        if durable:
            _flush(writer.fd, offset)
    except BaseException:
        hashing.stop(cancel=True)
        os.ftruncate(writer.fd, offset)
        raise
    finally:
        writer.close()


def _flush(fd: int, offset: int) -> None:
    """fdatasync the chunk; a disk that cannot take it (full, failing) refuses the chunk."""
    try:
        os.fdatasync(fd)
    except OSError as exc:
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        raise ChunkError(("The server ran out of space" if full else f"The server's disk failed ({exc.strerror})")
                         + f" while storing this chunk; nothing of it was kept. Try again later from offset {offset}.",
                         507 if full else 500) from None  # fmt: skip


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
