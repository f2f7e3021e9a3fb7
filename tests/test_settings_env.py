"""Settings from the environment: bad values give one clear line naming the variable, no traceback;
with no environment at all, the embedded defaults (SQLite, filesystem broker) work."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT, clean_env, run_manage


def setting_of(name: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """A setting as a fresh process reads it from ``env``: the settings module alone, without
    ``manage.py shell``'s app loading (a third of the time, the same parsing)."""
    script = f"from django.conf import settings; print(settings.{name})"
    return subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)

BAD_ENVIRONMENTS = [
    ({"DATABASE_URL": "not a url"}, "DATABASE_URL"),
    ({"DATABASE_URL": "postgres://db:notaport/podium"}, "DATABASE_URL"),
    ({"DATABASE_URL": "mysql://root@localhost/podium"}, "DATABASE_URL"),
    ({"DATABASE_URL": "postgres://localhost:5432"}, "DATABASE_URL"),
    ({"REDIS_URL": "http://localhost:6379"}, "REDIS_URL"),
    ({"CELERY_BROKER_URL": "redis://host:port/0"}, "CELERY_BROKER_URL"),
    ({"DEBUG": "maybe"}, "DEBUG"),
    ({"TRUSTED_PROXY_COUNT": "-1"}, "TRUSTED_PROXY_COUNT"),
    ({"TRUSTED_PROXY_COUNT": "two"}, "TRUSTED_PROXY_COUNT"),
    ({"DJANGO_SETTINGS_MODULE": "config.settings.prod"}, "SECRET_KEY"),
    (
        {"DJANGO_SETTINGS_MODULE": "config.settings.prod", "SECRET_KEY": "x" * 50, "DEBUG": "true"},
        "DEBUG",
    ),
    ({"DJANGO_SETTINGS_MODULE": "config.settings.prod", "SECRET_KEY": "short"}, "SECRET_KEY"),
    ({"API_THROTTLE_ANON": "lots"}, "API_THROTTLE_ANON"),
    ({"API_THROTTLE_USER": "0/minute"}, "API_THROTTLE_USER"),
    ({"API_BASIC_AUTH": "perhaps"}, "API_BASIC_AUTH"),
    ({"AXES_FAILURE_LIMIT": "0"}, "AXES_FAILURE_LIMIT"),
    ({"LEADERBOARD_SCAN_FLAG_SHARE": "1.5"}, "LEADERBOARD_SCAN_FLAG_SHARE"),
    ({"LEADERBOARD_PROBE_FLAG_DIFF_LOW": "nan"}, "LEADERBOARD_PROBE_FLAG_DIFF_LOW"),
    ({"LEADERBOARD_SCAN_NGRAM": "20"}, "LEADERBOARD_SCAN_NGRAM"),
    ({"LEADERBOARD_PROBE_LIMIT": "some"}, "LEADERBOARD_PROBE_LIMIT"),
    ({"LEADERBOARD_UPLOAD_FSYNC": "sometimes"}, "LEADERBOARD_UPLOAD_FSYNC"),
    ({"ARENA_WORKER_PRELOAD": "sometimes"}, "ARENA_WORKER_PRELOAD"),
    ({"LEADERBOARD_UPLOAD_DIRECT_IO": "nfs"}, "LEADERBOARD_UPLOAD_DIRECT_IO"),
    (
        {"DJANGO_SETTINGS_MODULE": "config.settings.prod", "SECRET_KEY": "x" * 50, "SECURE_HSTS_SECONDS": "-1"},
        "SECURE_HSTS_SECONDS",
    ),
]


@pytest.mark.parametrize(("overrides", "variable"), BAD_ENVIRONMENTS)
def test_bad_environment_gives_one_line_naming_the_variable(tmp_path, overrides, variable):
    env = clean_env(PODIUM_VAR_DIR=str(tmp_path), **overrides)
    result = run_manage("check", env=env)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("podium: configuration error: " + variable), lines[0]


def test_unreachable_broker_is_named_at_startup(sqlite_var_dir):
    env = clean_env(PODIUM_VAR_DIR=str(sqlite_var_dir), CELERY_BROKER_URL="redis://127.0.0.1:1/0")
    result = run_manage("check_services", env=env)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "broker is not answering: check CELERY_BROKER_URL" in result.stderr


def test_password_never_printed(tmp_path):
    env = clean_env(PODIUM_VAR_DIR=str(tmp_path), DATABASE_URL="postgres://u:s3cret@127.0.0.1:notaport/x")
    result = run_manage("check", env=env)
    assert result.returncode == 2
    assert "s3cret" not in result.stderr


HEALTH_PROBE = (
    "import json; from django.test import Client; "
    "r = Client(HTTP_HOST='127.0.0.1').get('/healthz'); print(json.dumps({'status': r.status_code, 'body': r.json()}))"
)


PAGES_PROBE = (
    "import json; from django.test import Client; from tests.arena.vote_data import votes_create; "
    "from arena.ratings.refit import snapshots_refit; "
    "votes_create({'alpha': 0.5, 'beta': 0.0, 'gamma': -0.5}, 60, seed=1); snapshots_refit(rounds=20, elo_orders=2); "
    "c = Client(HTTP_HOST='127.0.0.1'); "
    "pages = {p: c.get(p).status_code for p in ('/leaderboard/', '/leaderboard/?page=1', '/leaderboard/arena/', "
    "'/api/ratings/', '/leaderboard/judges/', '/metrics')}; "
    "body = b''.join(c.get('/api/votes.csv').streaming_content).decode(); "
    "print(json.dumps({'pages': pages, 'csv_lines': len(body.splitlines())}))"
)


def test_sqlite_default_smoke(tmp_path):
    """No environment at all: SQLite under PODIUM_VAR_DIR, filesystem broker; /healthz is 200."""
    env = clean_env(PODIUM_VAR_DIR=str(tmp_path))
    migrate = run_manage("migrate", "--no-input", env=env)
    assert migrate.returncode == 0, migrate.stderr
    assert (tmp_path / "podium.sqlite3").exists()
    seeded = run_manage("demo_seed", env=env)
    assert seeded.returncode == 0 and "password" in seeded.stdout
    assert run_manage("demo_seed", env=env).returncode == 0, "demo_seed must be idempotent"
    probe = run_manage("shell", "-c", HEALTH_PROBE, env=env)
    assert probe.returncode == 0, probe.stderr
    health = json.loads(probe.stdout.strip().splitlines()[-1])
    assert health["status"] == 200, health
    assert health["body"]["database"] == {"ok": True, "vendor": "sqlite"}
    assert health["body"]["broker"]["transport"] == "filesystem"
    assert (tmp_path / "broker" / "queue").is_dir()
    # The pages and exports that run their own SQL work on SQLite too (a PostgreSQL-only cast once made
    # the leaderboard answer 500 in `make demo`).
    pages = run_manage("shell", "-c", PAGES_PROBE, env=env)
    assert pages.returncode == 0, pages.stderr
    seen = json.loads(pages.stdout.strip().splitlines()[-1])
    assert set(seen["pages"].values()) == {200}, seen
    assert seen["csv_lines"] == 61, seen  # the header and 60 votes


def test_healthz_503_names_the_broker(sqlite_var_dir):
    env = clean_env(PODIUM_VAR_DIR=str(sqlite_var_dir), CELERY_BROKER_URL="redis://127.0.0.1:1/0")
    probe = run_manage("shell", "-c", HEALTH_PROBE, env=env)
    health = json.loads(probe.stdout.strip().splitlines()[-1])
    assert health["status"] == 503
    assert health["body"]["failing"] == ["broker"]
    assert health["body"]["database"]["ok"] is True


@pytest.mark.parametrize("value, expected", [("", "None"), ("   ", "None"), (" /srv/podium/refit ", "/srv/podium/refit")])
def test_refit_cache_folder_from_the_environment(tmp_path, value, expected):
    """ARENA_REFIT_CACHE_DIR: a folder (spaces around it dropped), or empty to turn the refit cache off."""
    env = clean_env(PODIUM_VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="config.settings.dev", ARENA_REFIT_CACHE_DIR=value)
    shown = setting_of("ARENA_REFIT_CACHE_DIR", env)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip().splitlines()[-1] == expected


@pytest.mark.parametrize("name", ["LEADERBOARD_UPLOAD_FSYNC", "LEADERBOARD_UPLOAD_DIRECT_IO"])
@pytest.mark.parametrize("value, expected", [("", "True"), ("0", "False"), (" false ", "False"), ("yes", "True")])
def test_upload_switches_from_the_environment(tmp_path, name, value, expected):
    """LEADERBOARD_UPLOAD_FSYNC (chunks on disk before they are acknowledged) and
    LEADERBOARD_UPLOAD_DIRECT_IO (aligned blocks past the page cache): on unless turned off."""
    env = clean_env(PODIUM_VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="config.settings.dev", **{name: value})
    shown = setting_of(name, env)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip().splitlines()[-1] == expected
