"""Resumable uploads against the production HTTP server (gunicorn, two sync workers, so successive
chunks reach different processes): a connection cut inside a chunk keeps nothing of it, and the
``podium-upload`` command resumes a half-sent checkpoint and submits it."""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import sys

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from evalcore.models.hf import hash_files
from leaderboard.accounts import tokens
from leaderboard.models import Submission
from podium_client import upload as client_upload
from tests.conftest import REPO_ROOT, VENV_BIN, clean_env, database_url_of, free_port, wait_for_port

pytestmark = pytest.mark.slow


@pytest.fixture
def server(transactional_db, redis_url, tmp_path, processes):
    env = clean_env(
        DJANGO_SETTINGS_MODULE="config.settings.dev", DATABASE_URL=database_url_of(connection),
        CELERY_BROKER_URL=redis_url, PODIUM_VAR_DIR=str(tmp_path / "var"), DEBUG="false",
        SECRET_KEY="uploads-test-secret-key", ALLOWED_HOSTS="127.0.0.1",
    )  # fmt: skip
    port = free_port()
    argv = [str(VENV_BIN / "gunicorn"), "--bind", f"127.0.0.1:{port}", "--workers", "2", "config.wsgi:application"]
    process = processes.start("gunicorn", argv, env)
    try:
        wait_for_port(port, process=process)
    except (RuntimeError, TimeoutError) as exc:
        raise AssertionError(f"{exc}\n{processes.log_of(process)}") from None
    owner = get_user_model().objects.create_user("owner@example.org", "owner@example.org", "pw-long-enough-42")
    _, raw = tokens.token_create(owner=owner, name="test")
    return {"base": f"http://127.0.0.1:{port}", "token": raw, "var": tmp_path / "var", "process": process}


def _meta(draft_id: str, name: str) -> str:
    return f"submission {base64.b64encode(draft_id.encode()).decode()},filename {base64.b64encode(name.encode()).decode()}"


def test_a_cut_connection_keeps_nothing_and_the_client_resumes(server, tiny_dir, tmp_path, processes):
    base, auth = server["base"], {"Authorization": f"Bearer {server['token']}"}
    files = client_upload.checkpoint_files(tiny_dir)
    http = httpx.Client(base_url=base, headers=auth, timeout=60)
    body = {"model_name": "acme/tiny-llama", "model_type": "pretrained", "licence": "mit", "precision": "float32",
            "files": files}  # fmt: skip
    draft_id = http.post("/api/submissions/", json=body).json()["id"]
    weights = (tiny_dir / "model.safetensors").read_bytes()
    created = http.post("/leaderboard/uploads/", headers={"Tus-Resumable": "1.0.0", "Upload-Length": str(len(weights)),
                                                           "Upload-Metadata": _meta(draft_id, "model.safetensors")})  # fmt: skip
    location = created.headers["Location"]
    half = len(weights) // 2
    assert http.patch(location, content=weights[:half], headers={"Tus-Resumable": "1.0.0", "Upload-Offset": "0",
                      "Content-Type": "application/offset+octet-stream"}).status_code == 204  # fmt: skip

    # A chunk announced with its full length, cut after 1000 bytes: the server keeps nothing of it.
    path = location.removeprefix(base)
    with socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1]))) as raw:
        raw.sendall((f"PATCH {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {auth['Authorization']}\r\n"
                     f"Tus-Resumable: 1.0.0\r\nUpload-Offset: {half}\r\nContent-Type: application/offset+octet-stream\r\n"
                     f"Content-Length: {len(weights) - half}\r\n\r\n").encode() + weights[half : half + 1000])  # fmt: skip
        raw.shutdown(socket.SHUT_WR)
        raw.recv(65536)
    head = http.head(location, headers={"Tus-Resumable": "1.0.0"})
    assert head.headers["Upload-Offset"] == str(half)
    on_disk = server["var"] / "media" / "uploads" / draft_id / "model.safetensors"
    assert on_disk.stat().st_size == half

    # The command finds the half-sent submission in its state file and resumes from the server's offset.
    state_file = tmp_path / "state.json"
    url = base
    key = client_upload._state_key(url, tiny_dir, files)
    state_file.write_text(json.dumps({key: {"id": draft_id, "uploads": {"model.safetensors": location}}}))
    run = subprocess.run(
        [sys.executable, "-m", "podium_client", str(tiny_dir), "--url", url, "--token", server["token"],
         "--licence", "mit", "--precision", "float32", "--chunk-mb", "1"],
        cwd=REPO_ROOT, env=clean_env(PODIUM_STATE_FILE=str(state_file)), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr + processes.log_of(server["process"])
    assert f"Resuming submission {draft_id}" in run.stderr and "PENDING" in run.stdout
    submission = Submission.objects.get(public_id=draft_id)
    assert submission.weight_sha256 == hash_files([tiny_dir / "model.safetensors"])
    assert json.loads(state_file.read_text()) == {}

    # A revoked token: the command stops with the reason.
    Submission.objects.all().delete()
    owner = get_user_model().objects.get()
    tokens.token_revoke(owner=owner, token_id=owner.api_tokens.get().pk)
    again = subprocess.run(
        [sys.executable, "-m", "podium_client", str(tiny_dir), "--url", url, "--token", server["token"], "--licence", "mit"],
        cwd=REPO_ROOT, env=clean_env(PODIUM_STATE_FILE=str(state_file)), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert again.returncode == 1 and "was revoked on" in again.stderr
