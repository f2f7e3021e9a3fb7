"""What runs inside the jail to score a candidate program: a referee and the candidate's host.

This file is copied into every scoring jail (``/program/jailside.py``) and runs under the system
Python with the standard library only; Podium never imports it. Two processes, one role each:

- the **referee** (the jail's PID 1) starts the host, then runs the *tests* in its own
  interpreter. The names the candidate's program defines are stand-ins there: calling one sends the
  arguments to the host as data and returns the host's answer as data. The referee decides the
  verdict and writes it on its own stdout, which the host never holds.
- the **host** runs the *candidate's program* (the model's completion) and answers the referee's
  requests. Whatever the completion does to its interpreter (patched builtins or modules, exit
  hooks, ``os._exit(0)``, objects whose ``__eq__`` always says yes) stays in the host: the tests
  compare plain values (``None``, bools, numbers, strings, bytes, lists, tuples, dicts, sets) that
  the referee rebuilt itself, and the builtin types of those values. Anything else the candidate
  returns is a reference that compares equal only to itself; the tests may call it, read it, and set
  or delete its attributes (plain values or the candidate's own references), which the host does to
  its own object.

The referee makes itself non-dumpable before it starts the host, so that the host (same user) can
open neither ``/proc/1/mem`` nor ``/proc/1/fd``; the jail's seccomp filter refuses ``ptrace``,
``process_vm_*`` and ``pidfd_getfd``; as PID 1 of its namespace it cannot be killed from inside.
A host that dies, stalls, sends malformed or oversized messages only loses its own tests.

The channel's codec and the referee's stand-ins are in ``jailwire.py``, copied beside this file.

Usage (inside the jail)::

    python3 -I -B /program/jailside.py referee TIMEOUT GUARD MAIN SPEC_FD
"""

import builtins
import contextlib
import ctypes
import faulthandler
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import types

if __package__:  # imported by Podium (tests)
    from evalcore.jail.jailaudit import state, tampering, watch_reaches
    from evalcore.jail.jailwire import (
        HostGone,
        Peer,
        ProtocolError,
        attribute_name,
        decode,
        encode,
        receive,
        send,
    )
else:  # run in the jail, python3 -I: the script's folder is not on sys.path, and leaves it again
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from jailaudit import state, tampering, watch_reaches
    from jailwire import HostGone, Peer, ProtocolError, attribute_name, decode, encode, receive, send

    del sys.path[0]

CANDIDATE_PATH = "/program/candidate.py"


class OutOfTime(Exception):
    pass


# What code_eval's reliability_guard sets to None (huggingface/evaluate execute.py).
DISARMED = {
    "os": "kill system putenv remove removedirs rmdir fchdir setuid fork forkpty killpg rename renames "
    "truncate replace unlink fchmod fchown chmod chown chroot lchflags lchmod lchown getcwd chdir",
    "shutil": "rmtree move chown",
    "subprocess": "Popen",
    "builtins": "exit quit help",
}


def disarm():

    faulthandler.disable()
    os.environ["OMP_NUM_THREADS"] = "1"
    for module_name, names in DISARMED.items():
        module = __import__(module_name)
        for name in names.split():
            setattr(module, name, None)
    for name in ("ipdb", "joblib", "resource", "psutil", "tkinter"):
        sys.modules[name] = None


_kill = os.kill  # disarm() sets os.kill to None in the referee too; the referee still ends its host


def _non_dumpable():
    """PR_SET_DUMPABLE 0: processes of the same user can neither attach to nor read this one."""

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def _on_alarm(signum, frame):
    raise OutOfTime("Timed out!")


def read_spec(fd):
    """The referee's orders, from the descriptor the jail was given: read whole, then closed, before any
    other process of the jail exists. The tests never are a file of the jail."""
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    spec = json.loads(b"".join(chunks).decode("utf-8"))
    return spec["tests"], spec.get("setup") or "", list(spec["names"]), set(spec.get("builtins_used") or ())


def bind(loaded, wanted, resolve):
    """The tests' names from the host's load answer: only those asked for, as plain values, stand-ins, or
    the referee's own import of a module the candidate named; anything else is a protocol error."""
    names = loaded.get("names")
    defined = loaded.get("defined")
    if not isinstance(names, dict) or not isinstance(defined, list):
        raise ProtocolError("malformed load answer")
    extra = [str(name)[:40] for name in names if name not in wanted]
    if extra:
        raise ProtocolError(f"the load answer binds {extra[:3]}, which the tests did not ask for")
    bound = {}
    for name, value in names.items():
        if isinstance(value, dict) and set(value) == {"module"}:
            module = value["module"]
            if not isinstance(module, str) or not all(part.isidentifier() for part in module.split(".")):
                raise ProtocolError("malformed module name")
            try:
                bound[name] = __import__(module, fromlist=["_"])  # the referee's own module, never the host's
            except ImportError:
                pass
        else:
            bound[name] = decode(value, resolve)
    return bound, [str(name) for name in defined[:10000]]


def referee(timeout, guard, main, spec_fd):

    tests, setup, wanted, builtins_used = read_spec(spec_fd)
    verdict_fd = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)  # fd 1 is the verdict's alone (kept as verdict_fd)
    own = io.StringIO()  # the tests' and the referee's own prints: written out once the host is gone
    sys.stdout = sys.stderr = own
    _non_dumpable()
    host = subprocess.Popen(
        [sys.executable, "-I", "-B", os.path.abspath(__file__), "host", "1" if guard else "0", "1" if main else "0"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True,
    )  # fmt: skip
    peer = Peer(host.stdin.fileno(), host.stdout.fileno())
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    result, tamper = "timed out", []
    signal.signal(signal.SIGALRM, _on_alarm)
    sink = io.StringIO()
    try:
        ready = receive(peer.from_host)
        if ready != {"ready": True}:
            raise ProtocolError("the host did not start")
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            bound, defined = bind(peer.exchange({"op": "load", "names": wanted}), wanted, peer.resolve)
            tamper += [f"rebinds the builtin {name}, which the tests use (the tests used the real one)"
                       for name in defined if name in builtins_used][:5]  # fmt: skip
            # The tests' globals: real builtins, the task's own helpers (trusted setup), then the candidate's names.
            namespace = {"__builtins__": builtins, **({"__name__": "__main__"} if main else {})}
            if setup:
                exec(compile(setup, "<setup>", "exec"), namespace)
            namespace.update(bound)
            if guard:
                disarm()
                sys.stdout = sys.stderr = sink
            try:
                exec(compile(tests, "<string>", "exec"), namespace)
            finally:
                sys.stdout = sys.stderr = own
            result = "passed"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except OutOfTime:
        result = "timed out"
    except HostGone as error:
        result = "failed: " + str(error)
    except ProtocolError as error:
        result = "failed: " + str(error)
        tamper.append("protocol: " + str(error)[:200])
    except BaseException as error:  # noqa: BLE001 - code_eval reports every exception as a failure
        result = "failed: " + str(error)
    try:
        if result == "timed out":
            raise OutOfTime  # a host still busy has no answer to give
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        audit = peer.exchange({"op": "audit"}).get("tamper")
        signal.setitimer(signal.ITIMER_REAL, 0)
        if isinstance(audit, list):
            tamper += ["host reports: " + str(item)[:200] for item in audit[:20]]
    except BaseException:  # noqa: BLE001 - a host that cannot answer has nothing to add
        pass
    try:
        _kill(host.pid, signal.SIGKILL)  # the host ends before the referee's own output is written
        host.wait()
    except OSError:
        pass
    os.write(2, own.getvalue()[-(64 << 10):].encode("utf-8", "replace"))
    line = json.dumps({"result": result, "tamper": tamper}, ensure_ascii=True) + "\n"
    os.write(verdict_fd, line.encode("ascii"))
    os._exit(0)  # as PID 1 of the jail: the kernel ends everything the host started


# ---- the host


class Host:
    def __init__(self, inbound, outbound, guard, main):
        self.inbound, self.outbound, self.guard, self.main = inbound, outbound, guard, main
        self.objects, self.ids = {}, {}
        self.namespace = {}
        self.baseline = {}
        self.reaches = []

    def refer(self, value):
        key = id(value)
        if key not in self.ids:
            self.ids[key] = len(self.objects)
            self.objects[self.ids[key]] = value
        return {"r": self.ids[key]}

    def resolve(self, ref):
        if ref not in self.objects:
            raise ProtocolError(f"no object {ref}")
        return self.objects[ref]

    def load(self, wanted):

        with open(CANDIDATE_PATH, encoding="utf-8") as handle:
            source = handle.read()
        if self.main:
            self.namespace = {"__name__": "__main__", "__builtins__": builtins}
        self.baseline = state()
        self.reaches = watch_reaches()  # from here on, what the candidate opens is the candidate's doing
        exec(compile(source, "<string>", "exec"), self.namespace)
        names = {}
        for name in wanted if isinstance(wanted, list) else []:
            if isinstance(name, str) and name in self.namespace:
                value = self.namespace[name]
                if isinstance(value, types.ModuleType):
                    names[name] = {"module": value.__name__}
                else:
                    names[name] = encode(value, self.refer)
        return {"names": names, "defined": [name for name in self.namespace if isinstance(name, str)]}

    def answer(self, message):
        op = message.get("op")
        if op == "load":
            return self.load(message.get("names"))
        if op == "audit":
            changed = tampering(self.baseline, state()) if self.baseline else []
            return {"tamper": changed + list(self.reaches)[:10]}
        target = self.resolve(message.get("target"))
        args = [decode(a, self.resolve) for a in message.get("args") or []]
        kwargs = {k: decode(v, self.resolve) for k, v in (message.get("kwargs") or {}).items()}
        if op == "call":
            value = target(*args, **kwargs)
            mutable = [encode(a, self.refer) if isinstance(a, list | dict | set | bytearray) else None for a in args]
            return {"value": encode(value, self.refer), "args": mutable}
        if op == "getattr":
            value = getattr(target, args[0])
        elif op == "setattr" and len(args) == 2:  # the tests assign to the candidate's own object
            setattr(target, attribute_name(args[0]), args[1])
            value = None
        elif op == "delattr" and len(args) == 1:
            delattr(target, attribute_name(args[0]))
            value = None
        elif op == "iter":
            value = list(target)
        elif op == "len":
            value = len(target)
        elif op == "bool":
            value = bool(target)
        elif op == "getitem":
            value = target[args[0]]
        elif op == "contains":
            value = args[0] in target
        elif op == "str":
            value = str(target)
        elif op == "repr":
            value = repr(target)
        else:
            raise ProtocolError(f"unknown request {op!r}")
        return {"value": encode(value, self.refer)}

    def serve(self):
        send(self.outbound, {"ready": True})
        while True:
            try:
                message = receive(self.inbound)
            except ProtocolError:
                return
            try:
                reply = self.answer(message if isinstance(message, dict) else {})
            except BaseException as error:  # noqa: BLE001 - the candidate's exception goes back as data
                reply = {"raise": {"type": type(error).__name__, "message": _message(error), "args": _arguments(error, self)}}
            try:
                send(self.outbound, reply)
            except ProtocolError as error:
                send(self.outbound, {"raise": {"type": "ProtocolError", "message": str(error)}})


def _arguments(error, server):
    try:
        return encode(tuple(error.args), server.refer)
    except BaseException:  # noqa: BLE001 - arguments that cannot be read: the message stands in
        return None


def _message(error):
    try:
        return str(error)
    except BaseException:  # noqa: BLE001 - a __str__ that raises
        return ""


def host(guard, main):

    inbound, outbound = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(2, 1)  # the candidate's prints: stderr, never the channel
    server = Host(inbound, outbound, guard, main)
    if not guard:
        server.serve()
        return

    class Sink(io.StringIO):
        # Output goes nowhere; any attempt to read (the program's stdin) fails as on a closed pipe.
        def readable(self):
            return False

        def _refuse(self, *args, **kwargs):
            raise OSError

        read = readline = readlines = _refuse

    class StdinSwap(contextlib._RedirectStream):
        _stream = "stdin"


    os.chdir(tempfile.mkdtemp())
    disarm()
    sink = Sink()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), StdinSwap(sink):
        server.serve()


if __name__ == "__main__":
    role = sys.argv[1] if len(sys.argv) > 1 else ""
    if role == "referee":
        referee(float(sys.argv[2]), sys.argv[3] == "1", sys.argv[4] == "1", int(sys.argv[5]))
    elif role == "host":
        host(sys.argv[2] == "1", sys.argv[3] == "1")
    else:
        sys.exit("usage: jailside.py referee TIMEOUT GUARD MAIN SPEC_FD")
