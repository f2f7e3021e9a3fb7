"""Throwaway PostgreSQL and Redis servers that a fault test may stop, kill and restart.

The suite's shared servers (``TEST_DATABASE_URL``, ``TEST_REDIS_URL``) serve every other test and
must never be restarted; a fault test starts its own here, on a free loopback port, in a temporary
folder, from the same binaries ``scripts/services.sh`` installs from Debian's packages.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.conftest import free_port, wait_for_port


def _binary(name: str, hint: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise AssertionError(f"{name} is not installed: {hint} (scripts/test.sh installs it)")
    return path


class PrivateRedis:
    """``redis-server`` on a free loopback port, no persistence: a restart loses everything in it,
    as a Redis without AOF does (the worst case for a broker)."""

    def __init__(self, folder: Path):
        self.binary = _binary("redis-server", "apt-get install redis-server")
        self.folder = folder
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.starts += 1
        log = open(self.folder / f"redis-{self.starts}.log", "w")  # noqa: SIM115 - closed with the process
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.folder)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        wait_for_port(self.port, process=self.process, timeout=30)

    def kill(self) -> None:
        """Gone at once, as a crash: clients see their connections reset."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def restart(self) -> None:
        self.kill()
        self.start()


class PrivatePostgres:
    """A PostgreSQL cluster of its own (``initdb`` into a temporary folder, run as the postgres
    user when this is root: initdb refuses root), on a free loopback port."""

    def __init__(self):
        bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
        if not bins:
            raise AssertionError("PostgreSQL's server binaries are not installed (apt-get install postgresql)")
        self.bin = Path(bins[-1]).parent
        self.folder = Path(tempfile.mkdtemp(prefix="podium-faults-pg-"))
        self.folder.chmod(0o755)
        self.port = free_port()
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            subprocess.run(["id", "postgres"], check=True, capture_output=True)
            shutil.chown(self.folder, "postgres")
            self.as_user = ["runuser", "-u", "postgres", "--"]

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *argv: str) -> None:
        result = subprocess.run([*self.as_user, *argv], capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            log = self.folder / "server.log"
            raise AssertionError(f"{argv[0]} failed: {result.stderr}\n{log.read_text() if log.exists() else ''}")

    def init(self, database: str) -> None:
        self._run(str(self.bin / "initdb"), "-D", str(self.folder / "data"), "-A", "trust", "-U", "postgres")
        self.start()
        self._run(str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", database)

    def copy_schema(self, source_dsn: str, database: str) -> bool:
        """Copy the tables of ``source_dsn`` (the migrated test database) into ``database``: a second
        or so, where running the migrations takes several. False when pg_dump cannot (older than the
        server it reads): migrate then."""
        dump = subprocess.run([str(self.bin / "pg_dump"), "--schema-only", "--no-owner", "--dbname", source_dsn],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        if dump.returncode != 0:
            return False
        load = subprocess.run([str(self.bin / "psql"), "-q", "-v", "ON_ERROR_STOP=1", "--dbname", self.url(database)],
                              input=dump.stdout, capture_output=True, text=True, timeout=120)  # fmt: skip
        if load.returncode != 0:
            raise AssertionError(f"loading the schema failed: {load.stderr[-2000:]}")
        return True

    def start(self) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.folder} -c fsync=off"
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), "-l", str(self.folder / "server.log"),
                  "-w", "-t", "60", "-o", options, "start")  # fmt: skip

    def stop(self, mode: str = "immediate") -> None:
        """``immediate``: every backend killed at once, as in a crash (recovery runs at the next start)."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), "-m", mode, "-w", "stop")

    def destroy(self) -> None:
        try:
            self.stop()
        except AssertionError:
            pass
        shutil.rmtree(self.folder, ignore_errors=True)
