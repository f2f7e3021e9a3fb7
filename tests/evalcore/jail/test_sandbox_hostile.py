"""Hostile programs, each reproducing an attack on the code runner (issue 12, section 1), all contained.

Where the attack is harmless to try unconfined (reading a file, connecting to the test Redis), the same
program is also run as a plain subprocess to show that it would have worked without the jail.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

from evalcore.jail.sandbox import MAX_PROCESSES, NOBODY, PROGRAM_PATH, launch, require_jail, run_program
from tests.evalcore.jail.test_sandbox import humaneval_problems, humaneval_program

REPO = Path(__file__).resolve().parents[3]
SETTINGS = REPO / "config" / "settings" / "base.py"


def unjailed(source: str) -> str:
    """stdout of ``source`` run as an ordinary subprocess: the attack without the jail."""
    return subprocess.run([sys.executable, "-I", "-c", source], capture_output=True, text=True, timeout=60).stdout


def marker_processes(marker: str) -> str:
    return subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True).stdout


def service_address(variable: str, default_port: int) -> tuple[str, int]:
    parts = urlsplit(os.environ.get(variable, ""))
    return parts.hostname or "127.0.0.1", parts.port or default_port


def test_fork_bomb_is_contained():
    bomb = (
        "import os, posix, time\n"
        "forks = 0\n"
        "try:\n"
        "    while True:\n"
        "        if posix.fork() == 0:\n"
        "            while True:\n"
        "                try:\n"
        "                    os.fork()\n"
        "                except OSError:\n"
        "                    time.sleep(0.05)\n"
        "        forks += 1\n"
        "except OSError as error:\n"
        "    print('refused after', forks, type(error).__name__, flush=True)\n"
        "print(sum(p.isdigit() for p in os.listdir('/proc')), flush=True)\n"
        "time.sleep(600)\n"
    )
    started = time.monotonic()
    result = run_program(bomb, timeout=3)
    refused, count = result.stdout.splitlines()[:2]
    assert refused.startswith("refused after") and "BlockingIOError" in refused
    assert int(count) <= MAX_PROCESSES
    assert result.timed_out and time.monotonic() - started < 60


def test_memory_bomb_is_contained():
    bomb = (
        "import os\n"
        "chunks = []\n"
        "try:\n"
        "    while True:\n"
        "        chunks.append(bytearray(16 << 20))\n"
        "except MemoryError:\n"
        "    print(len(chunks) * 16)\n"
    )
    result = run_program(bomb, memory_mb=256)
    assert result.passed and 0 < int(result.stdout) < 256


def test_host_files_cannot_be_read():
    targets = ["/etc/passwd", str(SETTINGS), str(REPO / "pyproject.toml"), "/root", "/work", "/home", str(REPO)]
    attack = (
        "import os\n"
        f"for path in {targets!r}:\n"
        "    try:\n"
        "        print(path, 'READ', os.listdir(path) if os.path.isdir(path) else open(path).read(20))\n"
        "    except OSError as error:\n"
        "        print(path, 'denied', type(error).__name__)\n"
    )
    outside = unjailed(attack)
    assert "/etc/passwd READ root:" in outside and f"{SETTINGS} READ" in outside  # the attack, unconfined
    jailed = run_program(attack).stdout.splitlines()
    assert len(jailed) == len(targets) and all(" denied " in line for line in jailed), jailed


def test_nothing_outside_the_tmpfs_can_be_written():
    name = f"podium-jail-{uuid.uuid4().hex}"
    targets = [f"/tmp/../{name}", f"/var/tmp/{name}", str(REPO / name), "/program/main.py", "/usr/" + name]
    attack = (
        "import os\n"
        f"targets = {targets!r} + [os.path.join(os.path.dirname(os.__file__), 'sitecustomize.py')]\n"
        "for path in targets:\n"
        "    try:\n"
        "        open(path, 'w').write('import sys; sys.exit(0)')\n"
        "        print(path, 'WRITTEN')\n"
        "    except OSError as error:\n"
        "        print(path, 'denied', type(error).__name__)\n"
        f"open('/tmp/{name}', 'w').write('inside the tmpfs')\n"
    )
    result = run_program(attack)
    assert result.passed and "WRITTEN" not in result.stdout and result.stdout.count(" denied ") == len(targets) + 1
    assert not any(Path(p).exists() for p in (f"/{name}", f"/tmp/{name}", f"/var/tmp/{name}", REPO / name))


def test_no_network_even_with_raw_sockets():
    redis, postgres = service_address("TEST_REDIS_URL", 6379), service_address("TEST_DATABASE_URL", 5432)
    attack = (
        "import _socket, importlib, socket\n"
        "socket = importlib.reload(socket)\n"
        f"for address in [{redis!r}, {postgres!r}, ('1.1.1.1', 80)]:\n"
        "    try:\n"
        "        socket.create_connection(address, timeout=2)\n"
        "        print(address, 'CONNECTED')\n"
        "    except OSError as error:\n"
        "        print(address, type(error).__name__, error.errno)\n"
        "try:\n"
        "    raw = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)\n"
        f"    raw.connect({redis!r})\n"
        "    print('raw CONNECTED')\n"
        "except OSError as error:\n"
        "    print('raw', type(error).__name__, error.errno)\n"
        "try:\n"
        "    print(sorted(name for _, name in socket.if_nameindex()))\n"
        "except OSError as error:\n"
        "    print('interfaces', error.errno)\n"
    )
    local_only = attack.replace(", ('1.1.1.1', 80)", "")  # unconfined, only the local services are tried
    assert unjailed(local_only).count("CONNECTED") == 3
    started = time.monotonic()
    lines = run_program(attack).stdout.splitlines()
    assert time.monotonic() - started < 30  # no connect waited for its timeout: no inet socket exists at all
    # The seccomp filter refuses every inet socket (and netlink): EAFNOSUPPORT before any address is tried.
    refused = f"OSError {errno.EAFNOSUPPORT}"
    assert all(line.endswith(refused) for line in lines[:4]), lines
    assert lines[4] == f"interfaces {errno.EAFNOSUPPORT}"
    # Beneath the filter, the network namespace: without it, the jail has its own loopback and no route out.
    bare = dataclasses.replace(require_jail(), seccomp=b"")
    done = launch(bare, {"main.py": attack}, (PROGRAM_PATH,), 30.0, 256)
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"{redis!r} ConnectionRefusedError") and "ConnectionRefusedError" in lines[1]
    assert "OSError" in lines[2] and lines[3].startswith("raw ConnectionRefusedError") and lines[4] == "['lo']"


def test_setsid_grandchild_does_not_outlive_the_timeout():
    marker = f"podium-jail-marker-{uuid.uuid4().hex}"
    attack = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        print('daemon', os.getpid(), flush=True)\n"
        f"        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(600)', {marker!r}])\n"
        "    os._exit(0)\n"
        "time.sleep(600)\n"
    )
    started = time.monotonic()
    result = run_program(attack, timeout=2)
    assert result.timed_out and result.stdout.startswith("daemon ")
    assert time.monotonic() - started < 60 and marker_processes(marker) == ""


def test_daemon_left_by_a_finished_program_dies_with_it():
    marker = f"podium-jail-marker-{uuid.uuid4().hex}"
    attack = (
        "import os, sys\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(600)', {marker!r}])\n"
        "    os._exit(0)\n"
        "os.wait()\n"
        "print('left a daemon behind')\n"
    )
    started = time.monotonic()
    result = run_program(attack, timeout=300)
    assert result.passed and result.stdout == "left a daemon behind\n"
    assert time.monotonic() - started < 60 and marker_processes(marker) == ""


TAMPER = (
    "import os, sys, time\n"
    "forged = 'import sys\\nsys.exit(0)\\n'\n"
    "for path in ['/tmp/main.py', '/tmp/sitecustomize.py', '/tmp/usercustomize.py']:\n"
    "    open(path, 'w').write(forged)\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    while True:\n"
    "        for path in ['/program/main.py', '/tmp/main.py']:\n"
    "            try:\n"
    "                open(path, 'w').write(forged)\n"
    "            except OSError:\n"
    "                pass\n"
    "        time.sleep(0.01)\n"
    "print('planted')\n"
)


def test_a_program_cannot_tamper_with_the_next():
    assert run_program(TAMPER).stdout == "planted\n"
    after = run_program("import json, os\nprint(json.dumps([os.listdir('/tmp'), open('/program/main.py').read()]))")
    listing, source = json.loads(after.stdout)
    assert listing == [] and source.startswith("import json, os")


def test_pass_at_k_is_unchanged_by_an_earlier_hostile_program():
    problems = humaneval_problems()[:3]
    programs = [humaneval_program(p, p["canonical_solution"]) for p in problems]
    programs += [humaneval_program(p, "    return None\n") for p in problems]

    def outcomes():
        return [run_program(program).passed for program in programs]

    before = outcomes()
    assert run_program(TAMPER).passed
    assert not run_program("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nos.kill(-1, 9)").timed_out
    assert before == outcomes() == [True] * 3 + [False] * 3


def test_a_fork_bomb_running_alongside_does_not_starve_an_honest_program():
    problem = humaneval_problems()[1]
    honest = humaneval_program(problem, problem["canonical_solution"])
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    with ThreadPoolExecutor(max_workers=2) as pool:  # as pass@k scoring runs programs
        bombing = pool.submit(run_program, bomb, timeout=5)
        time.sleep(1)  # not needed for the assertion: the honest program passes whenever it starts
        outcomes = [pool.submit(run_program, honest).result().passed for _ in range(3)]
        assert bombing.result().timed_out
    assert outcomes == [True, True, True]


def test_signalling_the_parent_and_the_host_has_no_effect():
    as_jail = {"user": NOBODY, "group": NOBODY} if os.geteuid() == 0 else {}
    sentinel = subprocess.Popen(["sleep", "300"], **as_jail)  # a host process of the jail's own user
    try:
        attack = (
            "import os, signal\n"
            f"for pid in [os.getppid(), 1, {sentinel.pid}, {os.getpid()}]:\n"
            "    try:\n"
            "        os.kill(pid, signal.SIGKILL)\n"
            "        print(pid, 'sent')\n"
            "    except OSError as error:\n"
            "        print(pid, type(error).__name__)\n"
            "try:\n"
            "    os.kill(-1, signal.SIGKILL)\n"
            "except ProcessLookupError:\n"
            "    pass\n"
            "print('still here')\n"
        )
        result = run_program(attack)
        assert result.passed and result.stdout.endswith("still here\n")
        assert f"{sentinel.pid} ProcessLookupError" in result.stdout  # host pids do not exist in the jail
        assert sentinel.poll() is None
    finally:
        sentinel.kill()
        sentinel.wait()


def test_the_parents_environment_is_not_visible(monkeypatch):
    secret = f"podium-secret-{uuid.uuid4().hex}"
    monkeypatch.setenv("PODIUM_JAIL_SECRET", secret)
    attack = (
        "import os\n"
        "print(dict(os.environ))\n"
        "for path in ['/proc/self/environ', '/proc/1/environ']:\n"
        "    try:\n"
        "        print(open(path, 'rb').read())\n"
        "    except OSError as error:\n"
        "        print(path, type(error).__name__)\n"
    )
    assert secret in unjailed(attack)
    result = run_program(attack)
    assert result.passed and secret not in result.stdout and "PODIUM_JAIL_SECRET" not in result.stdout


def test_spawned_programs_are_jailed_too():
    attack = (
        "import os, posix\n"
        "pid = os.posix_spawn('/bin/sh', ['sh', '-c', 'cat /etc/passwd; ls /work; echo sh done'], {})\n"
        "os.waitpid(pid, 0)\n"
        "if posix.fork() == 0:\n"
        "    try:\n"
        "        print(open('/etc/passwd').read(), flush=True)\n"
        "    except OSError as error:\n"
        "        print('child', type(error).__name__, flush=True)\n"
        "    os._exit(0)\n"
        "os.wait()\n"
    )
    result = run_program(attack)
    assert "sh done" in result.stdout and "child FileNotFoundError" in result.stdout
    assert "root:" not in result.stdout
