"""Pools the whole machine shares, which one jail must not be able to empty for every other (issue 47).

Each jail's memory cgroup holds what it can charge (memory, tmpfs, socket buffers of AF_UNIX, pipes,
timers, dentries); these are the pools it cannot: counted machine-wide or per user (every jail runs
as the same user), or kernel memory no memory cgroup counts. Each test shows the pool refused or bounded
from inside a jail; where the attack worked before, the same program without the seccomp filter shows
what it took.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os

import pytest

from evalcore.jail import jail_cgroup
from evalcore.jail.sandbox import (
    DEVICES,
    MAX_DESCRIPTORS,
    MAX_PENDING_SIGNALS,
    PROGRAM_PATH,
    launch,
    require_jail,
    run_program,
)
from tests.evalcore.jail.test_jail_attacks import syscall_numbers


def jailed(program: str, *, timeout: float = 20) -> dict:
    result = run_program(program, timeout=timeout, memory_mb=256)
    assert result.passed, result
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_no_pseudo_terminals_and_only_five_devices():
    seen = jailed(
        "import json, os\nout = {'dev': sorted(os.listdir('/dev'))}\n"
        "try:\n    os.openpty()\n    out['pty'] = 'opened'\nexcept OSError as e:\n    out['pty'] = e.errno\n"
        "out['ptmx'] = os.path.exists('/dev/ptmx')\nprint(json.dumps(out))\n"
    )
    # devpts instances share kernel.pty.max: one jail took 3,071 terminals and another's openpty failed
    assert seen["pty"] == errno.ENOENT and seen["ptmx"] is False
    assert set(seen["dev"]) == {*DEVICES, "fd", "stdin", "stdout", "stderr", "shm"}
    assert "pts" not in seen["dev"]


def syscalls(numbers: dict[str, int], first: str = "0", second: str = "0") -> dict:
    """[return value, errno] of each system call made in a jail, with ``first`` and ``second`` as its first two
    arguments (Python expressions over ``name``, ``ctx`` and ``ctypes``)."""
    return jailed(
        "import ctypes, json, resource\nlibc = ctypes.CDLL(None, use_errno=True)\nctx = ctypes.c_ulong(0)\nout = {}\n"
        f"for name, number in {numbers!r}.items():\n"
        "    ctypes.set_errno(0)\n"
        f"    out[name] = [libc.syscall(number, {first}, {second}, 0o600, 0), ctypes.get_errno()]\n"
        "out['msgqueue'] = resource.getrlimit(resource.RLIMIT_MSGQUEUE)[0]\n"
        "print(json.dumps(out))\n"
    )


def test_linux_aio_and_inotify_are_refused():
    numbers = syscall_numbers("io_setup", "io_submit", "inotify_init1", "inotify_init")
    seen = syscalls(numbers, "65536 if name == 'io_setup' else 0", "ctypes.byref(ctx) if name == 'io_setup' else 0")
    # io_setup took all of fs.aio-max-nr (65,536), so the host's own io_setup(1) failed with EAGAIN;
    # inotify instances are counted per user (fs.inotify.max_user_instances), shared by every jail
    for name in numbers:
        assert seen[name] == [-1, errno.ENOSYS], (name, seen[name])


LOCKS = """
import fcntl, json, os, struct
fd = os.open('/tmp/f', os.O_RDWR | os.O_CREAT)
out = {}
for name, call in (
    ('lockf', lambda: fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)),
    ('flock', lambda: fcntl.flock(fd, fcntl.LOCK_EX)),
    ('ofd', lambda: fcntl.fcntl(fd, 37, struct.pack('hhqqi', fcntl.F_WRLCK, 0, 0, 1, 0))),
    ('lease', lambda: fcntl.fcntl(fd, 1024, fcntl.F_RDLCK)),
):
    try:
        call()
        out[name] = 'taken'
    except OSError as e:
        out[name] = e.errno
out['getlk'] = len(fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack('hhqqi', fcntl.F_WRLCK, 0, 0, 1, 0)))
n = 0
try:
    for i in range(5000):
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 2 * i)
        n += 1
except OSError:
    pass
out['many'] = n
print(json.dumps(out))
"""


def test_file_locks_are_refused():
    seen = jailed(LOCKS)
    # lock records are kernel memory outside every memory cgroup (40,000 from one jail, measured)
    for name in ("lockf", "flock", "ofd", "lease"):
        assert seen[name] == errno.ENOLCK, (name, seen[name])
    assert seen["getlk"] > 0 and seen["many"] == 0  # asking about a lock still works
    bare = dataclasses.replace(require_jail(), seccomp=b"")
    unfiltered = json.loads(launch(bare, {"main.py": LOCKS}, (PROGRAM_PATH,), 20.0, 256).stdout)
    assert unfiltered["lockf"] == "taken" and unfiltered["many"] == 5000


def test_queued_signals_and_posix_timers_are_bounded_per_jail():
    seen = jailed(
        "import ctypes, json, signal, threading\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])\nqueued = 0\n"
        "for _ in range(20000):\n"
        "    try:\n        signal.pthread_kill(threading.get_ident(), signal.SIGRTMIN)\n    except OSError:\n        break\n"
        "    queued += 1\n"
        "libc = ctypes.CDLL(None, use_errno=True)\ntimer = ctypes.c_long()\ntimers = 0\n"
        "for _ in range(20000):\n"
        "    if libc.timer_create(1, None, ctypes.byref(timer)) != 0:\n        break\n    timers += 1\n"
        "print(json.dumps({'queued': queued, 'timers': timers, 'errno': ctypes.get_errno()}))\n"
    )
    # RLIMIT_SIGPENDING is counted per user: one jail once held 96,367 and left none for the next
    assert seen["queued"] <= MAX_PENDING_SIGNALS and seen["timers"] <= MAX_PENDING_SIGNALS
    assert seen["queued"] + seen["timers"] >= MAX_PENDING_SIGNALS - 8 and seen["errno"] == errno.EAGAIN


def test_descriptors_are_bounded_per_process():
    seen = jailed(
        "import json, os\nfds = []\ntry:\n    while True:\n        fds.append(os.open('/dev/null', os.O_RDONLY))\n"
        "except OSError as e:\n    print(json.dumps({'open': len(fds) + 3, 'errno': e.errno}))\n"
    )
    # 16 processes x 256 descriptors at most: far below fs.file-max
    assert seen == {"open": MAX_DESCRIPTORS, "errno": errno.EMFILE}


def test_ipc_keyrings_and_message_queues_are_refused():
    numbers = syscall_numbers("mq_open", "msgget", "shmget", "semget", "add_key", "keyctl", "request_key")
    seen = syscalls(numbers, "b'/q' if name == 'mq_open' else 0", "64")
    for name in numbers:
        assert seen[name] == [-1, errno.EPERM], (name, seen[name])
    assert seen["msgqueue"] == 0


TCP_FLOOD = """
import json, socket, time
srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen(64)
pairs, queued = [], 0
for _ in range(60):
    a = socket.create_connection(srv.getsockname()); b, _ = srv.accept(); a.setblocking(False)
    try:
        while True:
            queued += a.send(b'x' * 65536)
    except (BlockingIOError, OSError):
        pass
    pairs.append((a, b))
print(json.dumps({'queued_mib': queued >> 20}), flush=True)
"""


@pytest.mark.skipif(not os.path.isdir("/sys/fs/cgroup/memory"), reason="cgroup v1 only: v2 counts socket memory in memory.max")
def test_loopback_tcp_buffers_are_capped_beneath_the_filter():
    # The filter refuses inet sockets (test_sandbox_hostile); beneath it, the cgroup caps what they could hold.
    root = require_jail().cgroups
    if root is None:
        pytest.skip("PODIUM_JAIL_CGROUP=off")
    cgroup = root.create(256 << 20, 4)
    try:
        with open(f"{cgroup.folders[0]}/memory.kmem.tcp.limit_in_bytes") as handle:
            assert int(handle.read()) == jail_cgroup.TCP_BYTES
    finally:
        cgroup.remove()
    bare = dataclasses.replace(require_jail(), seccomp=b"")
    done = launch(bare, {"main.py": TCP_FLOOD}, (PROGRAM_PATH,), 60.0, 256)
    # without the cap, 60 connections held 372 MiB of a jail limited to 256 MiB (measured)
    assert json.loads(done.stdout)["queued_mib"] <= 2 * (jail_cgroup.TCP_BYTES >> 20), done
