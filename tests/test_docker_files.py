"""Docker cannot run on these machines, so check that the files agree with the code they start: every
command names an entry point that exists, the compose environment loads the production settings and
every variable in it is read by them, the queues the workers serve are the queues tasks use, nginx's
upstreams are the services' real ports, and the images contain every package."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
import tomllib

import pytest
import yaml
from celery import Celery
from django.core.management import get_commands
from django.urls import resolve

from bench.arena_load import GUNICORN_TIMEOUT_S, gunicorn_command
from tests.conftest import REPO_ROOT, clean_env
from workers.queues import ALL_QUEUES, GENERATE

DOCKER = REPO_ROOT / "docker"
APP_SERVICES = ("migrate", "web", "ws", "worker-cpu", "beat", "worker-gpu")
DOCKERFILES = ("Dockerfile", "Dockerfile.gpu")


def compose() -> dict:
    return yaml.safe_load((DOCKER / "compose.yaml").read_text())


def interpolate(value: str) -> str:
    """Compose's ``${VAR:-default}`` and ``${VAR:?error}``, as with an empty shell environment plus a
    production-sized SECRET_KEY."""
    given = {"SECRET_KEY": "compose-check-" + "k" * 40}

    def one(match: re.Match) -> str:
        name, op, rest = match.group(1), match.group(2), match.group(3)
        if name in given:
            return given[name]
        assert op == ":-", f"${{{name}}} has no default and the check does not supply one"
        return rest

    return re.sub(r"\$\{(\w+)(:-|:\?)([^}]*)\}", one, str(value))


def option(command: list[str], *flags: str) -> str:
    for flag in flags:
        if flag in command:
            return command[command.index(flag) + 1]
    raise AssertionError(f"none of {flags} in {command}")


@pytest.mark.parametrize("name", ["web", "ws"])
def test_servers_name_an_application_that_exists(name):
    command = compose()["services"][name]["command"]
    module, _, attribute = command[-1].partition(":")
    application = getattr(importlib.import_module(module), attribute)
    assert callable(application)


def test_workers_start_the_projects_celery_app_on_known_queues():
    services = compose()["services"]
    served = set()
    for name in ("worker-cpu", "worker-gpu"):
        command = services[name]["command"]
        assert command[:2] == ["celery", "-A"]
        assert isinstance(importlib.import_module(command[2]).app, Celery)
        queues = option(command, "-Q").split(",")
        unknown = [q for q in queues if q not in ALL_QUEUES and not q.startswith(f"{GENERATE}.")]
        assert not unknown, f"{name} serves queues no task uses: {unknown}"
        served.update(queues)
    assert served >= set(ALL_QUEUES), f"no worker serves {set(ALL_QUEUES) - served}"
    beat = services["beat"]["command"]  # the periodic tasks (refit, reaper, outbox) need one beat
    assert beat[:4] == ["celery", "-A", "workers", "beat"]
    gpu_default = re.search(r'CMD \[(.*)\]', (DOCKER / "Dockerfile.gpu").read_text()).group(1)
    assert set(option(json.loads(f"[{gpu_default}]"), "-Q").split(",")) <= set(ALL_QUEUES)


def test_migrate_runs_a_django_command_and_the_healthcheck_a_real_url():
    services = compose()["services"]
    command = services["migrate"]["command"]
    assert command[:2] == ["python", "manage.py"] and (REPO_ROOT / "manage.py").exists()
    assert command[2] in get_commands()
    probe = " ".join(services["web"]["healthcheck"]["test"])
    port, path = re.search(r"http://127\.0\.0\.1:(\d+)(/\S*?)'", probe).groups()
    assert option(services["web"]["command"], "--bind").endswith(f":{port}")
    assert resolve(path).func.__name__ == "healthz"


def test_compose_environment_loads_the_production_settings(tmp_path):
    """The shared environment, as compose would pass it, through config.settings.prod in a fresh
    process: every variable is read by the settings, and each lands where it should."""
    environment = {k: interpolate(v) for k, v in compose()["x-podium-env"].items()}
    settings_sources = "\n".join(p.read_text() for p in (REPO_ROOT / "config").rglob("*.py"))
    unread = [name for name in environment if name != "DJANGO_SETTINGS_MODULE" and f'"{name}"' not in settings_sources]
    assert not unread, f"compose sets variables no setting reads: {unread}"
    script = (
        "import json, django; django.setup(); from django.conf import settings as s; print(json.dumps({"
        "'db': s.DATABASES['default']['ENGINE'], 'host': s.DATABASES['default']['HOST'], "
        "'layer': s.CHANNEL_LAYERS['default']['BACKEND'], 'broker': s.CELERY_BROKER_URL, 'debug': s.DEBUG, "
        "'proxies': s.TRUSTED_PROXY_COUNT, 'hosts': s.ALLOWED_HOSTS, 'models': str(s.PODIUM_MODELS_DIR)}))"
    )
    env = clean_env(**environment, PODIUM_VAR_DIR=str(tmp_path))
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, env=env, capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert loaded["db"] == "django.db.backends.postgresql" and loaded["host"] == "postgres"
    assert loaded["layer"] == "channels_redis.core.RedisChannelLayer"
    assert loaded["broker"] == environment["CELERY_BROKER_URL"] and loaded["debug"] is False
    assert loaded["proxies"] == 1 and loaded["hosts"] == ["localhost", "127.0.0.1"]
    assert loaded["models"] == environment["PODIUM_MODELS_DIR"]


def test_volumes_are_mounted_where_the_settings_look():
    services = compose()["services"]
    environment = compose()["x-podium-env"]
    var_dir = re.search(r"PODIUM_VAR_DIR=(\S+)", (DOCKER / "Dockerfile").read_text()).group(1)
    for name in APP_SERVICES:
        for volume in services[name].get("volumes", []):
            source, target = volume.split(":")[:2]
            expected = {
                "media": var_dir,
                "models": environment["PODIUM_MODELS_DIR"],
                "metrics": environment["PODIUM_METRICS_DIR"],
            }[source]
            assert target == expected, f"{name} mounts {source} at {target}, the settings read {expected}"


def test_nginx_upstreams_are_the_services_listening_ports():
    services = compose()["services"]
    conf = (DOCKER / "nginx.conf").read_text()
    upstreams = dict(re.findall(r"upstream (\w+) \{ server ([\w.-]+:\d+); \}", conf))
    assert upstreams, "no upstream found in nginx.conf"
    for upstream, address in upstreams.items():
        host, port = address.split(":")
        command = services[host]["command"]
        listening = option(command, "--bind", "-p")
        assert listening.rsplit(":", 1)[-1] == port, f"{upstream} -> {address}, but {host} listens on {listening}"
        assert host in services["proxy"]["depends_on"]
    assert set(re.findall(r"proxy_pass http://(\w+);", conf)) == set(upstreams)
    websocket = conf[conf.index("location /ws/") : conf.index("location / ")]
    ws_host = upstreams[re.search(r"proxy_pass http://(\w+);", websocket).group(1)].split(":")[0]
    assert services[ws_host]["command"][-1] == "config.asgi:application", "WebSockets need the ASGI server"
    assert "Upgrade $http_upgrade" in websocket


def test_only_the_proxy_is_published_and_only_on_loopback():
    services = compose()["services"]
    published = {name: service["ports"] for name, service in services.items() if "ports" in service}
    assert list(published) == ["proxy"] and all(p.startswith("127.0.0.1:") for p in published["proxy"])


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_images_contain_every_package_and_the_pinned_torch(dockerfile):
    text = (DOCKER / dockerfile).read_text()
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    copied = set()
    for source in re.findall(r"^COPY (.+) \S+$", text, flags=re.M):
        for path in source.split():
            assert (REPO_ROOT / path).exists(), f"{dockerfile} copies missing {path}"
            copied.add(path.rstrip("/"))
    packages = {p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert packages <= copied, f"{dockerfile} does not copy {sorted(packages - copied)}"
    torch_pin = next(d for d in pyproject["project"]["dependencies"] if d.startswith("torch"))
    assert torch_pin in text, f"{dockerfile} installs another torch than {torch_pin}"
    for extra in re.findall(r'"\.\[(\w+)\]"', text):
        assert extra in pyproject["project"]["optional-dependencies"]


def test_web_server_timeout_outlasts_a_long_export():
    """gunicorn kills a sync worker after --timeout s in one request (30 by default): /api/votes.csv at
    10M votes streams for one to two minutes, so the web service and the benchmarks' server allow 600 s."""
    assert int(option(compose()["services"]["web"]["command"], "--timeout", "-t")) == GUNICORN_TIMEOUT_S == 600
    assert option(gunicorn_command(3, 2, "sync"), "--timeout") == "600"
