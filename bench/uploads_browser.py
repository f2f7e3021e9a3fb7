"""The submit page's resumable upload in headless Chromium, against ``cp`` and the ``podium-upload``
command, over loopback to the production server, in the same run.

    OMP_NUM_THREADS=1 .venv/bin/python bench/uploads_browser.py                 # a 1 GB checkpoint
    .venv/bin/python bench/uploads_browser.py --size-gb 0.25

A generated checkpoint (bench/uploads.py's: SmolLM2's config and tokenizer, one bfloat16
``model.safetensors`` of the given size) is copied with ``cp`` to the same disk, uploaded by
``podium-upload`` (32 MiB chunks), and uploaded through ``/leaderboard/submit/`` by Debian's Chromium
(tus-js-client, the page's chunk size, ``LEADERBOARD_UPLOAD_CHUNK_BYTES``, default 16 MiB, a CRC-32
per chunk from static/js/crc32.js, a SHA-256 from ``crypto.subtle`` before 2026-12-01, three files
at once), to gunicorn with two sync workers
(``config.settings.prod``, PostgreSQL). Browser time runs from pressing Submit to the page reaching
"My submissions" (the submission PENDING). Reported: MB/s of each and the ratios. Writes
bench/out/uploads_browser.json.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import uploads as peer  # noqa: E402 - bench/uploads.py: checkpoint, server and cp helpers
import web_servers  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
PASSWORD = secrets.token_urlsafe(16)


def browser_upload(port: int, folder: Path, name: str) -> float:
    """Seconds from pressing Submit on the page to the page showing the PENDING submission."""
    from playwright.sync_api import sync_playwright

    base = f"http://127.0.0.1:{port}"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page()
        page.goto(f"{base}/leaderboard/accounts/login/")
        page.fill("#id_username", "bench@example.org")
        page.fill("#id_password", PASSWORD)
        page.click("form.account button[type=submit]")
        page.wait_for_url(f"{base}/leaderboard/submissions/")
        page.goto(f"{base}/leaderboard/submit/")
        page.fill("#id_model_name", name)
        page.fill("#id_licence", "mit")
        page.set_input_files("#folder-input", str(folder))
        start = time.perf_counter()
        page.click("form.submit button[type=submit]")
        page.wait_for_selector("#form-problems li, tr.submission", timeout=3_600_000)
        seconds = time.perf_counter() - start
        if "PENDING" not in page.inner_text("main"):
            raise SystemExit(f"the browser upload did not end PENDING: {page.inner_text('main')[:500]}")
        browser.close()
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-gb", type=float, default=1.0)
    parser.add_argument("--dir", type=Path, default=ROOT / "bench" / "out" / "uploads_browser_work")
    args = parser.parse_args()
    size = int(args.size_gb * 1e9) // 2 * 2
    work = args.dir
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    var = work / "var"
    env = peer.server_env(web_servers.database_url("podium_bench_uploads_browser"), var)
    os.environ.update({k: env[k] for k in ("DJANGO_SETTINGS_MODULE", "SECRET_KEY", "SECURE_SSL", "DEBUG", "DATABASE_URL",
                                            "CELERY_BROKER_URL", "PODIUM_VAR_DIR")})  # fmt: skip
    token = peer.setup_database()
    from django.contrib.auth import get_user_model

    owner = get_user_model().objects.get(username="bench@example.org")
    owner.set_password(PASSWORD)
    owner.save()
    port, server = peer.start_server(env, work / "server.log")
    try:
        folders = [peer.make_checkpoint(work / f"ckpt-{k}", size, seed=k) for k in range(2)]
        total = sum(p.stat().st_size for p in folders[0].iterdir())
        cp_s, _ = peer.timed_cp(folders[0] / "model.safetensors", work / "copy.safetensors")
        command = peer.upload_once(folders[0], port, token, work, server, "bench/cli")["seconds"]
        page = browser_upload(port, folders[1], "bench/browser")
    finally:
        server.terminate()
        server.wait(timeout=30)
    row = {"bytes": total, "cp_mb_s": size / cp_s / 1e6, "command_mb_s": total / command / 1e6,
           "browser_mb_s": total / page / 1e6, "browser_s": page, "command_s": command, "cp_s": cp_s,
           "cores": os.cpu_count(), "load_average": os.getloadavg()}  # fmt: skip
    row["ratio_browser_to_cp"] = row["browser_mb_s"] / row["cp_mb_s"]
    row["ratio_browser_to_command"] = row["browser_mb_s"] / row["command_mb_s"]
    print(f"{total / 1e9:.2f} GB: browser {row['browser_mb_s']:.0f} MB/s, podium-upload {row['command_mb_s']:.0f} MB/s, "
          f"cp {row['cp_mb_s']:.0f} MB/s; browser/cp {row['ratio_browser_to_cp']:.2f}, "
          f"browser/command {row['ratio_browser_to_command']:.2f}")  # fmt: skip
    (ROOT / "bench" / "out").mkdir(exist_ok=True)
    (ROOT / "bench" / "out" / "uploads_browser.json").write_text(json.dumps(row, indent=2))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
