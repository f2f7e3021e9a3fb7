"""Contamination checks on the site: the evaluate task runs the memorisation probe on the real engine
and a tiny real checkpoint, declared training data is scanned by the worker task (with hostile lines
skipped and counted), clean-subset scores, and the system's review flag past a threshold."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError

from evalcore.contamination.items import task_items
from evalcore.contamination.probe import ProbeResult, SplitRate, newcombe_difference
from evalcore.engine import TaskIndex
from evalcore.stats import subset_difference
from leaderboard.evaluation.contamination import flag_check, probe_pending, probe_store
from leaderboard.evaluation.suites import suite_current, suite_plan
from leaderboard.models import (
    ContaminationScan,
    EvaluationRun,
    MemorisationProbe,
    ReviewAction,
    SampleRecord,
    ScanTaskResult,
    Submission,
    TrainingDataFile,
)
from leaderboard.review.services import submission_review
from leaderboard.runs.integrity import CLEAN_ROUNDS, CLEAN_SEED, clean_subset, submission_integrity
from leaderboard.tasks import contamination_scan, submission_evaluate  # noqa: F401 - registered: eager runs them
from tests.leaderboard import board_data as bd
from tests.midp_reference import midp

pytestmark = pytest.mark.django_db
SUITE = [{"task": "gsm8k", "num_fewshot": 0, "limit": 3}]
FORM = {"model_name": "acme/tiny", "precision": "float32", "model_type": "pretrained", "licence": "mit"}


@pytest.fixture
def eager(settings, celery_eager):
    settings.LEADERBOARD_SUITE_TASKS = SUITE
    settings.LEADERBOARD_PROBE_LIMIT = 3


@pytest.fixture
def owner(client):
    user = bd.user("owner@example.org")
    client.force_login(user)
    return user


def gsm8k_texts(limit: int) -> list[str]:
    config = TaskIndex([]).tasks["gsm8k"]
    return [item.text for item in task_items(config, limit=limit)]


def hostile_corpus(settings) -> list[SimpleUploadedFile]:
    """GSM8K test items 0 and 1 copied verbatim, among a binary line, a line too long, a Latin-1 line,
    bad JSON, and a file named .gz that is not gzip."""
    settings.LEADERBOARD_SCAN_MAX_LINE_BYTES = 4096
    texts = gsm8k_texts(2)
    lines = [json.dumps({"text": "an ordinary web page about cooking"}).encode(),
             json.dumps({"text": texts[0]}).encode(), b"\x00\x01\x02binary\xff",
             json.dumps({"text": "x " * 5000}).encode(), "caf\u00e9 cr\u00e8me".encode("latin-1"), b"{not json",
             json.dumps({"text": texts[1]}).encode()]  # fmt: skip
    return [
        SimpleUploadedFile("crawl.jsonl", b"\n".join(lines) + b"\n"),
        SimpleUploadedFile("books.txt.gz", gzip.compress(b"a book with nothing from any benchmark\n")),
        SimpleUploadedFile("broken.txt.gz", b"this is not gzip at all"),
    ]


def test_evaluate_probes_and_declared_data_is_scanned(client, owner, tiny_dir, submissions_dir, eager, settings,
                                                      django_capture_on_commit_callbacks):  # fmt: skip
    files = [SimpleUploadedFile(p.name, p.read_bytes()) for p in sorted(tiny_dir.iterdir())]
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/leaderboard/submit/", {**FORM, "files": files, "training_data": hostile_corpus(settings)})
    assert response.status_code == 302, response.content.decode()[:2000]
    submission = Submission.objects.get()
    assert submission.status == "FINISHED", (submission.failure_reason, submission.log_tail)
    assert sorted(TrainingDataFile.objects.values_list("name", flat=True)) == ["books.txt.gz", "broken.txt.gz", "crawl.jsonl"]

    # The probe ran with the evaluation: 3 test and 3 train items, mid-p intervals, the difference built from them.
    probe = MemorisationProbe.objects.get(submission=submission)
    assert probe.task == "gsm8k" and probe.limit == 3
    test, train = probe.summary["test"], probe.summary["train"]
    assert (test["n"], train["n"], test["split"], train["split"]) == (3, 3, "test", "train")
    for rate in (test, train):
        assert (rate["ci_low"], rate["ci_high"]) == pytest.approx(midp(rate["hits"], rate["n"]), abs=1e-4)
        assert rate["interval"] == "mid-p" and rate["ci_high"] > 0  # never a point, even at 0 of 3
    assert probe.summary["diff_interval"] == "newcombe-mid-p"
    assert probe.difference == pytest.approx(test["rate"] - train["rate"])
    assert probe.diff_ci_low <= probe.difference <= probe.diff_ci_high
    assert probe_pending(submission, suite_plan(suite_current())) == []  # a retry does not probe again
    assert f"memorisation probe gsm8k: test {test['hits']}/3, train {train['hits']}/3" in submission.log_tail

    # The scan ran on a worker task: both planted items found, every hostile line skipped and counted.
    scan = ContaminationScan.objects.get(submission=submission)
    assert (scan.kind, scan.status, scan.n) == ("declared", "FINISHED", 13)
    result = ScanTaskResult.objects.get(scan=scan)
    assert (result.task, result.items, result.flagged, result.flagged_doc_ids) == ("gsm8k", 3, 2, [0, 1])
    assert result.share == pytest.approx(2 / 3)
    corpus = scan.report["corpus"]
    assert corpus["skipped"] == {"bad_json": 1, "binary": 1, "decode_error": 1, "line_too_long": 1}
    assert len(corpus["failed_files"]) == 1 and corpus["failed_files"][0]["path"].endswith("broken.txt.gz")

    # 2 of 3 items flagged is past LEADERBOARD_SCAN_FLAG_SHARE: flagged for review by "system".
    assert submission.review_state == "flagged" and "n-gram scan" in submission.review_reason
    entry = ReviewAction.objects.get(submission=submission)
    assert (entry.admin, entry.action) == (None, "flag") and "found 2 of 3 gsm8k items" in entry.comment

    # The submission page and the protocol page show the probe, the scan and the clean-subset score.
    run = EvaluationRun.objects.get(submission=submission)
    values = [SampleRecord.objects.get(run=run, doc_id=d).payload["metrics"]["exact_match,strict-match"] for d in range(3)]
    for url in (f"/leaderboard/submissions/{submission.public_id}/", f"/leaderboard/runs/{run.pk}/"):
        page = client.get(url).content.decode()
        assert "Memorisation probe" in page and f"{test['hits']}/3" in page and "probe-difference" in page
        assert "Declared training data" in page and "4 lines skipped" in page and "broken.txt.gz" in page
        assert "Clean-subset scores" in page and f"{values[2]:.4f}" in page and "n=1" in page
        assert str(submissions_dir.parent) not in page  # the owner never sees server folders
    clean = submission_integrity(submission)["clean"][0]
    assert (clean["n"], clean["flagged"], clean["clean_n"]) == (3, 2, 1)
    assert clean["clean"] == values[2] and clean["full"] == pytest.approx(sum(values) / 3)


def test_training_data_uploads_are_checked_before_anything_is_stored(client, owner, tiny_dir, submissions_dir,
                                                                     eager, settings,
                                                                     django_capture_on_commit_callbacks):  # fmt: skip
    settings.LEADERBOARD_TRAINING_DATA_MAX_BYTES = 1000
    bad = [
        ([SimpleUploadedFile("weights.exe", b"MZ\x90\x00")], "ending in .txt"),
        ([SimpleUploadedFile(".hidden.txt", b"x")], "name it with letters"),
        ([SimpleUploadedFile("a b.txt", b"x")], "name it with letters"),
        ([SimpleUploadedFile("x.txt", b"a"), SimpleUploadedFile("x.txt", b"b")], "given twice"),
        ([SimpleUploadedFile("big.txt", b"w " * 600)], "the limit is 1000"),
        ([SimpleUploadedFile("empty.txt", b"")], "empty"),
        ([SimpleUploadedFile(f"f{i}.txt", b"x") for i in range(17)], "At most 16"),
    ]
    for uploads, message in bad:
        files = [SimpleUploadedFile(p.name, p.read_bytes()) for p in sorted(tiny_dir.iterdir())]
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            response = client.post("/leaderboard/submit/", {**FORM, "files": files, "training_data": uploads})
        assert response.status_code == 400 and message in response.content.decode(), message
        assert not callbacks and not Submission.objects.exists() and not ContaminationScan.objects.exists()
    assert not (submissions_dir.exists() and any(submissions_dir.rglob("*")))
    assert not settings.LEADERBOARD_TRAINING_DATA_DIR.exists()


def test_admin_scan_command_refuses_bad_input_and_scans_a_corpus(owner, tmp_path, settings, eager,
                                                                  django_capture_on_commit_callbacks):  # fmt: skip
    admin = bd.user("admin@example.org", staff=True)
    submission = bd.entry(owner, "acme/scanned", gsm8k=bd.pattern(3, 2))
    (tmp_path / "empty").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "data.csv").write_text("a,b\n")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "dump.txt.gz").write_bytes(b"\x1f\x8b\x08truncated")  # gzip magic, then nothing readable
    (corpus / "pages.txt").write_bytes(b"\xff\xfe\x00b\x00i\x00n\x00\n" + gsm8k_texts(3)[2].encode() + b"\n")
    refused = [
        (["nosuchpublicid00000000", "--corpus", str(corpus)], "no submission"),
        ([submission.public_id, "--corpus", "relative/path"], "must be absolute"),
        ([submission.public_id, "--corpus", str(tmp_path / "missing")], "No corpus to scan"),
        ([submission.public_id, "--corpus", str(tmp_path / "empty")], "No corpus to scan"),
        ([submission.public_id, "--corpus", str(tmp_path / "other")], "No corpus to scan"),
        ([submission.public_id, "--corpus", str(corpus), "--n", "20"], "between 8 and 13"),
        ([submission.public_id, "--corpus", str(corpus), "--by", "owner@example.org"], "no staff user"),
        ([submission.public_id, "--corpus", "\x00"], "Name the corpus"),
    ]
    for args, message in refused:
        with pytest.raises(CommandError, match=message):
            call_command("contamination_scan", *args)
    assert not ContaminationScan.objects.exists()
    settings.LEADERBOARD_SCAN_FLAG_SHARE = 0.5  # 1 of 3 items: reported, not flagged
    with django_capture_on_commit_callbacks(execute=True):
        call_command("contamination_scan", str(submission.pk), "--corpus", str(corpus), "--by", admin.username)
    scan = ContaminationScan.objects.get()
    assert (scan.status, scan.kind, scan.requested_by, scan.corpus) == ("FINISHED", "corpus", admin, str(corpus))
    assert scan.report["corpus"]["skipped"] == {"binary": 1} and len(scan.report["corpus"]["failed_files"]) == 1
    assert ScanTaskResult.objects.get(scan=scan).flagged_doc_ids == [2]
    submission.refresh_from_db()
    assert submission.review_state == "none" and not ReviewAction.objects.exists()

    # The corpus is gone by the time the worker runs the scan: FAILED with the reason, nothing stored.
    gone = tmp_path / "gone.txt"
    gone.write_text("text\n")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        call_command("contamination_scan", submission.public_id, "--corpus", str(gone))
    gone.unlink()
    for callback in callbacks:
        callback()
    failed = ContaminationScan.objects.latest("id")
    assert failed.status == "FAILED" and "gone.txt" in failed.failure_reason and not failed.task_results.exists()


def _probe_result(task: str, test_hits: int, train_hits: int, n: int = 100) -> ProbeResult:
    rates = []
    for split, hits in (("test", test_hits), ("train", train_hits)):
        low, high = midp(hits, n)
        rates.append(SplitRate(split, n, hits, hits / n, low, high, 0))
    d, low, high = newcombe_difference(*rates)
    return ProbeResult(task, 8, 0.95, rates[0], rates[1], d, low, high, ())


def test_probe_past_threshold_flags_for_review_as_system(client, owner, settings):
    admin = bd.user("admin@example.org", staff=True)
    quiet = bd.entry(owner, "acme/quiet", gsm8k=bd.pattern(10, 5))
    loud = bd.entry(owner, "acme/loud", gsm8k=bd.pattern(10, 5))
    probe_store(quiet, _probe_result("gsm8k", 2, 1), limit=100)  # +1 pp [-3.2, +5.6]: no evidence
    probe_store(loud, _probe_result("gsm8k", 30, 1), limit=100)  # +29 pp [+19.8, +38.6]
    assert flag_check(quiet.pk) == [] and Submission.objects.get(pk=quiet.pk).review_state == "none"
    reasons = flag_check(loud.pk)
    assert len(reasons) == 1 and "test 30/100 vs train 1/100" in reasons[0]
    loud.refresh_from_db()
    assert loud.review_state == "flagged" and loud.review_reason.startswith("contamination: memorisation probe")
    assert flag_check(loud.pk) == reasons and ReviewAction.objects.filter(submission=loud).count() == 1  # logged once
    client.force_login(admin)
    queue = client.get("/leaderboard/review/").content.decode()
    assert "acme/loud" in queue and "acme/quiet" not in queue
    assert "system" in client.get(f"/leaderboard/review/{loud.public_id}/").content.decode()
    submission_review(submission=loud, admin=admin, action="approve", comment="a known public dataset overlap")
    settings.LEADERBOARD_PROBE_FLAG_DIFF_LOW = 0.3  # a stricter threshold: no longer past it
    assert flag_check(loud.pk) == [] and Submission.objects.get(pk=loud.pk).review_state == "approved"


def test_clean_subset_score_and_paired_difference(client, owner):
    submission = bd.entry(owner, "acme/clean", gsm8k=bd.pattern(30, 20))
    run = EvaluationRun.objects.get(submission=submission)
    values = np.array([SampleRecord.objects.get(run=run, doc_id=d).payload["metrics"]["exact_match,strict-match"]
                       for d in range(30)])  # fmt: skip
    flagged = {d for d in range(30) if values[d] == 1.0 and d % 2 == 0}
    assert clean_subset(run, set()) is None and clean_subset(run, {99}) is None  # nothing evaluated is flagged
    row = clean_subset(run, flagged)
    keep = np.array([d not in flagged for d in range(30)])
    expected = subset_difference(values, keep, rng=np.random.default_rng(CLEAN_SEED), rounds=CLEAN_ROUNDS)
    assert (row["n"], row["flagged"], row["clean_n"]) == (30, len(flagged), 30 - len(flagged))
    assert row["clean"] == pytest.approx(values[keep].mean()) and row["full"] == pytest.approx(values.mean())
    assert row["difference"] == pytest.approx(values[keep].mean() - values.mean())
    assert (row["diff_ci_low"], row["diff_ci_high"]) == (expected.ci_low, expected.ci_high)
    assert row["diff_ci_high"] < 0 and row["distinguishable"]  # the flagged items were the right ones
    every = clean_subset(run, set(range(30)))
    assert every["clean"] is None and every["clean_n"] == 0

    # On the board: the cell shows the clean-subset score and the difference once a scan has finished.
    assert "clean-subset" not in client.get("/leaderboard/").content.decode()
    scan = ContaminationScan.objects.create(submission=submission, kind="corpus", corpus="/c", n=13, status="FINISHED",
                                            report={"corpus": {"files": 1}})  # fmt: skip
    ScanTaskResult.objects.create(scan=scan, task="gsm8k", items=30, flagged=len(flagged), share=len(flagged) / 30,
                                  flagged_doc_ids=sorted(flagged))  # fmt: skip
    board = client.get("/leaderboard/").content.decode()
    assert "clean-subset" in board and f"clean {row['clean']:.3f} (Δ {row['difference']:.3f}" in board


def test_staff_scan_page_refuses_bad_input_and_queues_a_scan(client, owner, tmp_path, eager,
                                                             django_capture_on_commit_callbacks):  # fmt: skip
    submission = bd.entry(owner, "acme/page-scanned", gsm8k=bd.pattern(3, 1))
    url = f"/leaderboard/review/{submission.public_id}/scan/"
    assert client.get(url).status_code == 404  # the owner is not staff: no one learns the page exists
    client.logout()
    assert client.get(url).status_code == 302  # anonymous: log in first
    client.force_login(bd.user("admin@example.org", staff=True))
    assert client.get(url).status_code == 200 and client.get("/leaderboard/review/" + "x" * 22 + "/scan/").status_code == 404
    (tmp_path / "nothing").mkdir()
    corpus = tmp_path / "crawl.jsonl.gz"
    corpus.write_bytes(gzip.compress(json.dumps({"text": gsm8k_texts(1)[0]}).encode() + b"\n\xc3\x28\n"))
    bad = [({"corpus": ""}, "required"), ({"corpus": "data/crawl"}, "must be absolute"),
           ({"corpus": "/x\x00y"}, "Null characters"), ({"corpus": "/" + "a" * 1200}, "at most 1000"),
           ({"corpus": str(tmp_path / "missing.txt")}, "No corpus to scan"),
           ({"corpus": str(tmp_path / "nothing")}, "No corpus to scan"),
           ({"corpus": str(corpus), "n": "7"}, "greater than or equal to 8"),
           ({"corpus": str(corpus), "n": "thirteen"}, "whole number")]  # fmt: skip
    for data, message in bad:
        response = client.post(url, data)
        assert response.status_code == 400 and message in response.content.decode(), (data, message)
    assert not ContaminationScan.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, {"corpus": str(corpus), "n": "13"})
    assert response.status_code == 302
    scan = ContaminationScan.objects.get()
    assert (scan.status, scan.requested_by.username, scan.report["corpus"]["skipped"]) == (
        "FINISHED", "admin@example.org", {"decode_error": 1})
    assert ScanTaskResult.objects.get(scan=scan).flagged_doc_ids == [0]
    page = client.get(f"/leaderboard/submissions/{submission.public_id}/").content.decode()
    assert str(corpus) in page  # staff see the corpus path
    submission.refresh_from_db()  # 1 of 3 items is past the 5% threshold: flagged, logged as "system"
    assert submission.review_state == "flagged" and ReviewAction.objects.get(submission=submission).admin is None
