"""Back up and restore the database: ``pg_dump``/``pg_restore`` for PostgreSQL, SQLite's backup API.

``manage.py podium_backup FILE`` writes a PostgreSQL custom-format archive (or a SQLite copy) of the
configured database and checks that it reads back; ``manage.py podium_restore FILE`` loads one into the
configured database, which must be empty unless ``--replace`` is given. The password travels in the
child's environment (``PGPASSWORD``), never on its command line. docs/operations.md has the procedure.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

from django.db import connections

PG_MAGIC = b"PGDMP"
SQLITE_MAGIC = b"SQLite format 3\x00"


class BackupError(Exception):
    """A backup or restore that cannot go ahead; the message says why."""


def _pg_env(settings: dict) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("PG")}
    for variable, key in (("PGHOST", "HOST"), ("PGPORT", "PORT"), ("PGUSER", "USER"), ("PGPASSWORD", "PASSWORD")):
        if settings.get(key):
            env[variable] = str(settings[key])
    env["PGDATABASE"] = str(settings["NAME"])
    return env


def _tool(name: str) -> str:
    found = shutil.which(name)
    if not found:
        raise BackupError(f"{name} is not installed (Debian: apt-get install postgresql-client)")
    return found


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise BackupError(f"{Path(argv[0]).name} failed: {(done.stderr or done.stdout).strip()[-800:]}")
    return done


def backup(target: Path, *, alias: str = "default") -> dict:
    """Write the database to ``target`` (refusing to overwrite) and check the archive reads back."""
    target = Path(target)
    if target.exists():
        raise BackupError(f"{target} exists: choose a new file name")
    if not target.parent.is_dir():
        raise BackupError(f"folder {target.parent} does not exist")
    connection = connections[alias]
    partial = target.with_name(target.name + ".partial")
    try:
        if connection.vendor == "postgresql":
            env = _pg_env(connection.settings_dict)
            _run([_tool("pg_dump"), "--format=custom", "--no-owner", "--no-privileges", f"--file={partial}"], env)
            listing = _run([_tool("pg_restore"), "--list", str(partial)], env).stdout
            tables = sum(1 for line in listing.splitlines() if " TABLE DATA " in line)
        elif connection.vendor == "sqlite":
            with sqlite3.connect(connection.settings_dict["NAME"]) as source, sqlite3.connect(partial) as copy:
                source.backup(copy)
                tables = copy.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
        else:
            raise BackupError(f"backups of {connection.vendor} databases are not supported")
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    return {"file": str(target), "bytes": target.stat().st_size, "tables": tables, "vendor": connection.vendor}


def _kind(source: Path) -> str:
    if not source.is_file():
        raise BackupError(f"{source} is not a file")
    with open(source, "rb") as handle:
        head = handle.read(16)
    if head.startswith(PG_MAGIC):
        return "postgresql"
    if head == SQLITE_MAGIC:
        return "sqlite"
    raise BackupError(f"{source} is neither a pg_dump custom-format archive nor a SQLite database")


def _has_tables(connection) -> bool:
    return bool(connection.introspection.table_names())


def restore(source: Path, *, replace: bool = False, alias: str = "default") -> dict:
    """Load the backup ``source`` into the configured database (empty, or ``replace``)."""
    source = Path(source)
    kind = _kind(source)
    connection = connections[alias]
    if kind != connection.vendor:
        raise BackupError(f"{source} is a {kind} backup but the database is {connection.vendor}")
    if _has_tables(connection) and not replace:
        raise BackupError("the database already has tables: restore into an empty one, or pass --replace")
    if kind == "postgresql":
        env = _pg_env(connection.settings_dict)
        connection.close()
        argv = [_tool("pg_restore"), "--no-owner", "--no-privileges", "--exit-on-error", "--single-transaction"]
        if replace:
            argv += ["--clean", "--if-exists"]
        _run([*argv, f"--dbname={connection.settings_dict['NAME']}", str(source)], env)
    else:
        connection.close()
        with sqlite3.connect(source) as backup_db, sqlite3.connect(connection.settings_dict["NAME"]) as live:
            backup_db.backup(live)
    return {"file": str(source), "vendor": kind, "tables": len(connection.introspection.table_names())}
