"""A refit in a real Celery prefork worker: its fits run in forked processes (a prefork child is a
daemon, which ``multiprocessing`` would refuse), and the snapshots equal an in-process refit's."""

from __future__ import annotations

import pytest
from django.db import connection

from arena.models import RatingSnapshot
from arena.ratings import selectors as rating_selectors
from arena.ratings.refit import snapshots_compute
from tests.arena.vote_data import votes_create
from tests.conftest import clean_env, database_url_of, run_manage
from tests.leaderboard.polling import wait_for_row

STRENGTHS = {"alpha": 0.8, "beta": 0.0, "gamma": -0.5, "delta": -1.0}


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_a_prefork_worker_refits_with_forked_fits(redis_url, start_worker, processes, tmp_path):
    votes_create(STRENGTHS, 400, seed=31, language=["en", "de"])
    env = clean_env(
        DJANGO_SETTINGS_MODULE="config.settings.dev",
        DATABASE_URL=database_url_of(connection),
        CELERY_BROKER_URL=redis_url,
        PODIUM_VAR_DIR=str(tmp_path),
        ARENA_REFIT_ROUNDS="200",
    )
    worker = start_worker(env=env, queues="default", name="refit", concurrency=2)
    sent = run_manage("shell", "-c", "from arena.tasks import ratings_refit; ratings_refit.delay(force=True)", env=env,
                      timeout=120)  # fmt: skip
    assert sent.returncode == 0, sent.stderr
    wait_for_row(lambda: RatingSnapshot.objects.filter(method="style", category="language:de").count(), bool,
                 timeout=180, what="the worker's refit", log=lambda: processes.log_of(worker))  # fmt: skip
    stored = {(s.method, s.category): s for s in RatingSnapshot.objects.all()}
    assert len(stored) == 18  # overall, multi_turn, long_prompt, no_ties, two languages x bt, elo, style
    params = rating_selectors.snapshot_latest("bt").settings["refit"]
    assert params["rounds"] == 200
    _, drafts, _ = snapshots_compute(params)  # here, in this process
    for draft in drafts:
        snapshot = stored[(draft.method, draft.category)]
        assert [r["model"] for r in snapshot.rows] == [r["model"] for r in draft.rows]
        for got, want in zip(snapshot.rows, draft.rows):
            for key in ("rating", "ci_low", "ci_high"):
                assert got[key] == pytest.approx(want[key], abs=1e-4), (draft.method, draft.category, key)
    assert "Traceback" not in processes.log_of(worker)
