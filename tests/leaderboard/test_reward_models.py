"""Reward models on the board: ``manage.py reward_import`` stores an ``evalcore reward --out`` folder after
recomputing its figures (a tampered or malformed one is refused, nothing stored), /leaderboard/rewards/
lists each model's accuracy and mid-p interval overall and per category (compared only on the same
pairs), linked from the navigation, and reward-models.csv / .json carry the same figures."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from evalcore.reward.pairs import PairsFile
from evalcore.reward.scoring import PairReward, outcome_of, reward_report
from leaderboard.models import RewardModelResult
from tests.midp_reference import midp

pytestmark = pytest.mark.django_db
FILES = [PairsFile("llmbar", "llmbar.json", "a" * 64, 6), PairsFile("mt-bench", "mt.jsonl", "b" * 64, 4)]



def out_folder(tmp_path, name: str, margins: list[float], files=FILES, kind="classifier"):
    """What ``evalcore reward --out`` writes, for rewards chosen = 1 + margin, rejected = 1."""
    folder = tmp_path / name
    folder.mkdir()
    ids = [f"{f.category}/{i}" for f in files for i in range(f.pairs)]
    records = [
        PairReward(pid, pid.split("/")[0], 1, "ok", 1.0 + m, 1.0, outcome_of(1.0 + m, 1.0))
        for pid, m in zip(ids, margins)
    ]
    report = {"kind": kind, "model": {"backend": "hf", "name": name, "weights_sha256": "c" * 64},
              "protocol": {"interval": "mid-p", "beta": 0.1 if kind == "dpo" else None}, **reward_report(records, files)}  # fmt: skip
    (folder / "report.json").write_text(json.dumps(report))
    (folder / "rewards.jsonl").write_text("".join(json.dumps(r.as_dict()) + "\n" for r in records))
    return folder


# rm-good: 8 of 10 correct (llmbar 5/6, mt-bench 3/4); rm-tie: 4 correct, 2 ties
GOOD = [1, 1, 1, 1, 1, -1, 1, 1, 1, -1]
TIES = [1, 0, 1, -1, 0, -1, 1, -1, 1, -1]


@pytest.fixture
def imported(tmp_path):
    call_command("reward_import", "rm-good", str(out_folder(tmp_path, "good", GOOD)))
    call_command("reward_import", "rm-tie", str(out_folder(tmp_path, "tie", TIES, kind="dpo")))
    other = [PairsFile("llmbar", "other.json", "d" * 64, 2)]
    call_command("reward_import", "rm-good", str(out_folder(tmp_path, "other", [1, -1], files=other)))


def test_import_and_page(client, imported):
    assert RewardModelResult.objects.count() == 3
    response = client.get("/leaderboard/rewards/")
    page = response.content.decode()
    assert response.status_code == 200 and 'href="/leaderboard/rewards/"' in page  # the navigation links it
    assert page.count('class="reward-board"') == 2  # two sets of pairs, never mixed
    first = page.index("rm-good")
    assert first < page.index("rm-tie")  # sorted by overall accuracy
    low, high = midp(8, 10)
    assert f'0.800 <span class="ci">[{low:.3f}, {high:.3f}]</span>' in page
    low, high = midp(5, 6)
    assert f'0.833 <span class="ci">[{low:.3f}, {high:.3f}]</span>' in page
    assert "n=10, 2 ties" in page and "DPO implicit reward (β 0.1)" in page


def test_reimport_replaces(tmp_path, imported):
    call_command("reward_import", "rm-good", str(out_folder(tmp_path, "again", TIES)))
    assert RewardModelResult.objects.count() == 3
    assert RewardModelResult.objects.get(
        name="rm-good", report__pairs_files__0__sha256="a" * 64
    ).accuracy == pytest.approx(0.4)


def test_downloads(client, imported):
    rows = list(
        csv.DictReader(io.StringIO(client.get("/leaderboard/rewards/reward-models.csv").content.decode()))
    )
    data = json.loads(client.get("/leaderboard/rewards/reward-models.json").content)["rows"]
    assert len(rows) == len(data) == 3 * 3 - 1  # overall + two categories, overall + one category
    good = {
        r["category"]: r for r in data if r["model"] == "rm-good" and r["pairs_key"] == data[0]["pairs_key"]
    }
    assert set(good) == {"overall", "llmbar", "mt-bench"}
    for category, correct, n in (("overall", 8, 10), ("llmbar", 5, 6), ("mt-bench", 3, 4)):
        assert good[category]["accuracy"] == pytest.approx(correct / n, abs=1e-12)
        assert (good[category]["ci_low"], good[category]["ci_high"]) == pytest.approx(midp(correct, n), abs=1e-4)
        assert good[category]["interval"] == "mid-p"
    tie = next(r for r in rows if r["model"] == "rm-tie" and r["category"] == "overall")
    assert (tie["tie"], tie["correct"], tie["kind"], tie["beta"]) == ("2", "4", "dpo", "0.1")
    assert float(tie["ci_low"]) == pytest.approx(midp(4, 10)[0], abs=1e-4) and tie["interval"] == "mid-p"
    assert tie["ci_low"] == repr(RewardModelResult.objects.get(name="rm-tie").report["overall"]["ci_low"])  # written exactly


@pytest.mark.parametrize("url", ["/leaderboard/rewards/", "/leaderboard/rewards/reward-models.csv",
                                 "/leaderboard/rewards/reward-models.json"])  # fmt: skip
def test_query_parameters_are_refused(client, url):
    for query in ("?sort=accuracy", "?x=1&x=2"):
        response = client.get(url + query)
        assert response.status_code == 400 and "parameter" in response.content.decode()
    assert client.post(url).status_code == 405


def _tamper(folder, edit):
    report = json.loads((folder / "report.json").read_text())
    edit(report)
    (folder / "report.json").write_text(json.dumps(report))


@pytest.mark.parametrize(("change", "message"), [
    (lambda f: _tamper(f, lambda r: r["overall"].update(correct=9)), "overall correct (9) does not match"),
    (lambda f: _tamper(f, lambda r: r["categories"]["llmbar"].update(value=0.9)), "llmbar value (0.9) does not match"),
    (lambda f: _tamper(f, lambda r: r.update(kind="oracle")), "kind must be one of"),
    (lambda f: _tamper(f, lambda r: r.pop("pairs_files")), "has no pairs_files"),
    (lambda f: (f / "rewards.jsonl").write_text('{"pair_id": "llmbar/0"'), "is not valid JSON"),
    (lambda f: (f / "rewards.jsonl").write_text(json.dumps({"pair_id": "llmbar/0", "category": "llmbar", "label": 1,
        "status": "ok", "reward_chosen": 2.0, "reward_rejected": 1.0, "outcome": "tie"})), "does not follow from its rewards"),
    (lambda f: (f / "rewards.jsonl").write_text(json.dumps({"pair_id": "x/0", "category": "x", "label": 1,
        "status": "ok", "reward_chosen": "NaN", "reward_rejected": 1.0, "outcome": "tie"})), "must be a finite number"),
    (lambda f: (f / "report.json").unlink(), "report.json does not exist"),
])  # fmt: skip
def test_bad_folders_are_refused(tmp_path, change, message):
    folder = out_folder(tmp_path, "bad", GOOD)
    change(folder)
    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call_command("reward_import", "rm-bad", str(folder))
    assert not RewardModelResult.objects.exists()
    with pytest.raises(CommandError, match="1 to 100 printable"):
        call_command("reward_import", "  ", str(out_folder(tmp_path, "fine", GOOD)))


def test_empty_page(client):
    page = client.get("/leaderboard/rewards/").content.decode()
    assert "No reward model is stored yet" in page


def test_a_real_evalcore_run_imports(client, smollm2_dir, tmp_path):
    """``python -m evalcore reward`` (a DPO policy against itself on the real SmolLM2: every pair a tie)
    then ``reward_import``: the page shows accuracy 0 with its mid-p interval (above 0: 1 - 0.05^(1/3)) and the ties."""
    from evalcore.cli import main

    pairs = tmp_path / "short.json"
    pairs.write_text(
        json.dumps(
            [
                {"input": f"Say {w}.", "output_1": w, "output_2": "No.", "label": 1}
                for w in ("hi", "yes", "ok")
            ]
        )
    )
    out = tmp_path / "out"
    args = f"path={smollm2_dir},device=cpu,threads=1"
    assert (
        main(
            [
                "reward",
                "--model",
                "hf",
                "--model-args",
                args,
                "--ref-model-args",
                args,
                str(pairs),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    call_command("reward_import", "smollm2-dpo-self", str(out))
    result = RewardModelResult.objects.get()
    assert (result.kind, result.accuracy, result.report["overall"]["tie"]) == ("dpo", 0.0, 3)
    page = client.get("/leaderboard/rewards/").content.decode()
    assert result.report["overall"]["ci_high"] == pytest.approx(1 - 0.05 ** (1 / 3), abs=1e-4)
    assert f'0.000 <span class="ci">[0.000, {midp(0, 3)[1]:.3f}]</span>' in page and "n=3, 3 ties" in page


def test_admin_lists_read_only(client, imported):
    from django.contrib.auth import get_user_model

    admin = get_user_model().objects.create_superuser("admin@example.org", "admin@example.org", "pw-admin-42")
    client.force_login(admin)
    listing = client.get("/admin/leaderboard/rewardmodelresult/")
    assert listing.status_code == 200 and "rm-tie" in listing.content.decode()
    assert client.get("/admin/leaderboard/rewardmodelresult/add/").status_code == 403
    pk = RewardModelResult.objects.get(name="rm-tie").pk
    assert (
        client.post(
            f"/admin/leaderboard/rewardmodelresult/{pk}/change/", {"name": "x", "accuracy": "1"}
        ).status_code
        == 403
    )
    assert RewardModelResult.objects.get(pk=pk).accuracy == pytest.approx(0.4)


def test_each_result_downloads_with_its_protocol_and_pairs(client, imported):
    result = RewardModelResult.objects.get(name="rm-tie")
    page = client.get("/leaderboard/rewards/").content.decode()
    assert f'href="/leaderboard/rewards/{result.pk}/report.json"' in page
    data = client.get(f"/leaderboard/rewards/{result.pk}/report.json").json()
    assert data["name"] == "rm-tie" and data["kind"] == "dpo" and data["protocol"]["beta"] == 0.1
    assert len(data["records"]) == 10 and sum(r["outcome"] == "tie" for r in data["records"]) == 2
    assert client.get(f"/leaderboard/rewards/{result.pk}/report.json?x=1").status_code == 400
    assert client.get("/leaderboard/rewards/999999/report.json").status_code == 404
