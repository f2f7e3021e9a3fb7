"""Scoring a reward model from the site: Admin › Reward model results › "Score a reward model" queues a
task on the ``judge`` queue (PENDING → RUNNING → FINISHED | FAILED with the reason); the worker runs the
same evalcore code as ``python -m evalcore reward`` and stores exactly what ``reward_import`` of that run
stores. Hostile form input is refused on its field, non-staff users get nothing, a second click while one
is live adds nothing, a model that cannot load fails with the reason, and a redelivered task is harmless.
The reward model is SmolLM2-135M-Instruct under a seeded random score head (tests/evalcore/reward/heads.py);
the pairs file is tests/evalcore/reward/data/subset_pairs.json (ours, with RewardBench-style subsets)."""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

import leaderboard.tasks  # noqa: F401 - registers leaderboard.tasks.reward_score with the Celery app
from evalcore.cli import main as evalcore_main
from leaderboard import dispatch
from leaderboard.models import RewardModelResult
from leaderboard.rewards import services
from tests.evalcore.reward.heads import build_reward_head
from tests.leaderboard.board_data import user

pytestmark = pytest.mark.django_db
URL = "/admin/leaderboard/rewardmodelresult/score/"
LIST = "/admin/leaderboard/rewardmodelresult/"
PAIRS = Path(__file__).parents[1] / "evalcore" / "reward" / "data" / "subset_pairs.json"


@pytest.fixture(scope="session")
def reward_head(smollm2_dir, tmp_path_factory) -> Path:
    return build_reward_head(smollm2_dir, tmp_path_factory.mktemp("site-reward-head"))


@pytest.fixture
def stores(tmp_path, settings, smollm2_dir, reward_head) -> dict:
    """PODIUM_MODELS_DIR with ``rm-small`` (the reward head) and ``SmolLM2`` (a causal LM, not a reward
    model); PODIUM_DATA_DIR with ``judges/subsets.json`` and a malformed ``judges/broken.json``."""
    models, data = tmp_path / "models", tmp_path / "data"
    models.mkdir()
    (models / "rm-small").symlink_to(reward_head, target_is_directory=True)
    (models / "SmolLM2").symlink_to(smollm2_dir, target_is_directory=True)
    (data / "judges").mkdir(parents=True)
    shutil.copy(PAIRS, data / "judges" / "subsets.json")
    (data / "judges" / "broken.json").write_text('[{"input": "a", "output_1": "b"}]')
    (tmp_path / "outside.json").write_text(PAIRS.read_text())
    settings.PODIUM_MODELS_DIR, settings.PODIUM_DATA_DIR = models, data
    return {"models": models, "data": data, "root": tmp_path}


@pytest.fixture
def staff_client(client):
    admin = get_user_model().objects.create_superuser("admin@example.org", "admin@example.org", "pw-admin-42")
    client.force_login(admin)
    return client


@pytest.fixture
def sent(monkeypatch) -> list:
    """Sends recorded instead of made (the task is not run)."""
    calls: list = []
    monkeypatch.setattr(dispatch, "reward_score_send", calls.append)
    return calls


def score(client, **fields):
    data = {"name": "", "checkpoint": "rm-small", "kind": "classifier", "reference": "", "beta": "",
            "pairs_file": "judges/subsets.json", "limit": ""}  # fmt: skip
    return client.post(URL, {**data, **fields})


def test_admin_scores_a_reward_model_end_to_end(staff_client, stores, celery_eager, django_capture_on_commit_callbacks):
    page = staff_client.get(LIST).content.decode()
    assert f'href="{URL}"' in page and "Score a reward model" in page  # the button on the list
    assert staff_client.get(URL).status_code == 200
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = score(staff_client)
    assert len(callbacks) == 1  # sent once the request's transaction committed
    assert response.status_code == 302 and response["Location"] == LIST
    result = RewardModelResult.objects.get()
    assert result.status == "finished", result.failure_reason
    assert (result.name, result.kind, result.attempts, result.failure_reason) == ("rm-small", "classifier", 1, "")
    report = result.report
    assert report["overall"]["n"] == 12 and result.accuracy == report["overall"]["value"]
    subsets = report["subsets"]["subsets"]
    assert set(subsets) == {"chat-easy", "chat-hard", "refusals-made-up", "math-small"}
    assert sum(f["n"] for f in subsets.values()) == report["categories"]["subsets"]["n"] == 12
    assert "weighted by each subset's number" in report["category_rule"]
    assert result.request["checkpoint"] == "rm-small" and result.request["pairs_file"] == "judges/subsets.json"

    # exactly what reward_import stores for the same run made by the command line
    out = stores["root"] / "cli-out"
    pairs = stores["data"] / "judges" / "subsets.json"
    assert evalcore_main(["reward", "--model", "hf", "--model-args", f"path={stores['models'] / 'rm-small'}",
                          f"subsets={pairs}", "--out", str(out)]) == 0  # fmt: skip
    call_command("reward_import", "cli-copy", str(out))
    imported = RewardModelResult.objects.get(name="cli-copy")
    assert imported.report == result.report and imported.pairs_key == result.pairs_key
    assert (imported.accuracy, imported.weights_sha256) == (result.accuracy, result.weights_sha256)

    # the page and the report.json link
    board = staff_client.get("/leaderboard/rewards/").content.decode()
    assert "rm-small" in board and "cli-copy" in board and "chat-easy" in board
    rows = staff_client.get("/leaderboard/rewards/reward-models.json").json()["rows"]
    mine = [(r["category"], r["subset"], r["n"]) for r in rows if r["model"] == "rm-small"]
    assert mine == [("overall", "", 12), ("subsets", "", 12), ("subsets", "chat-easy", 4), ("subsets", "chat-hard", 3),
                    ("subsets", "math-small", 3), ("subsets", "refusals-made-up", 2)]  # fmt: skip
    assert "subsets,chat-hard," in staff_client.get("/leaderboard/rewards/reward-models.csv").content.decode()
    body = staff_client.get(f"/leaderboard/rewards/{result.pk}/report.json").json()
    assert body["name"] == "rm-small" and body["subsets"] == report["subsets"] and len(body["records"]) == 12

    # a redelivered task finds it finished and changes nothing
    assert leaderboard.tasks.reward_score.apply(args=[result.pk]).get() == "nothing to do"
    result.refresh_from_db()
    assert result.report == imported.report and result.attempts == 1

    # a live scoring on another worker is left alone (the task comes back later); a silent one is taken over
    RewardModelResult.objects.filter(pk=result.pk).update(status="running", heartbeat_at=timezone.now(), worker="elsewhere:1")
    with pytest.raises(services.RewardScoreBusy):
        services.reward_score_start(result.pk)
    RewardModelResult.objects.filter(pk=result.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    assert services.reward_score_start(result.pk).attempts == 2
    with pytest.raises(CommandError, match="being scored on these pairs on a worker"):  # no import over a live run
        call_command("reward_import", "rm-small", str(out))


def test_dpo_against_itself_with_a_limit(staff_client, stores, celery_eager, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = score(staff_client, name="smol-dpo", checkpoint="SmolLM2", kind="dpo", reference="SmolLM2", limit="2")
    assert response.status_code == 302
    result = RewardModelResult.objects.get()
    assert result.status == "finished", result.failure_reason
    overall = result.report["overall"]
    assert (result.kind, overall["n"], overall["tie"], overall["value"]) == ("dpo", 2, 2, 0.0)  # every reward is 0
    assert result.report["protocol"]["limit"] == 2 and result.report["protocol"]["beta"] == 0.1
    assert list(result.report["subsets"]["subsets"]) == ["chat-easy"]


def test_a_model_that_cannot_load_fails_with_the_reason(staff_client, stores, celery_eager,
                                                        django_capture_on_commit_callbacks):  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        response = score(staff_client, checkpoint="SmolLM2")  # a causal LM given as a classifier
    assert response.status_code == 302
    result = RewardModelResult.objects.get()
    assert result.status == "failed" and result.report == {} and result.accuracy is None
    assert "not a sequence-classification reward model" in result.failure_reason
    assert str(stores["models"]) not in result.failure_reason and str(stores["root"]) not in result.failure_reason
    assert "rm-small" not in staff_client.get("/leaderboard/rewards/").content.decode()
    assert "SmolLM2" not in staff_client.get("/leaderboard/rewards/").content.decode()
    assert staff_client.get(f"/leaderboard/rewards/{result.pk}/report.json").status_code == 404
    change = staff_client.get(f"{LIST}{result.pk}/change/").content.decode()
    assert "not a sequence-classification reward model" in change


def test_a_second_click_while_live_adds_nothing(staff_client, stores, sent):
    first = score(staff_client)
    second = score(staff_client)
    assert first.status_code == second.status_code == 302
    result = RewardModelResult.objects.get()
    assert result.status == "pending" and sent == [result.pk]
    messages = [str(m) for m in staff_client.get(LIST).context["messages"]]
    assert any("queued on the judge queue" in m for m in messages), messages
    assert any("is pending (nothing added)" in m for m in messages), messages
    RewardModelResult.objects.filter(pk=result.pk).update(status="failed", failure_reason="out of memory")
    score(staff_client)  # a failed one is scored again in place
    result.refresh_from_db()
    assert (result.status, result.failure_reason, sent) == ("pending", "", [result.pk, result.pk])
    assert RewardModelResult.objects.count() == 1


@pytest.mark.parametrize(("fields", "field", "message"), [
    ({"checkpoint": "/etc"}, "checkpoint", "relative to PODIUM_MODELS_DIR, without '..'"),
    ({"checkpoint": "../models/rm-small"}, "checkpoint", "without '..'"),
    ({"checkpoint": "rm-small/../../models/rm-small"}, "checkpoint", "without '..'"),
    ({"checkpoint": "no-such-folder"}, "checkpoint", "is not a folder under PODIUM_MODELS_DIR"),
    ({"checkpoint": ""}, "checkpoint", "This field is required"),
    ({"pairs_file": "/etc/passwd"}, "pairs_file", "relative to PODIUM_DATA_DIR"),
    ({"pairs_file": "../outside.json"}, "pairs_file", "without '..'"),
    ({"pairs_file": "judges/none.json"}, "pairs_file", "is not a file under PODIUM_DATA_DIR"),
    ({"pairs_file": "judges"}, "pairs_file", "is not a file under PODIUM_DATA_DIR"),
    ({"pairs_file": "judges/broken.json"}, "pairs_file", "missing field"),
    ({"kind": "dpo"}, "reference", "without '..'"),
    ({"kind": "dpo", "reference": "/abs"}, "reference", "without '..'"),
    ({"reference": "SmolLM2"}, "reference", "for a DPO policy only"),
    ({"kind": "dpo", "reference": "SmolLM2", "beta": "-1"}, "beta", "positive"),
    ({"kind": "oracle"}, "kind", "Select a valid choice"),
    ({"limit": "0"}, "limit", "greater than or equal to 1"),
    ({"limit": "10000000"}, "limit", "from 1 to 100000"),
    ({"name": "x" * 101}, "name", "at most 100 characters"),
])  # fmt: skip
def test_hostile_form_input(staff_client, stores, sent, fields, field, message):
    response = score(staff_client, **fields)
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert field in errors and message in " ".join(errors[field]), errors
    assert RewardModelResult.objects.count() == 0 and sent == []
    assert str(stores["root"]) not in response.content.decode()  # no server path echoed


def test_non_staff_users_get_nothing(client, stores, sent):
    member = user("member@example.org")
    client.force_login(member)
    for response in (client.get(URL), score(client)):
        assert response.status_code == 302 and "/login/" in response["Location"]
    client.logout()
    assert score(client).status_code == 302
    assert RewardModelResult.objects.count() == 0 and sent == []
    with pytest.raises(PermissionDenied):
        services.reward_score_request(name="x", checkpoint="rm-small", kind="classifier",
                                      pairs_file="judges/subsets.json", requested_by=member)  # fmt: skip
    assert RewardModelResult.objects.count() == 0


def test_failure_reason_when_the_folder_went_away(stores, sent, celery_eager):
    staff = user("staff@example.org", staff=True)
    result, queued = services.reward_score_request(name="gone", checkpoint="rm-small", kind="classifier",
                                                   pairs_file="judges/subsets.json", requested_by=staff)  # fmt: skip
    assert queued and sent == [result.pk]
    (stores["models"] / "rm-small").unlink()
    assert leaderboard.tasks.reward_score.apply(args=[result.pk]).get() == "failed"
    result.refresh_from_db()
    assert result.status == "failed" and "rm-small is not a folder under PODIUM_MODELS_DIR" in result.failure_reason
    assert json.dumps(result.report) == "{}"
