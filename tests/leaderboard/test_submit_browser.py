"""The submit page in headless Chromium through daphne and PostgreSQL: a checkpoint folder picked at
once goes up through the tus endpoint with tus-js-client (per-file and overall progress, several files
at once); an upload cut mid-file by closing the tab resumes from the offset the server holds; and file
lists the rules refuse are refused in the page before a byte is sent."""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from leaderboard.models import DraftFile, Submission, SubmissionDraft
from leaderboard.submissions import checkpoint_io, checkpoints
from tests.conftest import clean_env, database_url_of

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
CHUNK = 256 * 1024  # model.safetensors (3.1 MB) goes in 13 chunks
PASSWORD = "a-long-enough-passphrase-42"
# Kept across navigations (sessionStorage): every progress value and completion each file row showed.
RECORD_PROGRESS = """
new MutationObserver((changes) => {
  const log = JSON.parse(sessionStorage.getItem("progress") || "[]");
  for (const change of changes) {
    const row = change.target;
    if (row.tagName === "TR" && row.dataset.name) {
      log.push([row.dataset.name, Number(row.dataset.sent || 0), row.classList.contains("done"),
                row.querySelector(".rate").textContent, row.querySelector(".eta").textContent]);
    } else if (row.id === "file-list" && change.attributeName === "data-sent") {
      log.push(["(all)", Number(row.dataset.sent), false, "", ""]);
    }
  }
  sessionStorage.setItem("progress", JSON.stringify(log));
}).observe(document, {subtree: true, attributes: true, attributeFilter: ["data-sent", "class"]});
"""


@pytest.fixture
def site(transactional_db, tiny_dir, tmp_path, start_asgi_server, monkeypatch, settings):
    from playwright.sync_api import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    if not os.path.exists(CHROMIUM):
        pytest.fail("Debian's chromium is not installed (apt-get install chromium)")
    # The server runs the dev settings, whose hashers do not include the test settings' fast MD5.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    get_user_model().objects.create_user("owner@example.org", "owner@example.org", PASSWORD)
    env = clean_env(DJANGO_SETTINGS_MODULE="config.settings.dev", DATABASE_URL=database_url_of(connection),
                    DEBUG="false", SECRET_KEY="submit-browser-test-key", PODIUM_VAR_DIR=str(tmp_path / "var"),
                    LEADERBOARD_UPLOAD_CHUNK_BYTES=str(CHUNK))  # fmt: skip
    base = f"http://127.0.0.1:{start_asgi_server(env=env)}"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context()
        page = context.new_page()
        page.goto(f"{base}/leaderboard/accounts/login/")
        page.fill("#id_username", "owner@example.org")
        page.fill("#id_password", PASSWORD)
        page.click("form.account button[type=submit]")
        page.wait_for_url(f"{base}/leaderboard/submissions/")
        yield {"base": base, "context": context, "page": page,
               "checkpoint": tiny_dir}  # fmt: skip
        from django.db import connections

        connections.close_all()
        browser.close()


def fill_form(page, base):
    page.goto(f"{base}/leaderboard/submit/")
    page.fill("#id_model_name", "acme/tiny-llama")
    page.select_option("#id_precision", "float32")
    page.select_option("#id_model_type", "pretrained")
    page.fill("#id_licence", "apache-2.0")


def watch_requests(page) -> list[tuple[str, str, dict]]:
    seen: list[tuple[str, str, dict]] = []
    page.on("request", lambda r: seen.append((r.method, r.url, r.headers)))
    return seen


def sent_bytes(seen) -> list[tuple[str, str, dict]]:
    return [r for r in seen if "/api/submissions/" in r[1] and r[0] == "POST" or "/leaderboard/uploads/" in r[1]]


def test_refusals_in_the_page_then_a_picked_folder_uploads_with_progress_per_file(site, tmp_path):
    base, page, checkpoint = site["base"], site["page"], site["checkpoint"]
    page.add_init_script(RECORD_PROGRESS)
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    seen = watch_requests(page)
    fill_form(page, base)
    pickled = tmp_path / "pytorch_model.bin"
    pickled.write_bytes(b"\x80\x04K\x01.")
    page.set_input_files("#id_files", [*sorted(checkpoint.iterdir()), pickled])
    assert "only safetensors weights are accepted" in page.inner_text("#file-problems")
    assert page.locator("#file-list tr.problem").count() == 1
    page.click("form.submit button[type=submit]")
    assert "Nothing was sent." in page.inner_text("#upload-state")
    page.evaluate("""() => {  // files dropped on the page are checked the same way
        const drop = new DataTransfer();
        drop.items.add(new File(["{}"], "config.json"));
        drop.items.add(new File(["x"], "model.ckpt"));
        document.getElementById("dropzone").dispatchEvent(new DragEvent("drop", {dataTransfer: drop, bubbles: true}));
    }""")
    assert "model.ckpt: only safetensors weights are accepted" in page.inner_text("#file-problems")
    assert page.locator("#file-list tbody tr").count() == 2
    page.set_input_files("#id_files", [p for p in sorted(checkpoint.iterdir()) if p.name != "config.json"])
    assert page.inner_text("#file-problems").strip() == "config.json is missing."
    page.click("form.submit button[type=submit]")
    assert page.url == f"{base}/leaderboard/submit/" and sent_bytes(seen) == []  # refused before a byte was sent
    assert not SubmissionDraft.objects.exists()

    page.fill("#id_model_name", "-not a name")  # refused by the server's form, before any file is sent
    page.set_input_files("#folder-input", str(checkpoint))
    page.click("form.submit button[type=submit]")
    page.wait_for_selector("#form-problems li")
    assert page.inner_text("#form-problems").startswith("Model name: Use letters, digits")
    assert not [u for _, u, _ in seen if "/leaderboard/uploads/" in u]

    renamed = tmp_path / "renamed"  # a pickle named .safetensors: the server refuses it at its first bytes
    shutil.copytree(checkpoint, renamed)
    (renamed / "model.safetensors").write_bytes(b"\x80\x04\x95" + b"\0" * 4096)
    page.fill("#id_model_name", "acme/tiny-llama")
    page.set_input_files("#folder-input", str(renamed))
    page.click("form.submit button[type=submit]")
    page.wait_for_selector("#form-problems li")
    assert "model.safetensors is not a safetensors file" in page.inner_text("#form-problems")
    assert SubmissionDraft.objects.get().state == "REFUSED" and not Submission.objects.exists()

    names = sorted(p.name for p in checkpoint.iterdir())
    page.set_input_files("#folder-input", str(checkpoint))  # the whole folder at once
    assert page.locator("#file-list tbody tr").count() == len(names)
    assert page.locator("#file-problems").is_hidden()
    page.click("form.submit button[type=submit]")
    page.wait_for_url(f"{base}/leaderboard/submissions/")

    log = json.loads(page.evaluate("sessionStorage.getItem('progress')"))
    weights = (checkpoint / "model.safetensors").stat().st_size
    shown = sorted({sent for name, sent, *_ in log if name == "model.safetensors"})
    assert len([s for s in shown if 0 < s < weights]) >= 3, shown  # the bar moved chunk by chunk
    assert shown[-1] == weights
    assert any(rate.endswith("/s") and eta for name, sent, _, rate, eta in log if name == "model.safetensors" and sent < weights)
    assert {name for name, _, done, *_ in log if done} == set(names)  # every file reached "done"
    overall = [sent for name, sent, *_ in log if name == "(all)"]
    assert overall[-1] == sum(p.stat().st_size for p in checkpoint.iterdir()) and len(set(overall)) > 3
    submission = Submission.objects.get()
    assert (submission.model_name, submission.status, submission.owner.email) == ("acme/tiny-llama", "PENDING", "owner@example.org")
    files = checkpoints.folder_files(checkpoint, root=checkpoint)
    assert submission.weight_sha256 == checkpoint_io.hash_weights(files)  # hashed while it arrived
    assert page.inner_text("tr.submission .status") in ("PENDING", "RUNNING")
    patches = [h for m, _, h in seen if m == "PATCH"]  # each chunk carried its CRC-32, and the server checked it
    assert len(patches) >= 13 and all(re.fullmatch(r"crc32 [A-Za-z0-9+/]{6}==", h.get("upload-checksum", "")) for h in patches)
    assert not errors


def test_a_closed_tab_and_a_dropped_connection_resume_from_the_servers_offset(site):
    base, context, page, checkpoint = site["base"], site["context"], site["page"], site["checkpoint"]
    held = []

    def hold_late_chunks(route):  # the connection "drops" after three chunks of each large file
        if route.request.method == "PATCH" and int(route.request.headers.get("upload-offset", 0)) >= 3 * CHUNK:
            held.append(route)  # never answered: the upload stalls there
        else:
            route.continue_()

    page.route("**/leaderboard/uploads/**", hold_late_chunks)
    fill_form(page, base)
    page.set_input_files("#folder-input", str(checkpoint))
    page.click("form.submit button[type=submit]")
    # Poll the server's record while Playwright runs (its route handler only runs inside its calls).
    for _ in range(600):
        weights = DraftFile.objects.filter(name="model.safetensors").first()
        if weights is not None and weights.offset == 3 * CHUNK and held:
            break
        page.wait_for_timeout(100)
    else:
        raise AssertionError(f"the weights never reached 3 chunks: {weights}\n{page.inner_text('form.submit')}")
    page.close()  # the tab is closed mid-upload

    page = context.new_page()
    seen = watch_requests(page)
    heads = []  # (url, the offset the server said it holds)
    page.on("response", lambda r: heads.append((r.url, int(r.headers["upload-offset"])))
            if r.request.method == "HEAD" else None)  # fmt: skip
    upload_url = f"{base}/leaderboard/uploads/{weights.public_id}/"
    weight_patches = []

    def drop_the_second_chunk(route):  # and the connection drops once more, in the same tab
        if route.request.method == "PATCH" and route.request.url == upload_url:
            weight_patches.append(int(route.request.headers["upload-offset"]))
            if len(weight_patches) == 2:
                return route.abort("connectionreset")
        return route.continue_()

    page.route("**/leaderboard/uploads/**", drop_the_second_chunk)
    page.goto(f"{base}/leaderboard/submit/")  # the form is filled in again as it was sent
    page.wait_for_selector("#upload-state:has-text('was interrupted')")  # once the server says it still waits
    assert (page.input_value("#id_model_name"), page.input_value("#id_licence")) == ("acme/tiny-llama", "apache-2.0")
    assert page.input_value("#id_precision") == "float32"
    page.set_input_files("#folder-input", str(checkpoint))  # the same folder again
    page.click("form.submit button[type=submit]")
    page.wait_for_url(f"{base}/leaderboard/submissions/")

    assert ("HEAD", upload_url) in [(m, u) for m, u, _ in seen]  # the upload the first tab began, asked its offset
    after_drop = [o for u, o in heads if u == upload_url][-1]  # tus-js-client asked again after the drop
    assert weight_patches[1] == weight_patches[2] == after_drop  # and sent again the chunk that was lost
    assert not [u for m, u, _ in seen if m == "POST" and "/leaderboard/uploads/" in u]  # none begun again
    patches = [int(h["upload-offset"]) for m, u, h in seen if m == "PATCH" and u == upload_url]
    size = (checkpoint / "model.safetensors").stat().st_size
    offset = next(o for u, o in heads if u == upload_url)  # the held chunk may land after the tab closed
    assert 3 * CHUNK <= offset < size
    assert patches[0] == offset  # the first byte sent again is the first the server lacked
    assert not [u for m, u, _ in seen if m == "POST" and "/api/submissions/" in u]  # the same submission
    assert SubmissionDraft.objects.count() == 1
    submission = Submission.objects.get()
    files = checkpoints.folder_files(checkpoint, root=checkpoint)
    assert submission.weight_sha256 == checkpoint_io.hash_weights(files)
