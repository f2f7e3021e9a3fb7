"""The vote path on the embedded default (SQLite, no Redis): the hand-written battle query, its
timestamps and refusals behave as on PostgreSQL; the live board's counts (votes cast before and after a
refit) add up to a full aggregation of the counted votes."""

from __future__ import annotations

import json

from tests.conftest import clean_env, run_manage

SCRIPT = """
import json, uuid
from arena.play import base
from arena.votes import casting
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
        casting.vote_cast(**kwargs)
    except base.ArenaError as exc:
        out[label] = [exc.status, str(exc)]
vote = casting.vote_cast(public_id=battle.public_id.hex, winner="model_a", session_hash="s", ip_hash="i")
out["vote"] = [vote.model_a_name, vote.model_b_name, vote.counted, vote.excluded_reason]
try:
    casting.vote_cast(public_id=battle.public_id, winner="tie", session_hash="s", ip_hash="i")
except base.ArenaError as exc:
    out["second"] = [exc.status, str(exc)]
row = Vote.objects.get()
out["row"] = [row.battle_started_at == battle.created_at, row.style_a["headers"], row.turn_count]
out["status"] = Battle.objects.get().status
print(json.dumps(out))
"""

LIVE_SCRIPT = """
import json
from arena.ratings import live
from arena.votes import casting, selectors

from arena.models import Battle, LanguageModel, LiveRating, Turn
from arena.ratings.refit import snapshots_refit
from arena.ratings.draft import categories_of, category_battles
from evalcore.ratings import aggregate
models = [LanguageModel.objects.create(name=n, in_arena=True) for n in ("m-one", "m-two", "m-three")]
WINNERS = ["model_a", "model_b", "tie", "model_a", "tie (bothbad)"]
def cast(k):
    a, b = models[k % 3], models[(k + 1 + k // 3) % 3]
    if a == b:
        b = models[(k + 2) % 3]
    battle = Battle.objects.create(model_a=a, model_b=b, session_hash=f"s{k}", ip_hash="i")
    prompt = ("Tell me about rivers " * (300 if k % 4 == 0 else 1)) + str(k)
    Turn.objects.create(battle=battle, index=0, prompt=prompt, answer_a="Fine.", answer_b="Sure.",
                        status_a="done", status_b="done")
    casting.vote_cast(public_id=battle.public_id, winner=WINNERS[k % 5], session_hash=f"s{k}", ip_hash="i")
def same(a, b):
    key = lambda c: sorted(zip(c.i.tolist(), c.j.tolist(), *(x.tolist() for x in c.cells().T)))
    return a is not None and a.models == b.models and key(a) == key(b)
def check():
    votes = selectors.votes_counted_columns()
    counts = live.live_counts()
    return {c: same(counts.counts.get(c), aggregate(category_battles(votes, m)))
            for c, m in categories_of(votes, 1).items() if m.any()}
out = {}
for k in range(12):
    cast(k)
out["before"] = check()
snapshots_refit(rounds=10, min_votes=1, force=True)
for k in range(12, 20):
    cast(k)
out["after"] = check()
out["live"] = live.live_refit(min_votes=1)["votes"]
out["rows"] = len(LiveRating.objects.get(category="overall").rows)
print(json.dumps(out))
"""


def test_vote_on_sqlite(sqlite_var_dir):
    env = clean_env(PODIUM_VAR_DIR=str(sqlite_var_dir))
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
    # The live counts on the same database (arena.ratings.live): before a refit every vote comes from SQL,
    # after it the refit's base plus the votes since.
    result = run_manage("shell", "-c", LIVE_SCRIPT, env={**env, "ARENA_REFIT_ON_VOTE_MAX_VOTES": "0"})
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["before"] and all(out["before"].values()), out
    assert {"overall", "long_prompt"} <= set(out["after"]) and all(out["after"].values()), out
    assert out["live"] == 20 and out["rows"] == 3  # the identity-revealing vote above is not counted
