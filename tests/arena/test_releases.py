"""Data releases: Parquet files read back with pyarrow and with `datasets`, no planted personal data in
them, held-back battles left out and counted, checksums that verify, the ratings reproduced by
`python -m evalcore rate` from the release's votes, the command, the page and the staff button."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta

import pyarrow.parquet as pq
import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from arena.models import BattleHold, DataRelease, RatingSnapshot, Turn
from arena.play.base import ArenaError
from arena.publication.holds import battles_moderate
from arena.publication.releases import release_build
from arena.ratings.refit import snapshots_refit
from arena.tasks import release_build as release_task  # noqa: F401 - registered: the eager button runs it
from tests.arena.vote_data import votes_create
from tests.conftest import REPO_ROOT
from tests.leaderboard import board_data as bd

pytestmark = pytest.mark.django_db

STRENGTHS = {"alpha": 0.6, "beta": 0.0, "gamma": -0.4}
ROUNDS, SEED = 20, 5
EMAIL, KEY = "secret.person@example.org", "AKIA" + "Q" * 16


@pytest.fixture
def arena(settings):
    settings.ARENA_PUBLISH_DELAY_S = 3600
    votes = votes_create(STRENGTHS, 120, seed=2, start=timezone.now() - timedelta(days=2), with_turns=True)
    Turn.objects.filter(battle=votes[0].battle).update(prompt=f"my mail is {EMAIL}", answer_a=f"key {KEY}")
    Turn.objects.filter(battle=votes[1].battle).update(prompt="you are a stupid worthless piece of shit")
    battles_moderate()
    snapshots_refit(rounds=ROUNDS, seed=SEED, elo_orders=10, min_votes=1)
    return votes


def test_a_release_reads_back_and_reproduces_the_ratings(arena, tmp_path):
    release = release_build(out=tmp_path)
    folder = tmp_path / release.version
    assert release.path == str(folder) and sorted(p.name for p in folder.iterdir()) == ["README.md", "SHA256SUMS", "data"]
    battles = pq.read_table(folder / "data" / "battles.parquet").to_pylist()
    votes = pq.read_table(folder / "data" / "votes.parquet")
    assert votes.num_rows == 120 and release.counts["votes"] == 120
    assert len(battles) == 119 == release.counts["battles"]  # one held back by moderation
    assert str(arena[1].battle.public_id.hex) not in {b["question_id"] for b in battles}
    assert release.counts["held_back"]["moderation:held"] == 1
    everything = json.dumps(battles)
    assert EMAIL not in everything and KEY not in everything and "<EMAIL>" in everything and "<SECRET>" in everything
    first = next(b for b in battles if b["question_id"] == arena[0].battle.public_id.hex)
    assert first["conversation_a"][0] == {"role": "user", "content": "my mail is <EMAIL>"}
    assert first["conversation_a"][1]["role"] == "assistant"

    card = (folder / "README.md").read_text()
    assert card.startswith("---\nlicense: cc-by-4.0") and "config_name: battles" in card and "moderation:held | 1" in card
    checked = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=folder, capture_output=True, text=True)
    assert checked.returncode == 0 and checked.stdout.count(": OK") == 4

    argv = [sys.executable, "-m", "evalcore", "rate", str(folder / "data" / "votes.parquet"), "--method", "bt",
            "--bootstrap", str(ROUNDS), "--seed", str(SEED), "--format", "json"]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    expected = {row["model"]: row for row in json.loads(done.stdout)["ratings"]}
    snapshot = RatingSnapshot.objects.get(method="bt", category="overall")
    ratings = [r for r in pq.read_table(folder / "data" / "ratings.parquet").to_pylist()
               if r["method"] == "bt" and r["category"] == "overall"]  # fmt: skip
    assert [r["model"] for r in ratings] == [r["model"] for r in snapshot.rows] == list(expected)
    for row in ratings:
        for key in ("rating", "ci_low", "ci_high"):
            assert row[key] == pytest.approx(expected[row["model"]][key], abs=1e-4), key


def test_datasets_loads_the_release_folder(arena, tmp_path):
    import datasets

    release = release_build(out=tmp_path)
    folder = tmp_path / release.version
    battles = datasets.load_dataset(str(folder), "battles", split="train", cache_dir=str(tmp_path / "cache"))
    votes = datasets.load_dataset(str(folder), "votes", split="train", cache_dir=str(tmp_path / "cache"))
    assert len(battles) == 119 and len(votes) == 120
    assert battles[0]["conversation_a"][0]["role"] == "user"


def test_one_release_per_snapshot(arena, tmp_path):
    release_build(out=tmp_path)
    with pytest.raises(ArenaError, match="exists already"):
        release_build(out=tmp_path)
    assert DataRelease.objects.count() == 1 and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_no_snapshot_no_release(db, tmp_path):
    with pytest.raises(ArenaError, match="No rating snapshot yet"):
        release_build(out=tmp_path)
    with pytest.raises(CommandError, match="No rating snapshot yet"):
        call_command("arena_release", "--out", str(tmp_path))
    (tmp_path / "file").write_text("x")
    with pytest.raises(CommandError, match="is a file"):
        call_command("arena_release", "--out", str(tmp_path / "file"))


def test_the_command_the_page_and_the_staff_button(
    arena, tmp_path, settings, celery_eager, client, django_capture_on_commit_callbacks
):
    settings.ARENA_RELEASES_DIR = tmp_path / "releases"
    call_command("arena_release")
    release = DataRelease.objects.get()
    page = Client().get("/arena/releases/").content.decode()
    assert release.version in page and "SHA256SUMS" in page and release.files[1]["sha256"] in page
    assert "release-new" not in page  # the button is for staff
    download = Client().get(f"/arena/releases/{release.version}/data/votes.parquet")
    assert download.status_code == 200 and download["X-Checksum-SHA256"] == release.files[2]["sha256"]
    assert Client().get(f"/arena/releases/{release.version}/../../etc/passwd").status_code == 404
    assert Client().get(f"/arena/releases/{release.version}/data/other.parquet").status_code == 404
    assert Client().post("/arena/releases/new/").status_code == 403
    snapshots_refit(rounds=ROUNDS, seed=SEED, elo_orders=10, min_votes=1, force=True)
    client.force_login(bd.user("admin@example.org", staff=True))
    assert "release-new" in client.get("/arena/releases/").content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/arena/releases/new/")
    assert response.status_code == 302 and DataRelease.objects.count() == 2
    assert BattleHold.objects.count() == 1


def test_pruning_keeps_the_snapshot_a_release_was_built_on(arena, tmp_path, monkeypatch):
    """A release protects its snapshot; refits past the kept window prune around it instead of failing."""
    release = release_build(out=tmp_path)
    monkeypatch.setattr("arena.ratings.refit.KEEP_PER_KEY", 1)
    for seed in (3, 4):  # new votes each time: a refit with nothing new writes no snapshot
        votes_create(STRENGTHS, 10, seed=seed, start=timezone.now() - timedelta(hours=seed))
        snapshots_refit(rounds=ROUNDS, seed=SEED, elo_orders=10, min_votes=1)
    assert RatingSnapshot.objects.filter(pk=release.snapshot_id).exists()
    kept = RatingSnapshot.objects.filter(method=release.snapshot.method, category=release.snapshot.category)
    assert kept.count() == 2  # the newest one and the release's
