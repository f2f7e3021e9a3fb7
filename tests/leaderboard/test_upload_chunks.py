"""leaderboard.submissions.chunks without a server: the chunk checksums (crc32 beside sha256 and
sha1) and receiving a chunk on two threads (written and checksummed on one, the weights digests on
the other) with digests equal to hashlib's over the same bytes and nothing kept of a refused chunk."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import random
import zlib
from pathlib import Path

import pytest

from common.resumable_hash import ResumableSha256
from leaderboard.submissions import checkpoint_io, chunks
from podium_client import upload as client_upload


class SocketLike:
    """A body handed out by ``readinto`` in uneven pieces, as ``recv_into`` on a socket does."""

    def __init__(self, data: bytes, *, seed: int = 0, cut_after: int | None = None):
        self.data, self.position, self.rng = data, 0, random.Random(seed)
        self.end = len(data) if cut_after is None else cut_after

    def readinto(self, view: memoryview) -> int:
        n = min(len(view), self.end - self.position, self.rng.choice([1, 7, 4096, 65536, 1 << 20, 3 << 20]))
        view[:n] = self.data[self.position : self.position + n]
        self.position += n
        return n


def header(algorithm: str, data: bytes) -> str:
    return client_upload.chunk_checksum(algorithm, [data])


def test_crc32_is_the_standard_crc_sent_big_endian():
    # CRC-32/ISO-HDLC (zlib's) check value of "123456789" is 0xCBF43926 (the CRC RevEng catalogue,
    # https://reveng.sourceforge.io/crc-catalogue/17plus.htm#crc.cat.crc-32-iso-hdlc); tus servers
    # (tusd) send the 4 bytes big-endian, base64-encoded.
    assert header("crc32", b"123456789") == "crc32 y/Q5Jg=="
    assert chunks.parse_checksum("crc32 y/Q5Jg==") == ("crc32", bytes.fromhex("cbf43926"))
    pieces = [os.urandom(n) for n in (1, 1 << 20, 12345)]
    crc = zlib.crc32(b"".join(pieces))
    assert (
        client_upload.chunk_checksum("crc32", pieces)
        == f"crc32 {base64.b64encode(crc.to_bytes(4, 'big')).decode()}"
    )
    for algorithm in ("sha256", "sha1"):
        digest = hashlib.new(algorithm, b"".join(pieces)).digest()
        assert (
            client_upload.chunk_checksum(algorithm, pieces)
            == f"{algorithm} {base64.b64encode(digest).decode()}"
        )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("md5 1B2M2Y8AsgTpgAmY7PhCfg==", "not supported; use crc32, sha256 or sha1"),
        ("CRC32 y/Q5Jg==", "not supported"),
        ("crc32c y/Q5Jg==", "not supported"),
        ("crc32 not*base64", "not base64"),
        ("crc32 y/Q5", "wrong length"),  # 3 bytes
        ("crc32 y/Q5JgA=", "wrong length"),  # 5 bytes
        ("crc32", "wrong length"),  # no digest at all
        (
            "crc32 " + base64.b64encode(hashlib.sha256(b"x").digest()).decode(),
            "wrong length",
        ),  # a sha256 digest
        ("sha256 y/Q5Jg==", "wrong length"),  # a crc32 digest
        ("", "Upload-Checksum is empty"),  # present but blank: before, the chunk was stored unchecked
        ("   ", "Upload-Checksum is empty"),
    ],
)
def test_malformed_or_unknown_checksums_are_refused_with_a_reason(value, message):
    with pytest.raises(chunks.ChunkError, match=message) as refused:
        chunks.parse_checksum(value)
    assert refused.value.status == 400


@pytest.mark.parametrize("algorithm", ["crc32", "sha256", "sha1"])
def test_a_chunk_on_two_threads_gets_hashlibs_digests(tmp_path, algorithm):
    """More blocks than the threads have buffers, uneven reads: every consumer sees every byte in
    order (the bytes it copies are the chunk's), and the running digests equal hashlib's."""
    path = tmp_path / "weights"
    before = os.urandom(1000)
    path.write_bytes(before)
    data = os.urandom(chunks.BLOCK * (chunks.BUFFERS * 2 + 1) + 12345)
    running = ResumableSha256.from_state(ResumableSha256().state())
    running.update(before)
    plain = hashlib.sha256()
    seen: list[bytes] = []

    def slow_copy(block: memoryview) -> None:  # slower than receiving: the receiver waits for free buffers
        seen.append(bytes(block))
        for _ in range(3):
            hashlib.sha256(block).digest()

    chunks.receive(SocketLike(data, seed=1), path, offset=len(before), length=len(data),
                   checksum=chunks.parse_checksum(header(algorithm, data)),
                   consumers=[running.update, plain.update, slow_copy])  # fmt: skip
    assert b"".join(seen) == data
    assert plain.hexdigest() == hashlib.sha256(data).hexdigest()
    assert running.hexdigest() == hashlib.sha256(before + data).hexdigest()
    assert path.read_bytes() == before + data


def test_a_tensor_digester_fed_on_the_hashing_thread_matches_a_second_read(tmp_path, tiny_dir):
    weights = (tiny_dir / "model.safetensors").read_bytes()
    table = checkpoint_io.tensor_table(tiny_dir / "model.safetensors")
    digester = checkpoint_io.TensorDigester(table)
    path = tmp_path / "model.safetensors"
    chunks.receive(SocketLike(weights, seed=2), path, offset=0, length=len(weights),
                   checksum=chunks.parse_checksum(header("crc32", weights)), consumers=[digester.feed])  # fmt: skip
    assert digester.complete
    assert checkpoint_io.tensors_digest(digester.entries()) == checkpoint_io.tensors_hash(
        [tiny_dir / "model.safetensors"]
    )


class _ReadOnly:
    """A stream with ``read`` only, as Django's request is (the test client, ASGI)."""

    def __init__(self, data: bytes):
        self.stream = io.BytesIO(data)

    def read(self, n: int) -> bytes:
        return self.stream.read(min(n, 100_000))


def test_django_streams_without_readinto_are_read_too(tmp_path):
    data = os.urandom(chunks.BLOCK + 5)
    seen = hashlib.sha256()
    chunks.receive(_ReadOnly(data), tmp_path / "f", offset=0, length=len(data),
                   checksum=chunks.parse_checksum(header("crc32", data)), consumers=[seen.update])  # fmt: skip
    assert (tmp_path / "f").read_bytes() == data and seen.digest() == hashlib.sha256(data).digest()


def test_a_wrong_crc32_keeps_nothing_of_the_chunk(tmp_path):
    path = tmp_path / "weights"
    path.write_bytes(b"kept")
    data = os.urandom(chunks.BLOCK * 3 + 1)
    damaged = bytearray(data)
    damaged[chunks.BLOCK + 17] ^= 0x01  # one bit flipped on the way
    with pytest.raises(chunks.ChunkError, match="crc32 checksum does not match") as refused:
        chunks.receive(SocketLike(bytes(damaged)), path, offset=4, length=len(data),
                       checksum=chunks.parse_checksum(header("crc32", data)))  # fmt: skip
    assert refused.value.status == 460
    assert path.read_bytes() == b"kept"


def test_a_short_body_or_a_failing_digest_keeps_nothing(tmp_path):
    path = tmp_path / "weights"
    path.write_bytes(b"kept")
    data = os.urandom(chunks.BLOCK * 5)
    with pytest.raises(
        chunks.ChunkError, match=f"ended after {chunks.BLOCK * 3 + 10} of the {len(data)} bytes"
    ) as cut:
        chunks.receive(SocketLike(data, cut_after=chunks.BLOCK * 3 + 10), path, offset=4, length=len(data),
                       checksum=None, consumers=[hashlib.sha256().update])  # fmt: skip
    assert cut.value.status == 400 and path.read_bytes() == b"kept"

    calls = []

    def breaks_on_the_second_block(block: memoryview) -> None:
        calls.append(len(block))
        if len(calls) == 2:
            raise OSError("the digest's state could not be read")

    with pytest.raises(OSError, match="could not be read"):
        chunks.receive(SocketLike(data), path, offset=4, length=len(data), checksum=None,
                       consumers=[breaks_on_the_second_block])  # fmt: skip
    assert path.read_bytes() == b"kept"


def _page_cache(path, *, cached: bool = False) -> tuple[int, ...]:
    """(dirty, under writeback) pages of ``path`` in the page cache (``cached``: and all its pages
    in it, first): Linux's cachestat(2) (6.5+)."""
    import ctypes

    class Range(ctypes.Structure):
        _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]

    class Stat(ctypes.Structure):
        _fields_ = [(n, ctypes.c_uint64) for n in ("cache", "dirty", "writeback", "evicted", "recently_evicted")]

    libc = ctypes.CDLL(None, use_errno=True)
    stat, fd = Stat(), os.open(path, os.O_RDONLY)
    try:
        if libc.syscall(451, fd, ctypes.byref(Range(0, 0)), ctypes.byref(stat), 0) != 0:  # 451: cachestat
            pytest.skip(f"cachestat(2) is not available here ({os.strerror(ctypes.get_errno())})")
    finally:
        os.close(fd)
    return (stat.cache, stat.dirty, stat.writeback) if cached else (stat.dirty, stat.writeback)


def _on_tmpfs(path) -> bool:
    best = ("", "")
    for line in open("/proc/self/mounts", encoding="utf-8"):
        _, point, kind, *_ = line.split()
        if str(path).startswith(point.rstrip("/") + "/") and len(point) > len(best[0]):
            best = (point, kind)
    return best[1] == "tmpfs"


def skip_unless_page_cache_shows_direct_io(folder) -> None:
    """Skip where a page-cache probe of files in ``folder`` cannot tell direct I/O from buffered writes:
    tmpfs (every file lives in the page cache) or a file system without ``O_DIRECT`` (the server then
    writes through the page cache, covered by the digest and content tests)."""
    if _on_tmpfs(folder):
        pytest.skip("the test's folder is on tmpfs, which keeps every file in the page cache")
    probe = Path(folder) / ".direct-io-probe"
    probe.touch()
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_DIRECT))
    except OSError as exc:
        pytest.skip(f"the test's file system has no direct I/O ({exc.strerror})")
    finally:
        probe.unlink()


def test_a_durable_chunk_is_on_disk_when_receive_returns(tmp_path):
    """LEADERBOARD_UPLOAD_FSYNC: the chunk's pages are neither dirty nor still being written when the
    server acknowledges it; the same chunk received without ``durable`` is still only in memory."""
    if _on_tmpfs(tmp_path):
        pytest.skip("the test's folder is on tmpfs, which has no disk to be durable on")
    data = os.urandom(chunks.BLOCK * 3 + 999)
    plain, durable = tmp_path / "plain", tmp_path / "durable"
    chunks.receive(SocketLike(data, seed=3), plain, offset=0, length=len(data), checksum=None)
    if _page_cache(plain) == (0, 0):  # the kernel flushed it already (memory pressure): the probe shows nothing
        pytest.skip("the page cache was flushed under the test; the probe cannot tell the two apart")
    chunks.receive(SocketLike(data, seed=4), durable, offset=0, length=len(data), checksum=None, durable=True)
    assert _page_cache(durable) == (0, 0)
    assert durable.read_bytes() == data
    more = os.urandom(chunks.BLOCK + 1)  # a second chunk appended to the durable file: on disk too
    chunks.receive(SocketLike(more, seed=5), durable, offset=len(data), length=len(more),
                   checksum=chunks.parse_checksum(header("crc32", more)), durable=True)  # fmt: skip
    assert _page_cache(durable) == (0, 0)
    assert durable.read_bytes() == data + more


def test_a_durable_chunk_refused_by_its_checksum_is_cut_off_again(tmp_path):
    path = tmp_path / "weights"
    path.write_bytes(b"kept")
    data = os.urandom(chunks.BLOCK + 3)
    with pytest.raises(chunks.ChunkError, match="checksum does not match"):
        chunks.receive(SocketLike(data), path, offset=4, length=len(data), durable=True,
                       checksum=chunks.parse_checksum(header("crc32", data[::-1])))  # fmt: skip
    assert path.read_bytes() == b"kept"


@pytest.mark.parametrize("offset", [0, 4, chunks.ALIGN])
def test_the_aligned_part_of_a_chunk_bypasses_the_page_cache(tmp_path, offset):
    """Direct I/O: of a chunk of several blocks, only the pages before the first aligned position and
    after the last one pass through the page cache (an unaligned start is brought back onto the
    alignment by a shorter first block); the bytes are the chunk's either way."""
    skip_unless_page_cache_shows_direct_io(tmp_path)
    path = tmp_path / "weights"
    before = os.urandom(offset)
    path.write_bytes(before)
    data = os.urandom(chunks.BLOCK * 3 + 999)
    chunks.receive(SocketLike(data, seed=6), path, offset=offset, length=len(data), durable=True,
                   checksum=chunks.parse_checksum(header("crc32", data)))  # fmt: skip
    cache, dirty, writeback = _page_cache(path, cached=True)
    assert (dirty, writeback) == (0, 0)
    assert cache <= 2  # the page of `before` (with the realigning bytes after it) and the tail's
    assert path.read_bytes() == before + data


def test_without_direct_io_every_block_goes_through_the_page_cache(tmp_path):
    """LEADERBOARD_UPLOAD_DIRECT_IO=0 (``direct=False``): the same durable chunk as above, every page of
    it cached (and none dirty: the fdatasync stays), the bytes the chunk's."""
    if _on_tmpfs(tmp_path):
        pytest.skip("the test's folder is on tmpfs, which keeps every file in the page cache")
    path = tmp_path / "weights"
    data = os.urandom(chunks.BLOCK * 3 + 999)
    chunks.receive(SocketLike(data, seed=7), path, offset=0, length=len(data), durable=True, direct=False,
                   checksum=chunks.parse_checksum(header("crc32", data)))  # fmt: skip
    cache, dirty, writeback = _page_cache(path, cached=True)
    assert (dirty, writeback) == (0, 0)
    pages = -(-len(data) // 4096)
    assert cache > 1, "the chunk went past the page cache: direct I/O was not turned off"
    if cache < pages:  # the kernel dropped clean pages already (memory pressure): nothing to compare
        pytest.skip(f"{pages - cache} of the file's clean pages were evicted under the test")
    assert cache == pages
    assert path.read_bytes() == data
