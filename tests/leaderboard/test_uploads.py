"""Resumable uploads (tus 1.0.0) and the submissions API through Django, with real tiny checkpoints:
the protocol, resuming, parallel shards, hashing while receiving, and every bad input refused with
nothing half-stored."""

from __future__ import annotations

import json
import struct
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from evalcore.models.hf import hash_files
from leaderboard.models import DraftFile, Submission, SubmissionDraft
from leaderboard.submissions import checkpoint_io, chunks, transfers
from tests.leaderboard import tus_helpers as tus
from tests.leaderboard.test_upload_chunks import _page_cache, skip_unless_page_cache_shows_direct_io

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(client):
    user = get_user_model().objects.create_user("owner@example.org", "owner@example.org", "pw-long-enough-42")
    client.force_login(user)
    return user


def _draft(client, folder, **sizes) -> str:
    response = tus.create_draft(client, tus.declared(folder, **sizes))
    assert response.status_code == 201, response.content
    return response.json()["id"]


def _held_bytes(uploads_dir) -> int:
    return sum(p.stat().st_size for p in uploads_dir.rglob("*") if p.is_file()) if uploads_dir.exists() else 0


def test_options_announce_the_extensions(client):
    response = client.options(tus.UPLOADS)
    assert response.status_code == 204
    assert response["Tus-Version"] == "1.0.0"
    assert set(response["Tus-Extension"].split(",")) == {"creation", "termination", "checksum", "expiration"}
    assert response["Tus-Checksum-Algorithm"] == "crc32,sha256,sha1"


def test_upload_a_sharded_checkpoint_in_parallel_and_resume(client, owner, uploads_dir, make_checkpoint):
    folder = make_checkpoint(max_shard_size="1MB")  # the same cached folder as test_checkpoints
    draft_id = _draft(client, folder)
    weights = sorted(p for p in folder.iterdir() if p.suffix == ".safetensors")
    assert len(weights) >= 2
    # The later shard first and interleaved with the earlier one: the hash reads ahead-of-order bytes back once.
    urls, data = {}, {}
    for path in reversed(weights):
        data[path.name] = path.read_bytes()
        urls[path.name] = tus.create_upload(client, draft_id, path.name, len(data[path.name]))["Location"]
    chunk = 1 << 18
    offsets = dict.fromkeys(urls, 0)
    while any(offsets[n] < len(data[n]) for n in urls):
        for name in reversed(sorted(urls)):
            if offsets[name] < len(data[name]):
                block = data[name][offsets[name] : offsets[name] + chunk]
                algorithm = "sha256" if name == weights[0].name else "crc32"  # both kinds of checksum on the way
                assert tus.patch(client, urls[name], offsets[name], block, algorithm=algorithm).status_code == 204
                offsets[name] += len(block)
    # HEAD tells where to resume; a repeated chunk is refused.
    head = client.head(urls[weights[0].name], headers=tus.TUS)
    assert head.status_code == 200 and head["Upload-Offset"] == head["Upload-Length"] == str(len(data[weights[0].name]))
    assert head["Cache-Control"] == "no-store" and "Upload-Expires" in head
    assert tus.patch(client, urls[weights[0].name], 0, data[weights[0].name][:10]).status_code == 409
    assert Submission.objects.count() == 0
    shards = DraftFile.objects.filter(name__endswith=".safetensors")
    assert shards.count() == len(weights)
    assert all(0 < len(shard.tensor_digests) == len(shard.tensors) for shard in shards)  # made as they arrived
    expected = checkpoint_io.tensors_digest(
        (name, dtype, shape, shard.tensor_digests[name]) for shard in shards for _, _, name, dtype, shape in shard.tensors
    )
    for path in sorted(folder.iterdir()):
        if path.suffix != ".safetensors":
            last = tus.send_file(client, draft_id, path.name, path.read_bytes())
    assert last.status_code == 204 and last["Podium-Submission-State"] == "SUBMITTED"
    submission = Submission.objects.get()
    assert submission.public_id == draft_id and submission.status == "PENDING"
    assert submission.weight_sha256 == hash_files(weights)  # hashed while receiving: the backend's digest
    submission_path = Path(submission.storage_path)
    stored = sorted(submission_path.glob("*.safetensors"))
    assert submission.tensors_sha256 == expected == checkpoint_io.tensors_hash(stored)  # no second read needed
    assert {p.name: p.read_bytes() for p in submission_path.iterdir()} == {p.name: p.read_bytes() for p in folder.iterdir()}
    assert not (uploads_dir / draft_id).exists() and DraftFile.objects.count() == 0
    status = client.get(f"/api/submissions/{draft_id}/").json()
    assert status["status"] == "PENDING" and status["results"] == []


def test_bad_chunks_are_refused_and_nothing_of_them_is_kept(client, owner, uploads_dir, tiny_dir):
    draft_id = _draft(client, tiny_dir)
    data = (tiny_dir / "model.safetensors").read_bytes()
    url = tus.create_upload(client, draft_id, "model.safetensors", len(data))["Location"]
    assert tus.patch(client, url, 0, data[:1000]).status_code == 204
    # Out of order (a gap), repeated, and at a wrong offset: 409, the file still holds 1000 bytes.
    for offset in (2000, 0, 999):
        response = tus.patch(client, url, offset, data[offset : offset + 500])
        assert response.status_code == 409 and "holds 1000 bytes" in response.json()["detail"]
    # A checksum that does not match (crc32, sha256, sha1): 460, and its bytes are cut off again.
    for algorithm in ("crc32", "sha256", "sha1"):
        wrong = tus.patch(client, url, 1000, data[1000:2000], headers={"Upload-Checksum": tus.checksum(b"other", algorithm)})
        assert wrong.status_code == 460 and f"{algorithm} checksum does not match" in wrong.json()["detail"]
    flipped = bytearray(data[1000:2000])
    flipped[500] ^= 0x10  # one bit damaged on the way, the crc32 made over the bytes sent
    damaged = tus.patch(client, url, 1000, bytes(flipped), headers={"Upload-Checksum": tus.checksum(data[1000:2000], "crc32")})
    assert damaged.status_code == 460
    # Unknown or malformed: 400, nothing read.
    for value in ("md5 AAAA", "crc32 AAAA", "crc32 !!!!!!!!", "crc32", "CRC32 y/Q5Jg=="):
        refused = tus.patch(client, url, 1000, data[1000:2000], headers={"Upload-Checksum": value})
        assert refused.status_code == 400 and "Checksum" in refused.json()["detail"], value
    assert (uploads_dir / draft_id / "model.safetensors").stat().st_size == 1000
    assert client.head(url, headers=tus.TUS)["Upload-Offset"] == "1000"
    # More bytes than the upload tus.declared: 413 before any is read.
    too_long = tus.patch(client, url, 1000, data[1000:] + b"extra")
    assert too_long.status_code == 413 and (uploads_dir / draft_id / "model.safetensors").stat().st_size == 1000
    # Protocol errors: no Tus-Resumable, wrong content type.
    no_tus = client.generic("PATCH", url, b"x", content_type="application/offset+octet-stream", headers={"Upload-Offset": "1000"})
    assert no_tus.status_code == 412 and no_tus["Tus-Version"] == "1.0.0"
    plain = client.generic("PATCH", url, b"x", content_type="text/plain", headers={**tus.TUS, "Upload-Offset": "1000"})
    assert plain.status_code == 415
    # The rest arrives, without checksums too (they are optional in tus).
    assert tus.patch(client, url, 1000, data[1000:], with_checksum=False).status_code == 204


def test_a_size_that_differs_from_the_declared_one_is_refused(client, owner, uploads_dir, tiny_dir):
    draft_id = _draft(client, tiny_dir)
    size = (tiny_dir / "config.json").stat().st_size
    response = tus.create_upload(client, draft_id, "config.json", size + 1)
    assert response.status_code == 400 and f"declared as {size} bytes" in response.json()["detail"]
    response = tus.create_upload(client, draft_id, "extra.json", 10)
    assert response.status_code == 400 and "not one of the files" in response.json()["detail"]
    assert DraftFile.objects.count() == 0


def test_a_header_claiming_more_weights_than_the_file_refuses_the_submission(client, owner, uploads_dir, tiny_dir):
    real = (tiny_dir / "model.safetensors").read_bytes()
    length = struct.unpack("<Q", real[:8])[0]
    header = json.loads(real[8 : 8 + length])
    name = next(k for k in header if k != "__metadata__")
    header[name]["shape"] = [d * 1000 for d in header[name]["shape"]]
    header[name]["data_offsets"][1] = header[name]["data_offsets"][0] + 10**12
    raw = json.dumps(header).encode()
    hostile = struct.pack("<Q", len(raw)) + raw + real[8 + length :]
    draft_id = _draft(client, tiny_dir, model__safetensors=len(hostile))
    config = (tiny_dir / "config.json").read_bytes()
    assert tus.send_file(client, draft_id, "config.json", config).status_code == 204
    response = tus.send_file(client, draft_id, "model.safetensors", hostile, chunk=len(raw) + 8 + 100)
    assert response.status_code == 422
    assert "more than the file holds" in response.json()["detail"]
    draft = SubmissionDraft.objects.get(public_id=draft_id)
    assert draft.state == "REFUSED" and "more than the file holds" in draft.errors[0]
    assert not (uploads_dir / draft_id).exists() and DraftFile.objects.count() == 0  # config.json went too
    gone = tus.create_upload(client, draft_id, "tokenizer.json", (tiny_dir / "tokenizer.json").stat().st_size)
    assert gone.status_code == 410 and "refused" in gone.json()["detail"]
    assert client.get(f"/api/submissions/{draft_id}/").json()["status"] == "REFUSED"


def test_a_pickle_renamed_safetensors_is_refused_after_its_first_8_bytes(client, owner, uploads_dir, tiny_dir):
    pickled = b"\x80\x04\x95" + b"\x00" * 5000
    draft_id = _draft(client, tiny_dir, model__safetensors=len(pickled))
    response = tus.send_file(client, draft_id, "model.safetensors", pickled, chunk=16)
    assert response.status_code == 422 and "header length" in response.json()["detail"]
    assert _held_bytes(uploads_dir) == 0


def test_terminate_and_expire_remove_the_bytes(client, owner, uploads_dir, tiny_dir):
    draft_id = _draft(client, tiny_dir)
    data = (tiny_dir / "model.safetensors").read_bytes()
    url = tus.create_upload(client, draft_id, "model.safetensors", len(data))["Location"]
    assert tus.patch(client, url, 0, data[:5000]).status_code == 204
    assert client.delete(url, headers=tus.TUS).status_code == 204
    assert client.head(url, headers=tus.TUS).status_code == 404 and _held_bytes(uploads_dir) == 0
    url = tus.create_upload(client, draft_id, "model.safetensors", len(data))["Location"]  # may start again
    assert tus.patch(client, url, 0, data[:5000]).status_code == 204 and _held_bytes(uploads_dir) == 5000
    SubmissionDraft.objects.filter(public_id=draft_id).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert tus.patch(client, url, 5000, data[5000:6000]).status_code == 410
    call_command("uploads_expire")
    assert SubmissionDraft.objects.get(public_id=draft_id).state == "EXPIRED"
    assert _held_bytes(uploads_dir) == 0 and DraftFile.objects.count() == 0


def test_another_owners_upload_is_not_found(client, owner, uploads_dir, tiny_dir):
    draft_id = _draft(client, tiny_dir)
    url = tus.create_upload(client, draft_id, "config.json", (tiny_dir / "config.json").stat().st_size)["Location"]
    other = get_user_model().objects.create_user("o@example.org", "o@example.org", "pw-long-enough-42")
    client.force_login(other)
    assert client.head(url, headers=tus.TUS).status_code == 404
    assert tus.create_upload(client, draft_id, "tokenizer.json", 10).status_code == 404
    assert client.get(f"/api/submissions/{draft_id}/").status_code == 404
    client.logout()
    assert client.head(url, headers=tus.TUS).status_code == 401


def test_a_signed_in_browser_needs_the_csrf_token(owner, uploads_dir, tiny_dir):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(owner)
    browser.get("/leaderboard/accounts/")  # sets the csrftoken cookie
    csrf = {"X-CSRFToken": browser.cookies["csrftoken"].value}
    assert tus.create_draft(browser, tus.declared(tiny_dir)).status_code == 403
    draft_id = tus.create_draft(browser, tus.declared(tiny_dir), headers=csrf).json()["id"]
    size = (tiny_dir / "config.json").stat().st_size
    assert tus.create_upload(browser, draft_id, "config.json", size).status_code == 403
    url = tus.create_upload(browser, draft_id, "config.json", size, headers=csrf)["Location"]
    data = (tiny_dir / "config.json").read_bytes()
    assert tus.patch(browser, url, 0, data).status_code == 403
    assert tus.patch(browser, url, 0, data, headers=csrf).status_code == 204
    assert browser.head(url, headers=tus.TUS).status_code == 200  # reads need no token


def test_the_last_files_upload_created_while_a_chunk_finishes_does_not_finalize(client, owner, uploads_dir, tiny_dir):
    """The race the browser met: a small file's last chunk finds every upload complete (the weights'
    upload does not exist yet), the weights' upload is created (0 bytes), and then the draft is
    finalized. Finalizing must see the empty file as incomplete, not refuse the checkpoint."""
    draft_id = _draft(client, tiny_dir)
    for path in sorted(tiny_dir.iterdir()):
        if path.suffix != ".safetensors":
            assert tus.send_file(client, draft_id, path.name, path.read_bytes()).status_code == 204
    weights = (tiny_dir / "model.safetensors").read_bytes()
    url = tus.create_upload(client, draft_id, "model.safetensors", len(weights))["Location"]
    draft = SubmissionDraft.objects.get(public_id=draft_id)
    assert transfers.draft_finalize(draft.pk).state == "UPLOADING"  # what the small file's request then called
    assert SubmissionDraft.objects.get(public_id=draft_id).state == "UPLOADING" and Submission.objects.count() == 0
    last = None
    for start in range(0, len(weights), 1 << 20):
        last = tus.patch(client, url, start, weights[start : start + (1 << 20)])
        assert last.status_code == 204
    assert last["Podium-Submission-State"] == "SUBMITTED" and Submission.objects.get().public_id == draft_id


@pytest.mark.parametrize("direct", [True, False])
def test_the_direct_io_setting_decides_whether_a_chunk_passes_the_page_cache(client, owner, uploads_dir, tiny_dir,
                                                                             settings, direct):  # fmt: skip
    """LEADERBOARD_UPLOAD_DIRECT_IO, through a real PATCH: on, a chunk's aligned blocks leave at most the
    last partial page in the page cache; off (NFS), every page of it is cached. Durable either way. (A
    tokenizer file: the part of a weights file's first chunk that came with its header is read back to
    digest its tensors, which caches it.)"""
    uploads_dir.mkdir(parents=True, exist_ok=True)
    skip_unless_page_cache_shows_direct_io(uploads_dir)
    settings.LEADERBOARD_UPLOAD_DIRECT_IO = direct
    data = (tiny_dir / "tokenizer.json").read_bytes()
    assert len(data) >= chunks.DIRECT_MIN
    draft_id = _draft(client, tiny_dir)
    created = tus.create_upload(client, draft_id, "tokenizer.json", len(data))
    assert tus.patch(client, created["Location"], 0, data).status_code == 204
    (stored,) = [p for p in uploads_dir.rglob("tokenizer.json")]
    cache, dirty, writeback = _page_cache(stored, cached=True)  # before anything reads the file
    assert (dirty, writeback) == (0, 0)
    pages = -(-len(data) // 4096)
    if direct:
        assert cache <= 1  # the file's last, partial page
    else:
        assert cache > 1, "the chunk went past the page cache: direct I/O was not turned off"
        if cache < pages:
            pytest.skip(f"{pages - cache} of the file's clean pages were evicted under the test")
        assert cache == pages
    assert stored.read_bytes() == data
