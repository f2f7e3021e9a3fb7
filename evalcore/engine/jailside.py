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

    python3 -I -B /program/jailside.py referee TIMEOUT GUARD MAIN
"""

import atexit
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
    from evalcore.engine.jailwire import (
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
    from jailwire import HostGone, Peer, ProtocolError, attribute_name, decode, encode, receive, send

    del sys.path[0]

CANDIDATE_PATH = "/program/candidate.py"
TESTS_PATH = "/program/tests.py"
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


def _non_dumpable():
    """PR_SET_DUMPABLE 0: processes of the same user can neither attach to nor read this one."""

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def _on_alarm(signum, frame):
    raise OutOfTime("Timed out!")


def referee(timeout, guard, main):

    verdict_fd = os.dup(1)
    os.dup2(2, 1)  # the tests' and the referee's own prints go to stderr; fd 1 is the verdict's alone
    _non_dumpable()
    host = subprocess.Popen(
        [sys.executable, "-I", "-B", os.path.abspath(__file__), "host", "1" if guard else "0", "1" if main else "0"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True,
    )  # fmt: skip
    peer = Peer(host.stdin.fileno(), host.stdout.fileno())
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    with open(TESTS_PATH, encoding="utf-8") as handle:
        tests = handle.read()
    result, tamper = "timed out", []
    signal.signal(signal.SIGALRM, _on_alarm)
    sink = io.StringIO()
    try:
        ready = receive(peer.from_host)
        if ready != {"ready": True}:
            raise ProtocolError("the host did not start")
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            loaded = peer.exchange({"op": "load"})
            names = loaded.get("names")
            if not isinstance(names, dict):
                raise ProtocolError("malformed load answer")
            namespace = {} if not main else {"__name__": "__main__"}
            for name, value in names.items():
                if isinstance(value, dict) and set(value) == {"module"} and isinstance(value["module"], str):
                    try:
                        namespace[name] = __import__(value["module"], fromlist=["_"])
                    except ImportError:
                        pass
                else:
                    namespace[name] = decode(value, peer.resolve)
            if guard:
                disarm()
            stdout, stderr = sys.stdout, sys.stderr
            sys.stdout = sys.stderr = sink if guard else sys.stderr
            try:
                exec(compile(tests, "<string>", "exec"), namespace)
            finally:
                sys.stdout, sys.stderr = stdout, stderr
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
    line = json.dumps({"result": result, "tamper": tamper}, ensure_ascii=True) + "\n"
    os.write(verdict_fd, line.encode("ascii"))
    os._exit(0)  # as PID 1 of the jail: the kernel ends the host and everything it started


# ---- the host


class Host:
    def __init__(self, inbound, outbound, guard, main):
        self.inbound, self.outbound, self.guard, self.main = inbound, outbound, guard, main
        self.objects, self.ids = {}, {}
        self.namespace = {}
        self.baseline = {}

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

    def load(self):

        with open(CANDIDATE_PATH, encoding="utf-8") as handle:
            source = handle.read()
        if self.main:
            self.namespace = {"__name__": "__main__", "__builtins__": builtins}
        self.baseline = _state()
        exec(compile(source, "<string>", "exec"), self.namespace)
        names = {}
        for name, value in list(self.namespace.items()):
            if name.startswith("__") and name.endswith("__"):
                continue
            if isinstance(value, types.ModuleType):
                names[name] = {"module": value.__name__}
            else:
                names[name] = encode(value, self.refer)
        return {"names": names}

    def answer(self, message):
        op = message.get("op")
        if op == "load":
            return self.load()
        if op == "audit":
            return {"tamper": _tampering(self.baseline, _state()) if self.baseline else []}
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


_WATCHED = ("os", "sys", "builtins", "json", "signal", "subprocess", "math", "re", "io", "atexit", "unittest")


def _state():
    """What the audit compares: builtins, watched modules' attributes, hooks, exit handlers."""

    modules = {}
    for name in _WATCHED:
        module = sys.modules.get(name)
        if module is not None:
            modules[name] = {key: id(value) for key, value in vars(module).items()}
    return {
        "modules": modules,
        "hooks": {name: id(getattr(sys, name, None)) for name in ("excepthook", "displayhook", "unraisablehook")},
        "trace": (sys.gettrace() is not None, sys.getprofile() is not None),
        "atexit": atexit._ncallbacks(),
        "signals": {int(s): id(signal.getsignal(s)) for s in (signal.SIGTERM, signal.SIGALRM, signal.SIGINT)},
    }


def _tampering(before, after):
    found = []
    for module, attributes in before["modules"].items():
        now = after["modules"].get(module, {})
        changed = sorted(k for k, v in attributes.items() if now.get(k) != v and not k.startswith("__"))
        added = sorted(k for k in now if k not in attributes and not k.startswith("_"))
        if module == "sys":
            changed = [k for k in changed if k not in ("stdout", "stderr", "stdin", "last_value", "last_type", "last_traceback")]
        if changed or added:
            found.append(f"{module} patched: {', '.join((changed + added)[:8])}")
    for name, value in before["hooks"].items():
        if after["hooks"].get(name) != value:
            found.append(f"sys.{name} replaced")
    if after["trace"] != before["trace"]:
        found.append("trace or profile function set")
    if after["atexit"] > before["atexit"]:
        found.append("exit handler registered (atexit)")
    for number, value in before["signals"].items():
        if after["signals"].get(number) != value:
            found.append(f"signal handler for {signal.Signals(number).name} replaced")
    return found


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
        referee(float(sys.argv[2]), sys.argv[3] == "1", sys.argv[4] == "1")
    elif role == "host":
        host(sys.argv[2] == "1", sys.argv[3] == "1")
    else:
        sys.exit("usage: jailside.py referee TIMEOUT GUARD MAIN")
