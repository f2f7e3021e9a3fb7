"""The vote path on the embedded default (SQLite, no Redis): the hand-written battle query, its
timestamps and refusals behave as on PostgreSQL."""

from __future__ import annotations

import json

from tests.conftest import clean_env, run_manage

SCRIPT = """
import json, uuid
from arena import services
from arena.models import Battle, LanguageModel, Turn, Vote
a = LanguageModel.objects.create(name="alpha-model", in_arena=True)
b = LanguageModel.objects.create(name="beta-model", in_arena=True)
battle = Battle.objects.create(model_a=a, model_b=b, session_hash="s", ip_hash="i")
Turn.objects.create(battle=battle, index=0, prompt="Say hi", answer_a="## Hi\\n- one", answer_b="I am alpha-model.",
                    status_a="done", status_b="done")
out = {}
for label, kwargs in {
    "stranger": dict(public_id=battle.public_id, winner="tie", session_hash="other", ip_hash="i"),
    "malformed id": dict(public_id="not-a-uuid", winner="tie", session_hash="s", ip_hash="i"),
    "unknown id": dict(public_id=uuid.uuid4(), winner="tie", session_hash="s", ip_hash="i"),
}.items():
    try:
        services.vote_cast(**kwargs)
    except services.ArenaError as exc:
        out[label] = [exc.status, str(exc)]
vote = services.vote_cast(public_id=str(battle.public_id), winner="model_a", session_hash="s", ip_hash="i")
out["vote"] = [vote.model_a_name, vote.model_b_name, vote.counted, vote.excluded_reason]
try:
    services.vote_cast(public_id=battle.public_id, winner="tie", session_hash="s", ip_hash="i")
except services.ArenaError as exc:
    out["second"] = [exc.status, str(exc)]
row = Vote.objects.get()
out["row"] = [row.battle_started_at == battle.created_at, row.style_a["headers"], row.turn_count]
out["status"] = Battle.objects.get().status
print(json.dumps(out))
"""


def test_vote_on_sqlite(tmp_path):
    env = clean_env(PODIUM_VAR_DIR=str(tmp_path))
    assert run_manage("migrate", "--no-input", env=env).returncode == 0
    result = run_manage("shell", "-c", SCRIPT, env=env)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["stranger"] == [404, "No such battle."]
    assert out["malformed id"] == [404, "No such battle."]
    assert out["unknown id"] == [404, "No such battle."]
    # Side B named a model: the vote is kept but not rated.
    assert out["vote"] == ["alpha-model", "beta-model", False, "identity_revealed"]
    assert out["second"][0] == 409
    assert out["row"] == [True, 1, 1]
    assert out["status"] == "voted"
