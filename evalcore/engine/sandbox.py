"""Run untrusted generated code: a subprocess with a time limit, a memory limit, no network and a
throwaway directory.

Each program runs in ``python -I`` (isolated: no user site, no environment paths) in a fresh
temporary directory that is deleted afterwards, with ``RLIMIT_AS`` / ``RLIMIT_CPU`` /
``RLIMIT_FSIZE`` / ``RLIMIT_NPROC`` set, an empty environment, and a prelude that disables
sockets and process-spawning functions. Where the kernel allows unprivileged network
namespaces, ``unshare -rn`` also removes every network interface. A wall-clock timeout kills the
whole process group. This is defence in depth for benchmark code, not a security boundary
against a determined attacker: run workers that execute code in a container.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass

PRELUDE = """
import builtins, os, socket, subprocess, shutil, sys
def _blocked(*args, **kwargs):
    raise PermissionError("disabled in the Podium sandbox")
socket.socket = _blocked
socket.create_connection = _blocked
for _name in ("system", "popen", "fork", "forkpty", "kill", "killpg", "execv", "execve", "execvp",
              "spawnv", "spawnve", "remove", "unlink", "rmdir", "removedirs", "rename", "renames",
              "truncate", "putenv", "chmod", "chown", "setuid"):
    if hasattr(os, _name):
        setattr(os, _name, _blocked)
subprocess.Popen = _blocked
subprocess.run = _blocked
shutil.rmtree = _blocked
shutil.move = _blocked
del _name
"""


@dataclass(frozen=True)
class ExecutionResult:
    passed: bool
    status: str  # "passed", "failed", "timeout", "error"
    detail: str = ""


@functools.lru_cache(maxsize=1)
def _network_namespace_prefix() -> tuple[str, ...]:
    unshare = shutil.which("unshare")
    if not unshare:
        return ()
    try:
        probe = subprocess.run([unshare, "-rn", "true"], capture_output=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return (unshare, "-rn") if probe.returncode == 0 else ()


def _limits(memory_mb: int, cpu_seconds: int):
    def apply() -> None:
        import resource

        os.setsid()
        memory = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 24, 1 << 24))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def run_program(source: str, *, timeout: float = 10.0, memory_mb: int = 1024) -> ExecutionResult:
    """Execute ``source``; passed when it exits 0 within the limits."""
    if timeout <= 0 or memory_mb < 64:
        raise ValueError("timeout must be positive and memory_mb at least 64")
    workdir = tempfile.mkdtemp(prefix="podium-sandbox-")
    try:
        path = os.path.join(workdir, "program.py")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(PRELUDE + "\n" + source + "\n")
        command = [*_network_namespace_prefix(), sys.executable, "-I", "-B", path]
        process = subprocess.Popen(
            command,
            cwd=workdir,
            env={"PATH": "/usr/bin:/bin", "HOME": workdir, "PYTHONHASHSEED": "0"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=_limits(memory_mb, int(timeout) + 1),
        )
        try:
            _, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.communicate()
            return ExecutionResult(False, "timeout", f"no result within {timeout} s")
        if process.returncode == 0:
            return ExecutionResult(True, "passed")
        tail = stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit code {process.returncode}"]
        return ExecutionResult(False, "failed", tail[0][:300])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def humaneval_program(prompt: str, completion: str, test: str, entry_point: str) -> str:
    """The program HumanEval runs: the prompt, the completion, the tests and ``check(entry)``."""
    return f"{prompt}{completion}\n\n{test}\n\ncheck({entry_point})\n"
