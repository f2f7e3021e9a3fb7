"""Run untrusted generated code in a jail built with bubblewrap (``bwrap``, Debian package ``bubblewrap``).

Each program runs in fresh user, PID, network, mount, IPC, UTS and cgroup namespaces, with:

- a read-only root holding only ``/usr`` (and the ``/bin``, ``/lib*`` links into it), a private
  ``/proc`` and a ``/dev`` of five devices (null, zero, full, random, urandom) with no terminals (no
  devpts: the machine's pseudo-terminals are one pool); no ``/etc``, no ``/home``, ``/root``,
  ``/work`` or project tree;
- the program itself read-only at ``/program/main.py`` and a private, size-limited tmpfs at ``/tmp``
  (the working directory) as the only writable place, discarded when the program ends;
- an empty environment (``PATH``, ``HOME`` and ``LANG`` only), no network interface but a private
  loopback, no further user namespaces, a new session (no terminal);
- optionally, hidden data on an inherited descriptor (``hidden=``, the descriptor's number last among
  the arguments) instead of a file: the jail's first process reads it and closes it before it
  starts anything else (the scoring referee's tests, :mod:`evalcore.jail.verdicts`);
- the system Python under ``/usr`` in isolated mode, as an unprivileged user (``nobody`` when the
  worker is root), under ``RLIMIT_NPROC`` / ``RLIMIT_AS`` / ``RLIMIT_CPU`` / ``RLIMIT_FSIZE`` set inside
  the jail's own user namespace, so the process count is the jail's alone;
- a wall-clock timeout that kills the jail's first process: the kernel then kills everything in its
  PID namespace, including ``setsid()`` daemons, before :func:`run_program` returns.

Only bounded stdout/stderr text and the exit status come back; nothing the jail can write is
deserialised. Where no jail can be created :class:`SandboxUnavailable` is raised: untrusted code is
refused, never run unconfined. See docs/security.md.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field

from evalcore.jail import reaper, seccomp
from evalcore.jail.jail_cgroup import CgroupRoot, CgroupUnavailable, find_root

log = logging.getLogger(__name__)

MAX_PROCESSES = 16  # processes and threads in one jail
MAX_DESCRIPTORS = 256  # open files per process (RLIMIT_NOFILE)
TMPFS_BYTES = 64 << 20  # the writable /tmp
SHM_BYTES = 8 << 20  # /dev/shm, for multiprocessing's semaphores
MAX_FILE_BYTES = 16 << 20  # any file the program writes, its captured stdout and stderr included
OUTPUT_LIMIT = 64 << 10  # characters of stdout / stderr returned
MAX_PENDING_SIGNALS = 256  # queued signals and POSIX timers (RLIMIT_SIGPENDING), per jail
DEVICES = ("null", "zero", "full", "random", "urandom")  # the jail's /dev: no tty, no devpts
PROGRAM_DIR = "/program"
PROGRAM_PATH = "/program/main.py"
NOBODY = 65534
MIN_BWRAP = (0, 8)
TOOL_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"  # searched after $PATH for bwrap and prlimit
_PROBE_TIMEOUT = 30.0
_ENVIRONMENT = ("--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp", "--setenv", "LANG", "C.UTF-8")


class SandboxUnavailable(RuntimeError):
    """No jail can be created on this machine: untrusted code is refused instead of run unconfined."""


@dataclass(frozen=True)
class ExecutionResult:
    passed: bool
    status: str  # "passed", "failed" or "timeout"
    detail: str = ""
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    limits: str = ""  # where the jail's memory limit held: "cgroup v1 memory+pids at ..." or "per-process"

    @property
    def timed_out(self) -> bool:
        return self.status == "timeout"


@dataclass(frozen=True)
class Jail:
    """What the jail is built from: host paths, checked once per process by :func:`require_jail`."""

    bwrap: str
    prlimit: str
    python: str
    root: tuple[str, ...]  # bwrap arguments that build the read-only root
    seccomp: bytes = b""  # the compiled filter (evalcore.jail.seccomp)
    cgroups: CgroupRoot | None = field(default=None)  # None: PODIUM_JAIL_CGROUP=off
    bwrap_init: bool = False  # True: bwrap's own init as PID 1 (the jail before issue 28; bench/sandbox.py only)

    @property
    def limits(self) -> str:
        return self.cgroups.description if self.cgroups else "per-process (PODIUM_JAIL_CGROUP=off)"


def _tool(name: str, package: str, what: str) -> str:
    path = shutil.which(name) or shutil.which(name, path=TOOL_PATH)
    if not path:
        raise SandboxUnavailable(f"cannot run untrusted code: {what} is not installed; apt-get install {package}")
    return path


def _bwrap() -> str:
    """bwrap 0.8 or later (``--disable-userns``): Debian 12, Ubuntu 24.04."""
    path = _tool("bwrap", "bubblewrap", "bubblewrap (bwrap)")
    try:
        version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout.split()[-1:]
        found = tuple(int(part) for part in version[0].split(".")[:2])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        raise SandboxUnavailable(f"cannot run untrusted code: {path} --version does not answer") from None
    if found < MIN_BWRAP:
        raise SandboxUnavailable(
            f"cannot run untrusted code: bubblewrap {version[0]} is too old, the jail needs "
            f"{'.'.join(map(str, MIN_BWRAP))} or later (--disable-userns)"
        )
    return path


def _system_python() -> str:
    """A Python under /usr (the jail binds nothing else): this one if it lives there, else the system's."""
    for candidate in (getattr(sys, "_base_executable", sys.executable), "/usr/bin/python3", "/usr/local/bin/python3"):
        real = os.path.realpath(candidate)
        if real.startswith("/usr/") and os.path.isfile(real) and os.access(real, os.X_OK):
            return real
    raise SandboxUnavailable(
        "cannot run untrusted code: no Python interpreter under /usr for the jail; apt-get install python3-minimal"
    )


def _root_mounts() -> tuple[str, ...]:
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = "/" + name
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return tuple(args)


def _argv(jail: Jail, files: dict[str, int], seccomp_fd: int | None, timeout: float, memory_mb: int, args: tuple[str, ...]) -> list[str]:
    cpu_seconds = int(timeout) + 1
    limits = [
        f"--nproc={MAX_PROCESSES}",
        f"--as={memory_mb << 20}",
        f"--cpu={cpu_seconds}",
        f"--fsize={MAX_FILE_BYTES}",
        f"--nofile={MAX_DESCRIPTORS}",
        f"--sigpending={MAX_PENDING_SIGNALS}",
        "--msgqueue=0",
        "--core=0",
    ]
    program = [arg for name, fd in files.items() for arg in ("--ro-bind-data", str(fd), f"{PROGRAM_DIR}/{name}")]
    return [
        jail.bwrap,
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        *(() if jail.bwrap_init else ("--as-pid-1",)),
        "--hostname", "jail",
        *jail.root,
        "--proc", "/proc",
        *_dev(),
        "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm",
        "--size", str(TMPFS_BYTES), "--tmpfs", "/tmp",
        *program,
        "--remount-ro", "/",
        "--chdir", "/tmp",
        "--clearenv", *_ENVIRONMENT,
        *(("--seccomp", str(seccomp_fd)) if seccomp_fd is not None else ()),
        "--", jail.prlimit, *limits,
        "--", jail.python, "-I", "-B", *args,
    ]  # fmt: skip


def _dev() -> tuple[str, ...]:
    """A /dev of a few devices, built by hand: bwrap's ``--dev`` mounts a devpts whose terminals come from
    the machine's one pool (``kernel.pty.max``), which one jail could empty for every other."""
    args: list[str] = ["--dir", "/dev"]
    for name in DEVICES:
        args += ["--dev-bind", f"/dev/{name}", f"/dev/{name}"]
    args += ["--symlink", "/proc/self/fd", "/dev/fd"]
    for number, name in enumerate(("stdin", "stdout", "stderr")):
        args += ["--symlink", f"/proc/self/fd/{number}", f"/dev/{name}"]
    return tuple(args)


def _memfd(name: str, data: bytes = b"") -> int:
    fd = os.memfd_create(f"podium-{name}", os.MFD_CLOEXEC)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _read_output(fd: int) -> str:
    size = os.fstat(fd).st_size
    text = os.pread(fd, OUTPUT_LIMIT, 0).decode("utf-8", "replace")[:OUTPUT_LIMIT]
    return text + f"\n[output truncated: {size} bytes]" if size > OUTPUT_LIMIT else text


def _privileges() -> dict:
    """Never run the jail as host root: root is exempt from RLIMIT_NPROC and owns too much."""
    return {"user": NOBODY, "group": NOBODY, "extra_groups": []} if os.geteuid() == 0 else {}


GATE = 'read -r _ && exec "$0" "$@" </dev/null'  # /bin/sh waits until bwrap's pid is in the cgroup


@dataclass(frozen=True)
class Launched:
    code: int | None  # None: timed out
    stdout: str
    stderr: str
    out_of_memory: bool


def launch(
    jail: Jail, files: dict[str, str], args: tuple[str, ...], timeout: float, memory_mb: int, *, hidden: bytes | None = None
) -> Launched:
    """Run ``python -I -B *args`` in a fresh jail holding ``files`` (read-only, under /program).

    ``hidden``: data that must never be a file of the jail (a scoring referee's tests). It comes in on an
    inherited descriptor whose number is appended to ``args``; the program reads it and closes it before
    it starts any other process.
    """
    fds = {name: _memfd(name, text.encode("utf-8", "replace")) for name, text in files.items()}
    out, err = _memfd("stdout"), _memfd("stderr")
    filter_fd = _memfd("seccomp", jail.seccomp) if jail.seccomp else None
    hidden_fd = _memfd("hidden", hidden) if hidden is not None else None
    if hidden_fd is not None:
        args = (*args, str(hidden_fd))
    cgroup = None
    try:
        cgroup = jail.cgroups.create(memory_mb << 20, MAX_PROCESSES + 2) if jail.cgroups else None
    except CgroupUnavailable as error:
        raise SandboxUnavailable(f"cannot run untrusted code: {error}") from None
    gate, release = os.pipe() if cgroup else (subprocess.DEVNULL, -1)
    argv = _argv(jail, fds, filter_fd, timeout, memory_mb, args)
    try:
        process = subprocess.Popen(
            ["/bin/sh", "-c", GATE, *argv] if cgroup else argv,
            stdin=gate,
            stdout=out,
            stderr=err,
            pass_fds=(*fds.values(), *(fd for fd in (filter_fd, hidden_fd) if fd is not None)),
            env={"PATH": "/usr/bin:/bin"},
            cwd="/",
            start_new_session=True,
            **_privileges(),
        )
        if cgroup:
            os.close(gate)
            try:
                cgroup.add(process.pid)
                os.write(release, b"go\n")
            except OSError as error:
                process.kill()
                process.wait()
                raise SandboxUnavailable(f"cannot run untrusted code: cannot move the jail into its cgroup: {error}") from None
            finally:
                os.close(release)
        code = reaper.exit_wait(process, timeout)
        if code is None:
            reaper.jail_kill(process, cgroup)
        if cgroup and not cgroup.empty(within=10):
            log.error("jail cgroup %s still holds processes %s after 10 s", cgroup.folders[0], cgroup.pids())
        oom = bool(cgroup and cgroup.out_of_memory())
        return Launched(code, _read_output(out), _read_output(err), oom)
    finally:
        for fd in (*fds.values(), out, err, *(fd for fd in (filter_fd, hidden_fd) if fd is not None)):
            os.close(fd)
        if cgroup:
            cgroup.remove()


def check_jail(jail: Jail) -> Jail:
    """``jail`` after a trial run in it; :class:`SandboxUnavailable` with bwrap's reason if it cannot be created."""
    done = launch(jail, {"main.py": "print('ok')"}, (PROGRAM_PATH,), _PROBE_TIMEOUT, 256)
    if done.code != 0 or done.stdout.strip() != "ok":
        reason = done.stderr.strip().splitlines()[-1:] or [f"exit code {done.code}"]
        raise SandboxUnavailable(
            f"cannot run untrusted code: bubblewrap could not create the jail ({reason[0][:300]}); it needs "
            "unprivileged user namespaces (sysctl user.max_user_namespaces > 0; in a container, a seccomp "
            "profile that allows them)"
        )
    return jail


@functools.lru_cache(maxsize=1)
def require_jail() -> Jail:
    """The jail this machine can build, checked once per process; :class:`SandboxUnavailable` names what is
    missing. Code tasks may call it before generating, to refuse early."""
    try:
        program = seccomp.filter_program()
    except seccomp.SeccompUnavailable as error:
        raise SandboxUnavailable(f"cannot run untrusted code: {error}") from None
    try:
        cgroups = find_root()
    except CgroupUnavailable as error:
        raise SandboxUnavailable(f"cannot run untrusted code: {error}") from None
    jail = check_jail(
        Jail(
            bwrap=_bwrap(),
            prlimit=_tool("prlimit", "util-linux", "prlimit"),
            python=_system_python(),
            root=_root_mounts(),
            seccomp=program,
            cgroups=cgroups,
        )
    )
    if cgroups is None:
        log.warning(
            "jail without a memory cgroup (PODIUM_JAIL_CGROUP=off): each process is limited to memory_mb, but a "
            "jail's processes together, with shared memory and tmpfs, may hold more"
        )
    return jail


def jail_protocol(jail: Jail) -> dict:
    """What a code task's protocol records about the jail its programs ran in."""
    return {
        "runner": "bubblewrap",
        "memory_limit": jail.limits,
        "max_processes": MAX_PROCESSES,
        "max_descriptors": MAX_DESCRIPTORS,
        "tmpfs_bytes": TMPFS_BYTES,
        "max_pending_signals": MAX_PENDING_SIGNALS,
        "devices": ", ".join(DEVICES),
        "seccomp_denied": seccomp.denied_syscalls(),
        "socket_families": "AF_UNIX",
        "file_locks": "refused (ENOLCK)",
    }


MAX_TIMEOUT_S = 3600  # inf or NaN would overflow the CPU-time limit (OverflowError) or never end
MAX_MEMORY_MB = 1 << 20


def run_program(source: str, *, timeout: float = 10.0, memory_mb: int = 1024) -> ExecutionResult:
    """Execute ``source`` in a fresh jail; passed when it exits 0 within the limits.

    Raises :class:`SandboxUnavailable` where no jail can be created.
    """
    if not isinstance(source, str):
        raise ValueError("source must be a string")
    check_limits(timeout, memory_mb)
    jail = require_jail()
    done = launch(jail, {"main.py": source}, (PROGRAM_PATH,), float(timeout), int(memory_mb))
    return _result(done, timeout, memory_mb, jail.limits)


def check_limits(timeout, memory_mb) -> None:
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= MAX_TIMEOUT_S:
        raise ValueError(f"timeout must be a number of seconds in (0, {MAX_TIMEOUT_S}], not {timeout!r}")
    if isinstance(memory_mb, bool) or not isinstance(memory_mb, int) or not 64 <= memory_mb <= MAX_MEMORY_MB:
        raise ValueError(f"memory_mb must be a whole number from 64 to {MAX_MEMORY_MB}, not {memory_mb!r}")


def _result(done: Launched, timeout: float, memory_mb: int, limits: str) -> ExecutionResult:
    common = {"stdout": done.stdout, "stderr": done.stderr, "limits": limits}
    if done.code is None:
        return ExecutionResult(False, "timeout", f"no result within {timeout} s", None, **common)
    if done.out_of_memory:
        detail = f"out of memory: the jail's processes together reached {memory_mb} MiB"
        return ExecutionResult(False, "failed", detail, done.code, **common)
    if done.code == 0:
        return ExecutionResult(True, "passed", "", 0, **common)
    tail = [line for line in done.stderr.strip().splitlines() if line.strip()][-1:] or [f"exit code {done.code}"]
    return ExecutionResult(False, "failed", tail[0][:300], done.code, **common)
