"""Docker cannot run on these machines: check the files' structure instead."""

from __future__ import annotations

import re

import yaml

from tests.conftest import REPO_ROOT

DOCKER = REPO_ROOT / "docker"


def compose() -> dict:
    return yaml.safe_load((DOCKER / "compose.yaml").read_text())


def test_compose_has_every_service():
    services = compose()["services"]
    assert set(services) == {"postgres", "redis", "migrate", "web", "ws", "proxy", "worker-cpu", "worker-gpu"}


def test_services_wait_for_migrations_and_healthy_backends():
    services = compose()["services"]
    assert services["migrate"]["depends_on"] == {
        "postgres": {"condition": "service_healthy"},
        "redis": {"condition": "service_healthy"},
    }
    for name in ("web", "ws", "worker-cpu", "worker-gpu"):
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


def test_gpu_worker_reserves_a_gpu_and_serves_evaluate():
    gpu = compose()["services"]["worker-gpu"]
    devices = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"]
    assert "evaluate" in gpu["command"][gpu["command"].index("-Q") + 1].split(",")
    assert gpu["build"]["dockerfile"] == "docker/Dockerfile.gpu"


def test_every_app_service_gets_the_same_environment():
    services = compose()["services"]
    for name in ("migrate", "web", "ws", "worker-cpu", "worker-gpu"):
        env = services[name]["environment"]
        assert env["DATABASE_URL"].startswith("postgres://")
        assert env["REDIS_URL"].startswith("redis://")
        assert env["DJANGO_SETTINGS_MODULE"] == "config.settings.prod"


def test_only_the_proxy_is_published_on_loopback():
    services = compose()["services"]
    assert services["proxy"]["ports"] == ["127.0.0.1:8000:80"]
    assert [name for name, service in services.items() if "ports" in service] == ["proxy"]


def test_proxy_routes_websockets_to_daphne_and_http_to_gunicorn():
    services = compose()["services"]
    assert services["web"]["command"][0] == "gunicorn" and services["web"]["command"][-1] == "config.wsgi:application"
    assert services["ws"]["command"][0] == "daphne" and services["ws"]["command"][-1] == "config.asgi:application"
    assert "./nginx.conf:/etc/nginx/conf.d/default.conf:ro" in services["proxy"]["volumes"]
    conf = (DOCKER / "nginx.conf").read_text()
    ws_block = conf[conf.index("location /ws/") : conf.index("location / ")]
    assert "proxy_pass http://podium_ws;" in ws_block and "Upgrade $http_upgrade" in ws_block
    assert "server web:8000;" in conf and "server ws:8001;" in conf
    # Podium reads the one address the proxy appends, and only because it is told to.
    assert services["web"]["environment"]["TRUSTED_PROXY_COUNT"] == "1"
    assert "X-Forwarded-For $proxy_add_x_forwarded_for" in conf


def test_dockerfiles_copy_paths_that_exist():
    for dockerfile in ("Dockerfile", "Dockerfile.gpu"):
        text = (DOCKER / dockerfile).read_text()
        assert text.startswith("#") and "\nFROM " in text
        for source in re.findall(r"^COPY (.+) \S+$", text, flags=re.M):
            for path in source.split():
                assert (REPO_ROOT / path).exists(), f"{dockerfile} copies missing {path}"
    assert ".[gpu]" in (DOCKER / "Dockerfile.gpu").read_text()
