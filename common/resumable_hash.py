"""SHA-256 whose running state can be saved and resumed in another process.

``hashlib`` objects cannot be pickled, yet a resumable upload arrives as a series of requests that
any web process may serve. OpenSSL's low-level ``SHA256_CTX`` is a plain C struct (eight 32-bit
words of state, a 64-bit length, the unprocessed tail), so its bytes are the whole running state:
we drive OpenSSL's ``SHA256_Init/Update/Final`` through ctypes (the same libcrypto that hashlib
uses, at the same speed, and ctypes releases the GIL during each call) and store those bytes
between requests. The digest is the standard SHA-256 (a test compares it with hashlib's).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

CTX_SIZE = 112  # sizeof(SHA256_CTX): 8*4 state + 2*4 length + 16*4 block + 2*4 counters


@functools.cache
def _libcrypto() -> ctypes.CDLL:
    name = ctypes.util.find_library("crypto")
    if name is None:
        raise OSError("libcrypto (OpenSSL) was not found; resumable hashing needs it")
    lib = ctypes.CDLL(name)
    for function in (lib.SHA256_Init, lib.SHA256_Update, lib.SHA256_Final):
        function.restype = ctypes.c_int
    lib.SHA256_Update.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    return lib


class ResumableSha256:
    """``update``/``hexdigest`` like hashlib's, plus ``state()`` bytes and ``from_state``."""

    def __init__(self) -> None:
        self._ctx = ctypes.create_string_buffer(CTX_SIZE)
        if _libcrypto().SHA256_Init(self._ctx) != 1:
            raise OSError("SHA256_Init failed")

    @classmethod
    def from_state(cls, state: bytes) -> ResumableSha256:
        if len(state) != CTX_SIZE:
            raise ValueError(f"a SHA-256 state is {CTX_SIZE} bytes, not {len(state)}")
        hasher = cls.__new__(cls)
        hasher._ctx = ctypes.create_string_buffer(bytes(state), CTX_SIZE)
        return hasher

    def state(self) -> bytes:
        return self._ctx.raw

    def update(self, data: bytes | bytearray | memoryview) -> None:
        """Hash ``data``; a memoryview of a writable buffer is read in place (no copy)."""
        if isinstance(data, memoryview) and not data.readonly and data.contiguous:
            data = (ctypes.c_char * data.nbytes).from_buffer(data)
        elif not isinstance(data, bytes):
            data = bytes(data)
        if _libcrypto().SHA256_Update(self._ctx, data, len(data)) != 1:
            raise OSError("SHA256_Update failed")

    def copy(self) -> ResumableSha256:
        return ResumableSha256.from_state(self.state())

    def hexdigest(self) -> str:
        ctx = ctypes.create_string_buffer(self._ctx.raw, CTX_SIZE)  # Final consumes the context
        out = ctypes.create_string_buffer(32)
        if _libcrypto().SHA256_Final(out, ctx) != 1:
            raise OSError("SHA256_Final failed")
        return out.raw.hex()
