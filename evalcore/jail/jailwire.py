"""The channel between a scoring jail's referee and the candidate's host (see jailside.py): plain
values as JSON, length-prefixed messages, and the referee's stand-ins for the candidate's objects.

Copied beside ``jailside.py`` into every scoring jail (``/program/jailwire.py``); standard library only.
"""

import builtins
import json
import os
import struct

MAX_MESSAGE = 64 << 20
MAX_DEPTH = 100
HEADER = struct.Struct(">I")


class ProtocolError(Exception):
    """The host broke the protocol: the tests it was answering fail."""


class HostGone(ProtocolError):
    """The host ended (crashed, killed, exited): a failure, not a sign of tampering by itself."""


# ---- plain values as JSON: {"i": hex} ints (no digit limit), {"f": hex} floats (exact, inf, nan), ...

# The builtin types that cross as values, by name: the types of the plain values, nothing else (a test
# may pass ``int`` to ``isinstance`` in the candidate; the candidate may return ``type(x)``). Each side
# rebuilds a name as its own builtin, taken here when this module loads, before the candidate runs.
TYPES = {kind.__name__: kind for kind in (type(None), bool, int, float, complex, str, bytes, bytearray, range, list,
                                          tuple, set, frozenset, dict)}  # fmt: skip


def encode(value, refer, depth=0):
    """``value`` as JSON-ready data; ``refer(obj)`` names what is not a plain value (or raises)."""
    if depth > MAX_DEPTH:
        return refer(value)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return {"i": hex(int.__index__(value))}
    if isinstance(value, float):
        return {"f": float.hex(float(value))}
    if isinstance(value, complex):
        return {"c": [float.hex(value.real), float.hex(value.imag)]}
    if isinstance(value, bytes):
        return {"b": bytes(value).hex()}
    if isinstance(value, bytearray):
        return {"ba": bytes(value).hex()}
    if isinstance(value, range):
        return {"rg": [hex(value.start), hex(value.stop), hex(value.step)]}
    for kind, tag in ((list, "l"), (tuple, "t"), (set, "s"), (frozenset, "fs")):
        if isinstance(value, kind):
            return {tag: [encode(item, refer, depth + 1) for item in kind.__iter__(value)]}
    if isinstance(value, dict):
        return {"d": [[encode(k, refer, depth + 1), encode(v, refer, depth + 1)] for k, v in dict.items(value)]}
    if isinstance(value, type):
        for name, kind in TYPES.items():
            if value is kind:
                return {"ty": name}
    return refer(value)


_SEQUENCES = {"l": list, "t": tuple, "s": set, "fs": frozenset}


def decode(data, resolve, depth=0):
    """Fresh plain values from ``data``; ``resolve(ref_id)`` gives a reference's object."""
    if depth > MAX_DEPTH + 1:
        raise ProtocolError("value nested too deeply")
    if data is None or isinstance(data, bool | str):
        return data
    if not isinstance(data, dict) or len(data) != 1:
        raise ProtocolError(f"not a value: {type(data).__name__}")
    ((tag, body),) = data.items()
    if tag == "i":
        return int(_text(body), 16)
    if tag == "f":
        return float.fromhex(_text(body))
    if tag == "c" and isinstance(body, list) and len(body) == 2:
        return complex(float.fromhex(_text(body[0])), float.fromhex(_text(body[1])))
    if tag in ("b", "ba"):
        raw = bytes.fromhex(_text(body))
        return raw if tag == "b" else bytearray(raw)
    if tag == "rg" and isinstance(body, list) and len(body) == 3:
        return range(*(int(_text(part), 16) for part in body))
    if tag in _SEQUENCES and isinstance(body, list):
        return _SEQUENCES[tag](decode(item, resolve, depth + 1) for item in body)
    if tag == "d" and isinstance(body, list):
        out = {}
        for pair in body:
            if not isinstance(pair, list) or len(pair) != 2:
                raise ProtocolError("malformed mapping")
            out[decode(pair[0], resolve, depth + 1)] = decode(pair[1], resolve, depth + 1)
        return out
    if tag == "ty":
        if not isinstance(body, str) or body not in TYPES:
            raise ProtocolError("not a type that crosses")
        return TYPES[body]
    if tag == "r" and isinstance(body, int) and not isinstance(body, bool):
        return resolve(body)
    raise ProtocolError(f"unknown value tag {tag!r}")


def _text(value):
    if not isinstance(value, str) or len(value) > MAX_MESSAGE:
        raise ProtocolError("malformed number")
    return value


def send(fd, message):
    data = json.dumps(message, ensure_ascii=True, allow_nan=False).encode("ascii")
    if len(data) > MAX_MESSAGE:
        raise ProtocolError(f"message of {len(data)} bytes is over the {MAX_MESSAGE}-byte limit")
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def receive(fd):
    (size,) = HEADER.unpack(_exactly(fd, HEADER.size))
    if size > MAX_MESSAGE:
        raise ProtocolError(f"message of {size} bytes is over the {MAX_MESSAGE}-byte limit")
    try:
        return json.loads(_exactly(fd, size))
    except (ValueError, RecursionError):
        raise ProtocolError("message is not JSON") from None


def _exactly(fd, size):
    chunks, left = [], size
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise HostGone("the candidate's process ended")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


# ---- the referee


class CandidateError(Exception):
    """An exception the candidate raised whose type is not a builtin one."""


class CandidateExit(BaseException):
    """The candidate raised SystemExit, KeyboardInterrupt or another BaseException."""


class Remote:
    """A candidate object that is not a plain value: callable, inspectable and assignable through the
    host, equal only to itself.

    Its own state lives in name-mangled slots, so that every other attribute name, ``_ref`` or
    ``_label`` included, is the candidate's object's. It has no other attribute of its own.
    """

    __slots__ = ("__peer", "__ref")

    def __init__(self, peer, ref):
        object.__setattr__(self, "_Remote__peer", peer)  # the slots' mangled names; __setattr__ is the host's
        object.__setattr__(self, "_Remote__ref", ref)

    def __call__(self, *args, **kwargs):
        return self.__peer.request("call", self, list(args), kwargs)

    def __getattr__(self, name):
        if name.startswith(("__", "_Remote__")):  # the latter: a stand-in without its slots (never forwarded)
            raise AttributeError(name)
        return self.__peer.request("getattr", self, [name], {})

    def __setattr__(self, name, value):
        self.__peer.request("setattr", self, [attribute_name(name), value], {})

    def __delattr__(self, name):
        self.__peer.request("delattr", self, [attribute_name(name)], {})

    def __iter__(self):
        return iter(self.__peer.request("iter", self, [], {}))

    def __len__(self):
        return self.__peer.request("len", self, [], {})

    def __bool__(self):
        return self.__peer.request("bool", self, [], {})

    def __getitem__(self, key):
        return self.__peer.request("getitem", self, [key], {})

    def __contains__(self, item):
        return self.__peer.request("contains", self, [item], {})

    def __str__(self):
        return self.__peer.request("str", self, [], {})

    def __repr__(self):
        return self.__peer.request("repr", self, [], {})

    def __eq__(self, other):
        return other is self  # a peer makes one stand-in per reference

    def __ne__(self, other):
        return other is not self

    def __hash__(self):
        return hash(("remote", self.__ref))

    def __copy__(self):
        return self  # a copy of a reference is the reference: the candidate's object stays in the host

    def __deepcopy__(self, memo):
        return self


def attribute_name(name):
    """``name`` when an attribute of that name may be set or deleted through the channel, else AttributeError.

    Identifiers only (what ``obj.name = value`` can spell), and none starting with ``__``: dunder names
    (``__class__``, ``__dict__``) and private names stay off the channel, as they do for reading.
    """
    if not isinstance(name, str) or not str.isidentifier(name) or name.startswith("__"):
        raise AttributeError(
            f"cannot set or delete {str(name)[:80]!r} on a candidate's object: only identifiers that do not start "
            "with '__' are set through the referee"
        )
    return str.__str__(name)


class Peer:
    """The referee's end of the channel to the host.

    It keeps no table of its own objects: a reference on the channel only ever names an object of the
    host. It sends back only the stand-ins it made itself for this host's references.
    """

    def __init__(self, to_host, from_host):
        self.to_host, self.from_host = to_host, from_host
        self.remotes = {}  # the host's reference -> its one stand-in
        self.refs = {}  # id(stand-in) -> reference (the stand-ins live as long as the peer)

    def resolve(self, ref):
        if ref not in self.remotes:
            remote = self.remotes[ref] = Remote(self, ref)
            self.refs[id(remote)] = ref
        return self.remotes[ref]

    def refer(self, value):
        if isinstance(value, Remote):
            ref = self.refs.get(id(value))
            if ref is None or self.remotes[ref] is not value:
                raise TypeError("cannot pass a reference that this candidate's process did not give")
            return {"r": ref}
        if isinstance(value, type):
            raise TypeError(f"cannot pass the type {value.__name__} to the candidate: only plain values and the "
                            f"builtin types {', '.join(TYPES)} cross")  # fmt: skip
        if type(value) in TYPES.values():  # a plain value that encode() met past MAX_DEPTH
            raise TypeError(f"cannot pass a value nested more than {MAX_DEPTH} deep to the candidate")
        raise TypeError(f"cannot pass a {type(value).__name__} to the candidate: only plain values cross")

    def exchange(self, message):
        try:
            send(self.to_host, message)
        except ProtocolError as error:
            raise ValueError(str(error)) from None  # the tests' own value is too large: not the candidate's doing
        answer = receive(self.from_host)
        if not isinstance(answer, dict):
            raise ProtocolError("answer is not a mapping")
        if "raise" in answer:
            raise _exception(answer["raise"], self.resolve)
        return answer

    def request(self, op, target, args, kwargs):
        message = {
            "op": op,
            "target": self.refer(target)["r"],
            "args": [encode(a, self.refer) for a in args],
            "kwargs": {str(k): encode(v, self.refer) for k, v in kwargs.items()},
        }
        answer = self.exchange(message)
        for original, updated in zip(args, answer.get("args") or []):
            _update_in_place(original, decode(updated, self.resolve))
        return decode(answer.get("value"), self.resolve)


def _update_in_place(original, updated):
    """Mutations the candidate made to a list, dict, set or bytearray argument, made to the test's own."""
    if type(original) is list and type(updated) is list or type(original) is bytearray and type(updated) is bytearray:
        original[:] = updated
    elif type(original) is dict and type(updated) is dict or type(original) is set and type(updated) is set:
        original.clear()
        original.update(updated)


def _exception(data, resolve):
    """The candidate's exception rebuilt from data: a builtin type with its plain arguments where it has them."""
    if not isinstance(data, dict) or not isinstance(data.get("type"), str) or not isinstance(data.get("message"), str):
        return ProtocolError("malformed exception")
    kind = getattr(builtins, data["type"], None)
    if isinstance(kind, type) and issubclass(kind, Exception):
        try:
            args = decode(data.get("args"), resolve)
            if isinstance(args, tuple) and not any(isinstance(a, Remote) for a in args):
                return kind(*args)
        except Exception:
            pass
        try:
            return kind(data["message"]) if data["message"] else kind()
        except Exception:
            pass
    if isinstance(kind, type) and issubclass(kind, BaseException):
        return CandidateExit(data["message"])
    return CandidateError(data["message"])
