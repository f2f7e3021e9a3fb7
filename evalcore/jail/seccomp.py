"""The jail's seccomp filter, compiled to BPF by libseccomp (Debian package ``libseccomp2``).

bwrap loads it (``--seccomp FD``) into the jailed program just before exec, so it holds for every
process of the jail (the jail runs ``--as-pid-1``: there is no unfiltered bwrap init inside). The
filter allows by default and refuses, with an errno the program sees as an ordinary failure, the
system calls that no program of the standard corpus (HumanEval, MBPP, the harness's code tasks)
makes and that reach past the jail's namespaces and limits:

- another process's memory or descriptors: ``ptrace``, ``process_vm_readv/writev``, ``pidfd_getfd``,
  ``kcmp``, ``process_madvise``;
- memory that ``RLIMIT_AS`` does not count: ``memfd_create``, ``memfd_secret``, SysV shared memory,
  message queues and semaphores, POSIX message queues, ``userfaultfd``; NUMA policy calls;
- kernel attack surface: ``io_uring_*``, ``bpf``, ``perf_event_open``, ``keyctl``/``add_key``/
  ``request_key``, ``fanotify_init``, ``open_by_handle_at``, ``modify_ldt``, ``iopl``/``ioperm``;
- pools the whole machine shares, which one jail could empty for every other process: Linux AIO
  contexts (``io_setup`` and the rest of ``io_*``: ``fs.aio-max-nr`` is machine-wide), inotify
  instances (``fs.inotify.max_user_instances`` is per user, and every jail runs as the same user), and
  file locks (``flock``, and ``fcntl``'s ``F_SETLK``/``F_SETLKW``/``F_OFD_SETLK*``/``F_SETLEASE``: lock
  records are kernel memory that no memory cgroup counts; measured on Linux 6.18, 40,000 locks from
  one jail, none of them in its cgroup), refused with ``ENOLCK``;
- namespaces and mounts: ``unshare``, ``setns``, ``clone`` with any ``CLONE_NEW*`` flag, ``clone3``
  (ENOSYS, so runtimes fall back to ``clone``), ``mount`` and the new mount API, ``pivot_root``,
  ``chroot``, ``umount2``;
- the machine: modules, ``kexec``, ``reboot``, swap, clocks, host and domain names, ``syslog``,
  ``acct``, quotas;
- sockets other than ``AF_UNIX``: the network namespace does not cover every family (``AF_VSOCK``,
  ``AF_PACKET``, Bluetooth, ...), and an ``AF_INET`` socket on the jail's own loopback holds buffers
  that cgroup v1 never charges to the jail (``memory.kmem.tcp``: 372 MiB queued from one jail limited
  to 256 MiB, measured); no code task needs the network. ``AF_UNIX`` buffers are charged to the
  jail's memory cgroup (measured: a jail filling datagram sockets is killed at its limit).

System calls of another ABI (32-bit ``int 0x80``, x32) kill the process: the filter is built for
the native architecture only.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os
import socket

ALLOW = 0x7FFF0000
OPTIMIZE_ATTRIBUTE, BINARY_TREE = 8, 2  # SCMP_FLTATR_CTL_OPTIMIZE (libseccomp 2.5)


def _errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


# (syscall names, errno): refused whatever their arguments
DENIED: tuple[tuple[str, int], ...] = (
    ("ptrace process_vm_readv process_vm_writev pidfd_getfd kcmp process_madvise process_mrelease", errno.EPERM),
    ("memfd_create memfd_secret userfaultfd shmget shmat shmctl shmdt msgget msgsnd msgrcv msgctl "
     "semget semop semctl semtimedop mq_open mq_unlink mq_timedsend mq_timedreceive mq_notify "
     "mq_getsetattr mbind set_mempolicy migrate_pages move_pages set_mempolicy_home_node", errno.EPERM),
    ("io_uring_setup io_uring_enter io_uring_register clone3", errno.ENOSYS),
    ("io_setup io_destroy io_submit io_cancel io_getevents io_pgetevents inotify_init inotify_init1 "
     "inotify_add_watch", errno.ENOSYS),
    ("flock", errno.ENOLCK),
    ("bpf perf_event_open keyctl add_key request_key fanotify_init open_by_handle_at name_to_handle_at "
     "modify_ldt iopl ioperm lookup_dcookie uselib ustat sysfs _sysctl vhangup", errno.EPERM),
    ("unshare setns mount umount2 pivot_root chroot move_mount open_tree fsopen fsconfig fsmount fspick "
     "mount_setattr", errno.EPERM),
    ("init_module finit_module delete_module kexec_load kexec_file_load reboot swapon swapoff "
     "settimeofday clock_settime clock_adjtime adjtimex sethostname setdomainname syslog acct "
     "quotactl quotactl_fd nfsservctl", errno.EPERM),
)  # fmt: skip
SOCKET_FAMILIES = (socket.AF_UNIX,)
# fcntl commands that take a lock record: F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW, F_SETLEASE
LOCKING_FCNTL = (6, 7, 37, 38, 1024)
CLONE_NAMESPACES = 0x7E020000  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET (and NEWTIME below)
CLONE_NEWTIME = 0x00000080

# struct scmp_arg_cmp: arg index, comparison, two 64-bit operands
_EQ, _GE, _MASKED_EQ = 4, 5, 7


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]


class SeccompUnavailable(RuntimeError):
    """libseccomp cannot be loaded or cannot build the filter."""


@functools.lru_cache(maxsize=1)
def _library():
    path = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(path, use_errno=True)
    except OSError:
        raise SeccompUnavailable(
            "cannot build the jail's seccomp filter: libseccomp is not installed; apt-get install libseccomp2"
        ) from None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(_ArgCmp),
    ]  # fmt: skip
    lib.seccomp_attr_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return lib


def _syscall(lib, name: str) -> int | None:
    number = lib.seccomp_syscall_resolve_name(name.encode())
    return None if number < 0 else number  # a call this architecture lacks (e.g. iopl on arm64)


def _rule(lib, ctx, action: int, number: int, *comparisons: tuple[int, int, int, int]) -> None:
    array = (_ArgCmp * max(1, len(comparisons)))(*(_ArgCmp(*c) for c in comparisons))
    code = lib.seccomp_rule_add_array(ctx, action, number, len(comparisons), array)
    if code < 0:
        raise SeccompUnavailable(f"libseccomp refused a rule for syscall {number}: {os.strerror(-code)}")


def denied_syscalls() -> list[str]:
    """Every system call the filter refuses outright, by name (fcntl's locking commands and socket families
    other than AF_UNIX are refused by argument besides)."""
    return sorted(name for names, _ in DENIED for name in names.split())


@functools.lru_cache(maxsize=1)
def filter_program() -> bytes:
    """The compiled BPF program (``struct sock_filter`` array) bwrap's ``--seccomp`` reads, built once."""
    lib = _library()
    ctx = lib.seccomp_init(ALLOW)
    if not ctx:
        raise SeccompUnavailable("cannot build the jail's seccomp filter: seccomp_init failed")
    try:
        if lib.seccomp_attr_set(ctx, OPTIMIZE_ATTRIBUTE, BINARY_TREE) < 0:  # a tree, not a chain, of syscall numbers
            raise SeccompUnavailable("cannot build the jail's seccomp filter: libseccomp is older than 2.5")
        for names, code in DENIED:
            for name in names.split():
                if (number := _syscall(lib, name)) is not None:
                    _rule(lib, ctx, _errno(code), number)
        eafnosupport = _errno(errno.EAFNOSUPPORT)
        for name in ("socket", "socketpair"):
            number = _syscall(lib, name)
            top = max(SOCKET_FAMILIES)
            for family in range(top):
                if family not in SOCKET_FAMILIES:
                    _rule(lib, ctx, eafnosupport, number, (0, _EQ, family, 0))
            _rule(lib, ctx, eafnosupport, number, (0, _GE, top + 1, 0))
        fcntl = _syscall(lib, "fcntl")
        for command in LOCKING_FCNTL:
            _rule(lib, ctx, _errno(errno.ENOLCK), fcntl, (1, _EQ, command, 0))
        clone = _syscall(lib, "clone")
        for flag in [1 << bit for bit in range(32) if CLONE_NAMESPACES >> bit & 1] + [CLONE_NEWTIME]:
            _rule(lib, ctx, _errno(errno.EPERM), clone, (0, _MASKED_EQ, flag, flag))
        fd = os.memfd_create("podium-seccomp", os.MFD_CLOEXEC)
        try:
            code = lib.seccomp_export_bpf(ctx, fd)
            if code < 0:
                raise SeccompUnavailable(f"cannot export the jail's seccomp filter: {os.strerror(-code)}")
            program = os.pread(fd, os.fstat(fd).st_size, 0)
        finally:
            os.close(fd)
    finally:
        lib.seccomp_release(ctx)
    return program
