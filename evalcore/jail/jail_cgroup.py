"""A memory and process-count cgroup per jail: limits that hold for the jail as a whole.

``RLIMIT_AS`` bounds one process's address space; it counts neither what several processes hold
together nor shared memory, tmpfs files and their inodes (kernel memory). A memory cgroup counts all
of it, for every process of the jail, bwrap's own included. Each jail gets a fresh cgroup with
``memory_mb`` as its ceiling (no swap) and a task limit; the jail's processes are moved in before
bwrap starts, killed through it, and :func:`run_program` returns only once it is empty; then it is
removed.

Where the cgroups come from, by ``PODIUM_JAIL_CGROUP``:

- ``auto`` (the default): cgroup v1's memory (and pids) hierarchies where the host mounts them, a
  ``podium-jails`` folder beside the worker's own cgroup; else cgroup v2, a ``podium-jails`` folder at
  the top of the worker's cgroup tree with the memory and pids controllers enabled. This needs root,
  or a tree delegated to the worker's user.
- an absolute path: a cgroup v2 folder delegated to the worker (``scripts/jail-cgroup.sh`` makes one
  in the compose images); jails are made inside it.
- ``off``: no cgroup. The jail then says so once per process (a warning in the log) and every
  result carries ``limits: per-process``: each process still has ``RLIMIT_AS`` = ``memory_mb``, but
  together, with shared memory and tmpfs, a jail may hold more.

When ``auto`` or a path finds no usable cgroup, the jail refuses to start (``SandboxUnavailable``,
naming what is missing): it never runs silently weaker.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from dataclasses import dataclass

SETTING = "PODIUM_JAIL_CGROUP"
FOLDER = "podium-jails"
V1_FLOOR_BYTES = 16 << 20  # memory.limit_in_bytes below this refuses to be set on some kernels
TCP_BYTES = 16 << 20  # cgroup v1: TCP buffers a jail may hold (memory.kmem.tcp.limit_in_bytes)


class CgroupUnavailable(RuntimeError):
    """No cgroup can hold the jail: the reason, and what to do about it."""


def _read(path: str) -> str:
    with open(path) as handle:
        return handle.read()


def _write(path: str, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


def _mounts() -> dict[str, str]:
    """``{"v2": path}`` and ``{"v1:<controller>": path}`` from /proc/self/mountinfo."""
    found: dict[str, str] = {}
    for line in _read("/proc/self/mountinfo").splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        point = fields[4].replace("\\040", " ")
        if tail[0] == "cgroup2":
            found.setdefault("v2", point)
        elif tail[0] == "cgroup":
            for option in tail[2].split(","):
                found.setdefault("v1:" + option, point)
    return found


def _own() -> dict[str, str]:
    """The worker's own cgroup per v1 controller (``"memory"``) and for v2 (``""``)."""
    own: dict[str, str] = {}
    for line in _read("/proc/self/cgroup").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") if parts[1] else [""]:
                own[controller] = parts[2]
    return own


@dataclass(frozen=True)
class CgroupRoot:
    """Where this process makes its jails' cgroups."""

    version: int  # 1 or 2
    memory: str  # the folder jails' memory cgroups go in (v2: every controller)
    pids: str | None  # v1: the pids hierarchy's folder, where mounted

    @property
    def description(self) -> str:
        controllers = "memory+pids" if self.version == 2 or self.pids else "memory"
        return f"cgroup v{self.version} {controllers} at {self.memory}"

    def create(self, memory_bytes: int, max_tasks: int) -> JailCgroup:
        name = f"jail-{os.getpid()}-{secrets.token_hex(6)}"
        folders = [os.path.join(self.memory, name)]
        if self.version == 1 and self.pids:
            folders.append(os.path.join(self.pids, name))
        made: list[str] = []
        try:
            for folder in folders:
                os.mkdir(folder, 0o755)
                made.append(folder)
            memory = folders[0]
            if self.version == 2:
                _write(f"{memory}/memory.max", str(memory_bytes))
                if os.path.exists(f"{memory}/memory.swap.max"):
                    _write(f"{memory}/memory.swap.max", "0")
                _write(f"{memory}/memory.oom.group", "1")
                _write(f"{memory}/pids.max", str(max_tasks))
            else:
                _write(f"{memory}/memory.limit_in_bytes", str(max(memory_bytes, V1_FLOOR_BYTES)))
                if os.path.exists(f"{memory}/memory.memsw.limit_in_bytes"):
                    _write(f"{memory}/memory.memsw.limit_in_bytes", str(max(memory_bytes, V1_FLOOR_BYTES)))
                _cap_tcp(memory, memory_bytes)
                if len(folders) > 1:
                    _write(f"{folders[1]}/pids.max", str(max_tasks))
        except OSError as error:
            for folder in reversed(made):
                _remove(folder)
            raise CgroupUnavailable(f"cannot make a jail cgroup in {self.memory}: {error}") from None
        return JailCgroup(self.version, tuple(folders))


@dataclass(frozen=True)
class JailCgroup:
    version: int
    folders: tuple[str, ...]

    def add(self, pid: int) -> None:
        """Move ``pid`` (bwrap, before it starts anything) into every folder of this cgroup."""
        for folder in self.folders:
            _write(f"{folder}/cgroup.procs", str(pid))

    def pids(self) -> list[int]:
        found: set[int] = set()
        for folder in self.folders:
            try:
                found.update(int(p) for p in _read(f"{folder}/cgroup.procs").split())
            except (OSError, ValueError):
                pass
        return sorted(found)

    def kill(self, spare: int | None = None) -> None:
        """SIGKILL every process in the cgroup but ``spare`` (bwrap, which then reaps the jail's init)."""
        for pid in self.pids():
            if pid != spare:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def empty(self, within: float) -> bool:
        """Wait up to ``within`` seconds for the cgroup to hold no process, killing what is left."""
        deadline, pause = time.monotonic() + within, 0.001
        while True:
            if not self.pids():
                return True
            if time.monotonic() >= deadline:
                return False
            self.kill()
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def out_of_memory(self) -> bool:
        """Whether the kernel's OOM killer killed a process of this jail."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            for line in _read(f"{self.folders[0]}/{name}").splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill" and int(value or 0) > 0:
                    return True
        except (OSError, ValueError):
            pass
        return False

    def remove(self) -> None:
        for folder in self.folders:
            _remove(folder)


def _cap_tcp(folder: str, memory_bytes: int) -> None:
    """cgroup v1 never charges TCP buffers to ``memory.limit_in_bytes``: cap them apart (cgroup v2 counts
    socket memory in ``memory.max`` already). The jail's seccomp filter refuses inet sockets as well; this
    holds should a jail ever be given them. Kernels that dropped the file (it is deprecated) skip it."""
    path = f"{folder}/memory.kmem.tcp.limit_in_bytes"
    if os.path.exists(path):
        try:
            _write(path, str(max(min(memory_bytes, TCP_BYTES), V1_FLOOR_BYTES)))
        except OSError:
            pass


def _remove(folder: str) -> None:
    for _ in range(50):
        try:
            os.rmdir(folder)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)


def _sweep(parent: str) -> None:
    """Remove jail cgroups that workers now gone left behind (their pid is in the name)."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        parts = name.split("-")
        if len(parts) == 3 and parts[0] == "jail" and parts[1].isdigit() and not os.path.exists(f"/proc/{parts[1]}"):
            try:
                os.rmdir(os.path.join(parent, name))
            except OSError:
                pass


def _folder(base: str, own: str) -> str:
    folder = os.path.join(base, own.lstrip("/"), FOLDER)
    os.makedirs(folder, exist_ok=True)
    return folder


def _enable(folder: str) -> None:
    """Turn on the memory and pids controllers for ``folder``'s children (cgroup v2)."""
    enabled = _read(f"{folder}/cgroup.subtree_control").split()
    wanted = [c for c in ("memory", "pids") if c not in enabled]
    if wanted:
        _write(f"{folder}/cgroup.subtree_control", " ".join("+" + c for c in wanted))


def _v2(folder: str) -> CgroupRoot:
    controllers = _read(f"{folder}/cgroup.controllers").split()
    missing = [c for c in ("memory", "pids") if c not in controllers]
    if missing:
        raise CgroupUnavailable(f"{folder} lacks the {' and '.join(missing)} controller (cgroup.controllers)")
    _enable(folder)
    return CgroupRoot(2, folder, None)


def find_root(setting: str | None = None) -> CgroupRoot | None:
    """The place for jail cgroups by ``PODIUM_JAIL_CGROUP`` (see the module docstring); None for ``off``."""
    value = (os.environ.get(SETTING, "auto") if setting is None else setting).strip() or "auto"
    if value == "off":
        return None
    hint = (
        f"the jail needs a memory cgroup: run the worker as root, or delegate a cgroup v2 folder to it "
        f"and set {SETTING} to its path (docs/security.md); {SETTING}=off runs jails with per-process "
        "limits only"
    )
    try:
        if value != "auto":
            if not os.path.isabs(value):
                raise CgroupUnavailable(f"{SETTING} must be auto, off or an absolute path, not {value!r}")
            root = _v2(value)
        else:
            mounts, own = _mounts(), _own()
            if "v1:memory" in mounts and "memory" in own:
                pids = _folder(mounts["v1:pids"], own["pids"]) if "v1:pids" in mounts and "pids" in own else None
                root = CgroupRoot(1, _folder(mounts["v1:memory"], own["memory"]), pids)
            elif "v2" in mounts:
                top = mounts["v2"]
                _enable(top)
                folder = os.path.join(top, FOLDER)
                os.makedirs(folder, exist_ok=True)
                root = _v2(folder)
            else:
                raise CgroupUnavailable("no cgroup hierarchy with a memory controller is mounted")
    except CgroupUnavailable as error:
        raise CgroupUnavailable(f"{error}; {hint}") from None
    except OSError as error:
        raise CgroupUnavailable(f"{error.strerror or error}: {error.filename or ''}; {hint}") from None
    for folder in (root.memory, root.pids):
        if folder:
            _sweep(folder)
    root.create(64 << 20, 4).remove()  # a trial: the limits can be written here
    return root
