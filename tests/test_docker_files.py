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
    assert set(services) == {"postgres", "redis", "migrate", "web", "worker-cpu", "worker-gpu"}


def test_services_wait_for_migrations_and_healthy_backends():
    services = compose()["services"]
    assert services["migrate"]["depends_on"] == {
        "postgres": {"condition": "service_healthy"},
        "redis": {"condition": "service_healthy"},
    }
    for name in ("web", "worker-cpu", "worker-gpu"):
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


def test_gpu_worker_reserves_a_gpu_and_serves_evaluate():
    gpu = compose()["services"]["worker-gpu"]
    devices = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"]
    assert "evaluate" in gpu["command"][gpu["command"].index("-Q") + 1].split(",")
    assert gpu["build"]["dockerfile"] == "docker/Dockerfile.gpu"


def test_every_app_service_gets_the_same_environment():
    services = compose()["services"]
    for name in ("migrate", "web", "worker-cpu", "worker-gpu"):
        env = services[name]["environment"]
        assert env["DATABASE_URL"].startswith("postgres://")
        assert env["REDIS_URL"].startswith("redis://")
        assert env["DJANGO_SETTINGS_MODULE"] == "config.settings.prod"


def test_web_binds_to_loopback_on_the_host():
    assert compose()["services"]["web"]["ports"] == ["127.0.0.1:8000:8000"]


def test_dockerfiles_copy_paths_that_exist():
    for dockerfile in ("Dockerfile", "Dockerfile.gpu"):
        text = (DOCKER / dockerfile).read_text()
        assert text.startswith("#") and "\nFROM " in text
        for source in re.findall(r"^COPY (.+) \S+$", text, flags=re.M):
            for path in source.split():
                assert (REPO_ROOT / path).exists(), f"{dockerfile} copies missing {path}"
    assert ".[gpu]" in (DOCKER / "Dockerfile.gpu").read_text()
