"""The submission form end to end through Django: accounts, uploads, hostile files, limits, privacy."""

from __future__ import annotations

import json
import pickle
import shutil
import struct

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from arena.catalogue.services import model_register
from arena.models import LanguageModel
from evalcore.models.hf import hash_files
from leaderboard.models import Submission

pytestmark = pytest.mark.django_db
SUBMIT = "/leaderboard/submit/"
PASSWORD = "a-long-enough-passphrase-42"


def uploads(folder, **replace):
    """The folder's files as uploads; ``replace`` maps a file name to new bytes (None drops it)."""
    files = {p.name: p.read_bytes() for p in sorted(folder.iterdir())}
    for name, data in replace.items():
        name = name.replace("__", ".")
        if data is None:
            files.pop(name, None)
        else:
            files[name] = data
    return [SimpleUploadedFile(name, data) for name, data in files.items()]


def form_data(files, **fields):
    return {"model_name": "acme/tiny-llama", "files": files, "precision": "float32", "model_type": "pretrained",
            "licence": "apache-2.0", **fields}  # fmt: skip


@pytest.fixture
def owner(client):
    user = get_user_model().objects.create_user("owner@example.org", "owner@example.org", PASSWORD)
    client.force_login(user)
    return user


def make_submission(owner, *, name="acme/other", sha="0" * 64, **fields) -> Submission:
    values = dict(owner=owner, model_name=name, language_model=model_register(name=name), model_type="pretrained",
                  licence="mit", source="upload", architecture="LlamaForCausalLM", weight_sha256=sha,
                  parameter_count=10, total_bytes=10, storage_path="/nowhere")  # fmt: skip
    values.update(fields)
    return Submission.objects.create(**values)


def test_sign_up_log_out_and_log_in(client):
    assert client.get("/leaderboard/accounts/signup/").status_code == 200
    mismatch = {"email": "New@Example.org", "password1": PASSWORD, "password2": PASSWORD + "x"}
    assert client.post("/leaderboard/accounts/signup/", mismatch).status_code == 400
    response = client.post("/leaderboard/accounts/signup/", {**mismatch, "password2": PASSWORD})
    assert response.status_code == 302 and response["Location"] == reverse("leaderboard:submit")
    user = get_user_model().objects.get()
    assert user.username == user.email == "new@example.org"
    assert client.get(SUBMIT).status_code == 200  # logged in by signing up
    again = client.post("/leaderboard/accounts/signup/", {**mismatch, "password2": PASSWORD})
    assert again.status_code == 302  # already logged in: sent to their submissions
    client.post("/leaderboard/accounts/logout/")
    assert client.get(SUBMIT).status_code == 302
    client.post("/leaderboard/accounts/signup/", {**mismatch, "password2": PASSWORD, "email": "NEW@example.org"})
    assert get_user_model().objects.count() == 1  # the same email, differently cased, is refused
    response = client.post("/leaderboard/accounts/login/", {"username": " New@Example.org", "password": PASSWORD})
    assert response.status_code == 302 and response["Location"] == reverse("leaderboard:submissions")
    assert b"Log out" in client.get("/leaderboard/submissions/").content


def test_submit_needs_an_account(client):
    response = client.get(SUBMIT)
    assert response.status_code == 302 and response["Location"].startswith("/leaderboard/accounts/login/")


def test_upload_is_stored_hashed_registered_and_enqueued(client, owner, tiny_dir, submissions_dir,
                                                         django_capture_on_commit_callbacks):  # fmt: skip
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(SUBMIT, form_data(uploads(tiny_dir), private="on", precision="bfloat16"))
    assert response.status_code == 302, response.content.decode()[:2000]
    submission = Submission.objects.get()
    assert len(callbacks) == 1  # submission_evaluate is sent only after the commit
    assert submission.status == "PENDING" and submission.private and submission.precision == "bfloat16"
    assert submission.parameter_count == 49152 * 16 + 16 * 16 * 4 + 3 * 16 * 32 + 16 * 3  # from the headers
    assert submission.weight_sha256 == hash_files(sorted(tiny_dir.glob("*.safetensors")))
    assert submission.storage_path == str(submissions_dir / str(submission.pk))
    stored = sorted(p.name for p in (submissions_dir / str(submission.pk)).iterdir())
    assert stored == sorted(p.name for p in tiny_dir.iterdir())
    assert not list((submissions_dir / ".incoming").iterdir())
    model = LanguageModel.objects.get(name="acme/tiny-llama")
    assert submission.language_model == model and not model.in_arena
    page = client.get("/leaderboard/submissions/").content.decode()
    assert "acme/tiny-llama" in page and "PENDING" in page and "submissions.js" in page


def pickle_payload() -> bytes:
    return pickle.dumps({"weight": [1.0, 2.0]}, protocol=4)


def huge_header() -> bytes:
    raw = json.dumps({"w": {"dtype": "F32", "shape": [10**7, 10**7], "data_offsets": [0, 4 * 10**14]}}).encode()
    return struct.pack("<Q", len(raw)) + raw + b"\0" * 64


def many_dimensions_header() -> bytes:
    """0.7 MB: a 40,000-dimension shape whose size has ~630,000 digits (took 5.5 s, then a 500)."""
    raw = json.dumps({"w": {"dtype": "F32", "shape": [2**52 - 1] * 40_000, "data_offsets": [0, 64]}}).encode()
    return struct.pack("<Q", len(raw)) + raw + b"\0" * 64


def deep_header(depth: int) -> bytes:
    raw = ('{"__metadata__": ' + "[" * depth + "]" * depth + "}").encode()
    return struct.pack("<Q", len(raw)) + raw


def config_with(tiny_dir, **changes) -> bytes:
    config = json.loads((tiny_dir / "config.json").read_text())
    config.update(changes)
    return json.dumps(config).encode()


@pytest.mark.parametrize(
    "case, message",
    [
        ("pickle renamed", "is not a safetensors file"),
        ("huge tensor", "more than the file holds"),
        ("pickle .bin", "only safetensors weights"),
        ("auto_map", "auto_map"),
        ("latin-1 config", "config.json is not UTF-8"),
        ("unsupported", "not supported"),
        ("no tokenizer", "No tokenizer"),
        ("40,000 dimensions", "has 40000 dimensions; at most 16"),
        ("header nested 100,000 deep", "nests deeper than 64 levels"),
        ("header nested 100 deep", "nests deeper than 64 levels"),
        ("config nested 100,000 deep", "config.json nests deeper than 64 levels"),
        ("tokenizer config nested 70 deep", "tokenizer_config.json nests deeper than 64 levels"),
    ],
)
def test_hostile_uploads_are_refused_with_a_message(client, owner, tiny_dir, submissions_dir, case, message):
    replace = {
        "pickle renamed": {"model__safetensors": pickle_payload()},
        "huge tensor": {"model__safetensors": huge_header()},
        "pickle .bin": {"pytorch_model__bin": pickle_payload()},
        "auto_map": {"config__json": config_with(tiny_dir, auto_map={"AutoModelForCausalLM": "evil.Evil"})},
        "latin-1 config": {"config__json": '{"architectures": ["LlamaForCausalLM"], "x": "é"}'.encode("latin-1")},
        "unsupported": {"config__json": config_with(tiny_dir, architectures=["EvilForCausalLM"])},
        "no tokenizer": {"tokenizer__json": None},
        "40,000 dimensions": {"model__safetensors": many_dimensions_header()},
        "header nested 100,000 deep": {"model__safetensors": deep_header(100_000)},
        "header nested 100 deep": {"model__safetensors": deep_header(100)},
        "config nested 100,000 deep": {"config__json": b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"},
        "tokenizer config nested 70 deep": {"tokenizer_config__json": b'{"a": ' + b"[" * 70 + b"]" * 70 + b"}"},
    }[case]
    response = client.post(SUBMIT, form_data(uploads(tiny_dir, **replace)))
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not Submission.objects.exists()
    assert not submissions_dir.exists() or not any(submissions_dir.rglob("*.*"))


def test_path_in_a_file_name_never_leaves_the_upload(client, owner, tiny_dir, submissions_dir, tmp_path):
    files = uploads(tiny_dir)
    files.append(SimpleUploadedFile("../../../evil.safetensors", b"not weights"))
    response = client.post(SUBMIT, form_data(files))
    # Django keeps only the last path component; the file-list checks then refuse a second weight
    # file without an index before any file is opened.
    assert response.status_code == 400 and "2 safetensors shards need" in response.content.decode()
    assert not list(tmp_path.rglob("evil*"))
    assert not Submission.objects.exists()


def test_over_size_upload_stops_before_storing(client, owner, tiny_dir, submissions_dir, settings):
    settings.LEADERBOARD_MAX_UPLOAD_BYTES = 100_000
    response = client.post(SUBMIT, form_data(uploads(tiny_dir)))
    assert response.status_code == 413
    assert "larger than the limit of 100000 bytes" in response.content.decode()
    assert not Submission.objects.exists() and not submissions_dir.exists()


def test_too_many_files(client, owner, tiny_dir, submissions_dir, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FILES = 3
    response = client.post(SUBMIT, form_data(uploads(tiny_dir)))
    assert response.status_code == 400 and "Too many files" in response.content.decode()
    settings.DATA_UPLOAD_MAX_NUMBER_FILES = 100
    settings.LEADERBOARD_MAX_FILES = 3
    response = client.post(SUBMIT, form_data(uploads(tiny_dir)))
    assert response.status_code == 400 and "Too many files (6); at most 3" in response.content.decode()


def test_form_rules(client, owner, tiny_dir, submissions_dir):
    files = uploads(tiny_dir, chat_template__jinja=None)
    response = client.post(SUBMIT, form_data(files, model_type="fine-tuned", apply_chat_template="on"))
    page = response.content.decode()
    assert response.status_code == 400
    assert "Name the base model" in page and "the checkpoint has none" in page
    response = client.post(SUBMIT, form_data([], model_name="../bad name"))
    page = response.content.decode()
    assert "Use letters, digits" in page and "Upload the checkpoint" in page
    assert not Submission.objects.exists()


def test_rate_limit_per_week(client, owner, make_checkpoint, submissions_dir, settings):
    settings.LEADERBOARD_SUBMISSIONS_PER_WEEK = 2
    make_submission(owner, name="acme/one", sha="1" * 64)
    old = make_submission(owner, name="acme/two", sha="2" * 64)
    Submission.objects.filter(pk=old.pk).update(created_at=old.created_at.replace(year=2020))
    response = client.post(SUBMIT, form_data(uploads(make_checkpoint(seed=2))))
    assert response.status_code == 302  # one recent + one old: within the limit
    response = client.post(SUBMIT, form_data(uploads(make_checkpoint(seed=3)), model_name="acme/three"))
    assert response.status_code == 400 and "the limit is 2 a week" in response.content.decode()
    assert Submission.objects.count() == 3


def test_duplicate_weights_are_refused_without_telling_whose(client, owner, tiny_dir, submissions_dir):
    other = get_user_model().objects.create_user("other@example.org", "other@example.org", PASSWORD)
    sha = hash_files(sorted(tiny_dir.glob("*.safetensors")))
    first = make_submission(other, name="other/original", sha=sha, status="FINISHED")
    pages = {}
    for private in (False, True):  # another account's public entry and its private one read the same
        Submission.objects.filter(pk=first.pk).update(private=private)
        response = client.post(SUBMIT, form_data(uploads(tiny_dir)))
        assert response.status_code == 400
        pages[private] = response.content.decode()
        assert "already submitted to Podium" in pages[private]
        assert "other/original" not in pages[private] and "private" not in pages[private].split("<form")[0]
        assert f"/leaderboard/submissions/{first.public_id}/" not in pages[private]
    assert not list((submissions_dir / ".incoming").iterdir())  # the copy was removed
    # The owner's own earlier entry is named and linked.
    Submission.objects.filter(pk=first.pk).update(owner=owner)
    page = client.post(SUBMIT, form_data(uploads(tiny_dir))).content.decode()
    assert "You already submitted these weights as other/original" in page
    assert f'href="/leaderboard/submissions/{first.public_id}/"' in page
    Submission.objects.filter(pk=first.pk).update(status="FAILED", failure_reason="boom")
    assert client.post(SUBMIT, form_data(uploads(tiny_dir))).status_code == 302  # a failed one may be retried


def test_the_same_weights_resharded_are_a_duplicate(client, owner, make_checkpoint, submissions_dir):
    """The file digest changes with names and sharding; the tensor digest does not, so the same weights
    saved in several shards are refused as the duplicate they are."""
    from leaderboard.submissions.checkpoint_io import tensors_hash

    single, sharded = make_checkpoint(seed=7), make_checkpoint(seed=7, max_shard_size="1MB")
    assert len(list(sharded.glob("*.safetensors"))) > 1
    assert tensors_hash(sorted(single.glob("*.safetensors"))) == tensors_hash(sorted(sharded.glob("*.safetensors")))
    assert tensors_hash(sorted(single.glob("*.safetensors"))) != tensors_hash(
        sorted(make_checkpoint(seed=8).glob("*.safetensors"))
    )
    assert client.post(SUBMIT, form_data(uploads(single), model_name="acme/seven")).status_code == 302
    first = Submission.objects.get()
    assert len(first.tensors_sha256) == 64
    response = client.post(SUBMIT, form_data(uploads(sharded), model_name="acme/seven-sharded"))
    assert response.status_code == 400
    assert "You already submitted these weights as acme/seven" in response.content.decode()
    assert Submission.objects.count() == 1
    assert not list((submissions_dir / ".incoming").iterdir())  # the copy was removed


def test_names_belong_to_their_owner_and_arena_models_are_taken(client, owner, tiny_dir, submissions_dir):
    other = get_user_model().objects.create_user("other@example.org", "other@example.org", PASSWORD)
    make_submission(other, name="other/model")
    LanguageModel.objects.create(name="arena-model", in_arena=True)
    for name in ("other/model", "arena-model"):
        response = client.post(SUBMIT, form_data(uploads(tiny_dir), model_name=name))
        assert response.status_code == 400 and "already taken" in response.content.decode()


def test_status_endpoint_and_results_page_are_private(client, owner):
    mine = make_submission(owner, name="acme/mine", status="FAILED", failure_reason="RuntimeError: out of memory",
                           log_tail="loading...\nRuntimeError: out of memory", private=True)  # fmt: skip
    url = f"/leaderboard/submissions/{mine.public_id}/status.json"
    data = client.get(url).json()
    assert data["status"] == "FAILED" and "out of memory" in data["log_tail"] and data["active"] is False
    page = client.get("/leaderboard/submissions/").content.decode()
    assert "RuntimeError: out of memory" in page and "loading..." in page
    assert client.get(f"/leaderboard/submissions/{mine.public_id}/").status_code == 200
    other = get_user_model().objects.create_user("other@example.org", "other@example.org", PASSWORD)
    client.force_login(other)
    assert client.get(url).status_code == 404
    assert client.get("/leaderboard/submissions/999999/status.json").status_code == 404
    assert client.get(f"/leaderboard/submissions/{mine.public_id}/").status_code == 404  # private variant
    assert "acme/mine" not in client.get("/leaderboard/submissions/").content.decode()
    assert client.post(f"/leaderboard/submissions/{mine.public_id}/publish/").status_code == 404
    client.force_login(owner)
    assert client.get(f"/leaderboard/submissions/{mine.public_id}/publish/").status_code == 405
    assert client.post(f"/leaderboard/submissions/{mine.public_id}/publish/").status_code == 302
    assert not Submission.objects.get(pk=mine.pk).private
    client.force_login(other)
    assert client.get(f"/leaderboard/submissions/{mine.public_id}/").status_code == 200  # published
    assert client.get(url).status_code == 404  # its live status stays the owner's
    client.logout()
    assert client.get(url).status_code == 302


def test_shared_model_store_path(client, owner, tiny_dir, submissions_dir, settings, tmp_path):
    store = tmp_path / "store"
    shutil.copytree(tiny_dir, store / "acme" / "tiny")
    (tmp_path / "outside").mkdir()
    (store / "link").symlink_to(tmp_path / "outside")
    settings.LEADERBOARD_MODEL_STORE = str(store)
    owner.is_staff = True  # the store is the server's disk: staff only
    owner.save()
    assert b"store_path" in client.get(SUBMIT).content
    for path, message in [("../outside", "without &#x27;..&#x27;"), ("link", "outside the model store")]:
        response = client.post(SUBMIT, form_data([], store_path=path))
        assert response.status_code == 400 and message in response.content.decode()
    response = client.post(SUBMIT, form_data([], store_path="acme/tiny"))
    assert response.status_code == 302
    submission = Submission.objects.get()
    assert submission.source == "store" and submission.storage_path == str((store / "acme" / "tiny").resolve())
    assert not submissions_dir.exists()  # evaluated where it lies, never copied
    response = client.post(SUBMIT, form_data(uploads(tiny_dir), store_path="acme/tiny"))
    assert "not both" in response.content.decode()


@pytest.mark.parametrize("path", ["acme/tiny", "../outside", " /etc ", "x" * 600])
def test_an_owner_who_is_not_staff_cannot_name_a_store_path(client, owner, tiny_dir, submissions_dir, settings,
                                                            tmp_path, path):  # fmt: skip
    store = tmp_path / "store"
    shutil.copytree(tiny_dir, store / "acme" / "tiny")
    settings.LEADERBOARD_MODEL_STORE = str(store)
    assert b"store_path" not in client.get(SUBMIT).content  # not offered
    for files in ([], uploads(tiny_dir)):  # posted anyway, alone or beside an upload
        response = client.post(SUBMIT, form_data(files, store_path=path))
        assert response.status_code == 400
        assert "Only staff may name a folder on the server&#x27;s model store" in response.content.decode()
    assert not Submission.objects.exists()
    settings.LEADERBOARD_MODEL_STORE = ""
    response = client.post(SUBMIT, form_data([], store_path=path))
    assert response.status_code == 400 and "This server has no model store" in response.content.decode()


def test_many_private_variants_make_a_public_entry_wait_for_review(client, owner, make_checkpoint, submissions_dir,
                                                                   settings):  # fmt: skip
    settings.LEADERBOARD_PRIVATE_VARIANTS_LIMIT = 2
    settings.LEADERBOARD_SUBMISSIONS_PER_WEEK = 20
    for i in range(3):
        make_submission(owner, name=f"acme/v{i}", sha=f"{i}" * 64, base_model="Llama-3-8B", model_type="fine-tuned",
                        private=True, status="FINISHED")  # fmt: skip
    fields = {"model_type": "fine-tuned", "base_model": "llama-3-8b"}
    client.post(SUBMIT, form_data(uploads(make_checkpoint(seed=4)), model_name="acme/public", **fields))
    public = Submission.objects.get(model_name="acme/public")
    assert public.review_state == "flagged" and "3 private variants of llama-3-8b" in public.review_reason
    client.post(SUBMIT, form_data(uploads(make_checkpoint(seed=5)), model_name="acme/other-base", model_type="chat"))
    assert Submission.objects.get(model_name="acme/other-base").review_state == "none"
    client.post(f"/leaderboard/submissions/{Submission.objects.get(model_name='acme/v0').public_id}/publish/")
    assert Submission.objects.get(model_name="acme/v0").review_state == "none"  # 2 others: within the limit
    client.post(SUBMIT, form_data(uploads(make_checkpoint(seed=6)), model_name="acme/private", private="on", **fields))
    assert Submission.objects.get(model_name="acme/private").review_state == "none"  # private: nobody else sees it


def test_flagged_submission_is_seen_only_by_its_owner_and_staff(client, owner):
    flagged = make_submission(owner, name="acme/flagged", status="FINISHED", review_state="flagged",
                              review_reason="many private variants")  # fmt: skip
    url = f"/leaderboard/submissions/{flagged.public_id}/"
    assert client.get(url).status_code == 200  # its owner
    client.logout()
    assert client.get(url).status_code == 404  # the public, while it waits for review
    client.force_login(get_user_model().objects.create_user("x@example.org", "x@example.org", PASSWORD))
    assert client.get(url).status_code == 404
    client.force_login(get_user_model().objects.create_user("s@example.org", "s@example.org", PASSWORD, is_staff=True))
    assert client.get(url).status_code == 200
    Submission.objects.filter(pk=flagged.pk).update(review_state="approved")
    client.logout()
    assert client.get(url).status_code == 200


def test_submission_urls_use_opaque_ids(client, owner):
    first, second = (make_submission(owner, name=f"acme/m{i}", sha=f"{i}" * 64) for i in (1, 2))
    assert len({first.public_id, second.public_id}) == 2
    assert all(len(s.public_id) == 22 for s in (first, second))
    assert client.get(f"/leaderboard/submissions/{first.pk}/").status_code == 404  # the primary key is no URL
    page = client.get("/leaderboard/submissions/").content.decode()
    assert f"/leaderboard/submissions/{first.public_id}/" in page
    assert f"/leaderboard/submissions/{first.pk}/" not in page
    for hostile in ("a" * 21, "a" * 23, "..%2F" + "a" * 17, "a" * 21 + "!"):
        assert client.get(f"/leaderboard/submissions/{hostile}/").status_code == 404
