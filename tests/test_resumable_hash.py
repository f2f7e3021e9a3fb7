"""common.resumable_hash: the standard SHA-256, continued from saved state in another object."""

from __future__ import annotations

import hashlib
import os

import pytest

from common.resumable_hash import CTX_SIZE, ResumableSha256


def test_saved_state_continues_to_hashlibs_digest():
    data = os.urandom(3 * 65536 + 17)
    hasher = ResumableSha256()
    for start in range(0, len(data), 50_000):
        block = bytearray(data[start : start + 50_000])
        hasher.update(memoryview(block) if start % 2 else bytes(block))  # both paths: in place and bytes
        hasher = ResumableSha256.from_state(hasher.state())  # as if the next chunk reached another process
    assert hasher.hexdigest() == hashlib.sha256(data).hexdigest()
    assert hasher.hexdigest() == hasher.hexdigest()  # reading the digest does not end the hash
    assert ResumableSha256().hexdigest() == hashlib.sha256().hexdigest()


def test_a_state_of_the_wrong_size_is_refused():
    with pytest.raises(ValueError, match=f"{CTX_SIZE} bytes"):
        ResumableSha256.from_state(b"\0" * 10)
