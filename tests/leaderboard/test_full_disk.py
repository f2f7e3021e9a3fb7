"""A disk that fills up during an upload or an evaluation leaves a clear error and nothing half-stored.

Real full disks: tmpfs mounts of 1 MiB (the tiny checkpoint is several MB), one for the folder
Django writes incoming files to and one for the submissions folder they are copied into.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from leaderboard.models import EvaluationRun, SampleRecord, Score, Submission
from leaderboard.submissions.services import submission_requeue
from leaderboard.tasks import submission_evaluate
from tests.leaderboard import tus_helpers as tus
from tests.leaderboard.test_submit import PASSWORD, SUBMIT, form_data, uploads

pytestmark = pytest.mark.django_db


@pytest.fixture
def small_disk(small_filesystem):
    """A 1 MiB filesystem."""
    return small_filesystem("1m")


@pytest.fixture
def owner(client):
    user = get_user_model().objects.create_user("owner@example.org", "owner@example.org", PASSWORD)
    client.force_login(user)
    return user


def test_full_temporary_folder_while_receiving(client, owner, tiny_dir, submissions_dir, small_disk, settings):
    settings.FILE_UPLOAD_TEMP_DIR = str(small_disk)
    response = client.post(SUBMIT, form_data(uploads(tiny_dir)))
    assert response.status_code == 507
    assert "ran out of space while receiving the upload; nothing was stored" in response.content.decode()
    assert not Submission.objects.exists()
    assert not submissions_dir.exists()
    assert list(small_disk.iterdir()) == []  # the partial temporary files are gone


def test_full_submissions_folder_while_storing(client, owner, tiny_dir, small_disk, settings, tmp_path):
    settings.LEADERBOARD_SUBMISSIONS_DIR = small_disk
    settings.LEADERBOARD_REQUEST_CACHE_DIR = tmp_path / "request-cache"
    response = client.post(SUBMIT, form_data(uploads(tiny_dir)))
    assert response.status_code == 400
    assert "could not be read and stored (No space left on device)" in response.content.decode()
    assert not Submission.objects.exists()
    leftovers = [p for p in Path(small_disk).rglob("*") if p.is_file()]
    assert leftovers == []
    # The same upload goes through once there is room.
    settings.LEADERBOARD_SUBMISSIONS_DIR = tmp_path / "roomy"
    assert client.post(SUBMIT, form_data(uploads(tiny_dir))).status_code == 302
    assert Submission.objects.count() == 1


def fill(folder: Path) -> Path:
    """Fill the filesystem holding ``folder`` to the last byte; the file to delete to make room."""
    filler = folder / "filler"
    with open(filler, "wb") as out:
        try:
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        except OSError:
            pass
    return filler


def test_full_disk_during_an_evaluation(client, owner, tiny_dir, submissions_dir, small_disk, settings,
                                        django_capture_on_commit_callbacks):  # fmt: skip
    """The worker's local disk (its request cache) is full: the submission fails with a reason that
    says so and leaves no run, score or sample; once there is room, the same worker process evaluates
    it after a requeue."""
    settings.LEADERBOARD_SUITE_TASKS = [{"task": "mmlu_cloze_abstract_algebra", "num_fewshot": 0, "limit": 4}]
    settings.LEADERBOARD_REQUEST_CACHE_DIR = small_disk
    with django_capture_on_commit_callbacks(execute=False):  # run below in this process, as a worker would
        assert client.post(SUBMIT, form_data(uploads(tiny_dir))).status_code == 302
    submission = Submission.objects.get()
    filler = fill(small_disk)

    assert submission_evaluate(submission.pk) == "failed"
    failed = Submission.objects.get()
    assert failed.status == "FAILED"
    assert "out of disk space" in failed.failure_reason, failed.failure_reason
    assert not EvaluationRun.objects.exists() and not SampleRecord.objects.exists() and not Score.objects.exists()

    filler.unlink()
    with django_capture_on_commit_callbacks(execute=False):
        submission_requeue(failed)
    assert submission_evaluate(submission.pk) == "finished"
    done = Submission.objects.get()
    assert done.status == "FINISHED" and done.failure_reason == ""
    assert EvaluationRun.objects.filter(status="FINISHED").count() == 1
    assert SampleRecord.objects.count() == 4


def test_a_resumable_upload_on_a_full_disk_keeps_the_accepted_offset(client, owner, small_disk, settings, tmp_path, tiny_dir):
    settings.LEADERBOARD_UPLOADS_DIR = small_disk / "uploads"
    settings.LEADERBOARD_SUBMISSIONS_DIR = tmp_path / "submissions"
    draft_id = tus.create_draft(client, tus.declared(tiny_dir)).json()["id"]
    data = (tiny_dir / "model.safetensors").read_bytes()
    assert len(data) > 2 << 20
    url = tus.create_upload(client, draft_id, "model.safetensors", len(data))["Location"]
    assert tus.patch(client, url, 0, data[: 256 << 10]).status_code == 204
    response = tus.patch(client, url, 256 << 10, data[256 << 10 : 2 << 20])
    assert response.status_code == 507 and "ran out of space" in response.json()["detail"]
    assert client.head(url, headers=tus.TUS)["Upload-Offset"] == str(256 << 10)
    assert (small_disk / "uploads" / draft_id / "model.safetensors").stat().st_size == 256 << 10
