"""A battle through the services and views: real model, real PostgreSQL, no names before the vote."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client

from arena.models import Battle, LanguageModel, Turn, Vote
from arena.play import base, generation
from arena.play.identity import salted_hash
from arena.play.selectors import battle_state
from arena.tasks import battle_generate
from arena.votes import casting
from arena.votes import casting as votes
from tests.arena_terms import agree

SMALL = {"max_new_tokens": 24, "temperature": 0.0}


@pytest.fixture(autouse=True)
def fresh_cache():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def arena_models(db, smollm2_dir, settings):
    settings.PODIUM_MODELS_DIR = str(smollm2_dir.parent)
    greedy = LanguageModel.objects.create(
        name="smollm2-greedy",
        backend="hf",
        model_args={"path": smollm2_dir.name},
        generation=SMALL,
        in_arena=True,
    )
    sampled = LanguageModel.objects.create(
        name="smollm2-sampled",
        backend="hf",
        model_args={"path": smollm2_dir.name},
        generation={**SMALL, "temperature": 0.9, "seed": 1},
        in_arena=True,
    )
    return greedy, sampled


def voter() -> Client:
    """A browser that opened /arena/ first, as the page does: it holds the arena session."""
    client = Client()
    assert client.get("/arena/").status_code == 200
    agree(client)
    return client


def start(client: Client, prompt="What is the capital of France?"):
    return client.post("/arena/battles/", {"prompt": prompt})


def finish_turn(battle: Battle, text_a="Paris.", text_b="It is Paris."):
    for turn in battle.turns.all():
        generation.turn_side_finish(turn.pk, "a", text_a)
        generation.turn_side_finish(turn.pk, "b", text_b)


def test_full_battle_with_the_real_model(arena_models, django_capture_on_commit_callbacks):
    client = Client()
    client.get("/arena/")
    agree(client)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = start(client)
    assert response.status_code == 201, response.content
    assert len(callbacks) == 1  # queues both sides once the battle is committed
    public_id = response.json()["battle"]
    body = response.content.decode()
    assert "smollm2" not in body
    battle = Battle.objects.get(public_id=public_id)
    assert battle.model_a_id != battle.model_b_id
    turn = battle.turns.get()
    assert battle_generate(turn.pk, "a") == "done"
    assert battle_generate(turn.pk, "b") == "done"
    assert battle_generate(turn.pk, "a") == "already finished"  # a retried task changes nothing
    turn.refresh_from_db()
    assert "Paris" in turn.answer_a + turn.answer_b
    state = client.get(f"/arena/battles/{public_id}/")
    assert state.status_code == 200 and "smollm2" not in state.content.decode()
    vote = client.post(f"/arena/battles/{public_id}/vote/", {"winner": "model_a"})
    assert vote.status_code == 201, vote.content
    assert {vote.json()["model_a"], vote.json()["model_b"]} == {"smollm2-greedy", "smollm2-sampled"}
    stored = Vote.objects.get(battle=battle)
    assert stored.counted and stored.turn_count == 1 and stored.language == "en"
    assert set(stored.style_a) == {"tokens", "headers", "list_items", "bold"} and stored.style_a["tokens"] > 0
    assert stored.session_hash and stored.ip_hash and stored.ip_hash != "127.0.0.1"
    again = client.post(f"/arena/battles/{public_id}/vote/", {"winner": "model_b"})
    assert again.status_code == 409 and "already has a vote" in again.json()["error"]
    assert Vote.objects.filter(battle=battle).count() == 1
    assert "smollm2" in client.get(f"/arena/battles/{public_id}/").content.decode()  # revealed after


def test_a_failing_side_marks_the_battle_and_does_not_block_the_other(arena_models, smollm2_dir):
    greedy, _ = arena_models
    broken = LanguageModel.objects.create(
        name="broken", backend="hf", model_args={"path": "no-such-model"}, generation=SMALL, in_arena=True
    )
    battle = Battle.objects.create(model_a=broken, model_b=greedy, session_hash="s", ip_hash="i")
    turn = Turn.objects.create(battle=battle, index=0, prompt="Say hello.")
    assert battle_generate(turn.pk, "a") == "failed"
    assert battle_generate(turn.pk, "b") == "done"
    turn.refresh_from_db()
    battle.refresh_from_db()
    assert turn.status_a == "error" and turn.status_b == "done" and turn.answer_b
    assert battle.status == "failed" and battle.excluded_reason == "generation_error"
    with pytest.raises(base.ArenaError, match="failed to answer"):
        casting.vote_cast(public_id=battle.public_id, winner="model_b", session_hash="s", ip_hash="i")


def test_vote_needs_finished_answers_and_a_known_winner(arena_models):
    client = voter()
    public_id = start(client).json()["battle"]
    early = client.post(f"/arena/battles/{public_id}/vote/", {"winner": "model_a"})
    assert early.status_code == 409 and "finished answering" in early.json()["error"]
    bad = client.post(f"/arena/battles/{public_id}/vote/", {"winner": "model_c"})
    assert bad.status_code == 400 and "Unknown vote" in bad.json()["error"]
    assert client.post(f"/arena/battles/{public_id}/vote/", {}).status_code == 400


def test_someone_elses_battle_is_not_found(arena_models):
    owner, stranger = voter(), voter()
    public_id = start(owner).json()["battle"]
    finish_turn(Battle.objects.get(public_id=public_id))
    assert stranger.get(f"/arena/battles/{public_id}/").status_code == 404
    assert stranger.post(f"/arena/battles/{public_id}/vote/", {"winner": "tie"}).status_code == 404
    assert stranger.post(f"/arena/battles/{uuid.uuid4().hex}/vote/", {"winner": "tie"}).status_code == 404
    assert Vote.objects.count() == 0


def test_multi_turn_history_and_turn_limit(arena_models, settings):
    settings.ARENA_MAX_TURNS = 2
    client = voter()
    public_id = start(client, "First question").json()["battle"]
    battle = Battle.objects.get(public_id=public_id)
    busy = client.post(f"/arena/battles/{public_id}/turns/", {"prompt": "too soon"})
    assert busy.status_code == 409 and "Wait until both" in busy.json()["error"]
    finish_turn(battle, "answer A1", "answer B1")
    second = client.post(f"/arena/battles/{public_id}/turns/", {"prompt": "Second question"})
    assert second.status_code == 201 and second.json()["turn"] == 1
    turn = battle.turns.get(index=1)
    assert generation.conversation_for_side(turn, "b") == [
        {"role": "user", "content": "First question"},
        {"role": "assistant", "content": "answer B1"},
        {"role": "user", "content": "Second question"},
    ]
    finish_turn(battle)
    third = client.post(f"/arena/battles/{public_id}/turns/", {"prompt": "Third"})
    assert third.status_code == 409 and "at most 2 turns" in third.json()["error"]
    assert client.post(f"/arena/battles/{public_id}/vote/", {"winner": "tie"}).json()["counted"] is True
    assert Vote.objects.get().turn_count == 2


def test_an_answer_naming_a_model_is_kept_but_not_rated(arena_models):
    client = voter()
    public_id = start(client).json()["battle"]
    finish_turn(Battle.objects.get(public_id=public_id), text_a="I am SmolLM2-Greedy, made by a lab.")
    result = client.post(f"/arena/battles/{public_id}/vote/", {"winner": "model_a"}).json()
    assert result["counted"] is False and result["excluded_reason"] == "identity_revealed"
    assert Vote.objects.get().counted is False


@pytest.mark.parametrize(
    ("prompt", "status", "message"),
    [("", 400, "Type a prompt"), ("   \n ", 400, "Type a prompt"), ("x" * 4001, 400, "too long")],
)
def test_bad_prompts(arena_models, prompt, status, message):
    response = start(voter(), prompt)
    assert response.status_code == status and message in response.json()["error"]
    assert Battle.objects.count() == 0


def test_csrf_is_required():
    client = Client(enforce_csrf_checks=True)
    assert client.post("/arena/battles/", {"prompt": "hi"}).status_code == 403


@pytest.mark.django_db
def test_arena_closed_without_two_models():
    response = start(voter())
    assert response.status_code == 503 and "not open" in response.json()["error"]


def test_rate_limits_answer_429_with_retry_after(arena_models, settings):
    settings.ARENA_BATTLES_PER_MINUTE = 2
    client = voter()
    assert start(client).status_code == 201
    assert start(client).status_code == 201
    refused = start(client)
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert "Too many battles" in refused.json()["error"]
    assert Battle.objects.count() == 2


def test_state_before_the_vote_has_no_names(arena_models):
    client = voter()
    public_id = start(client).json()["battle"]
    battle = Battle.objects.get(public_id=public_id)
    finish_turn(battle)
    state = battle_state(public_id=public_id, session_key=client.session.session_key)
    assert "reveal" not in state
    assert "smollm2" not in str(state)


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_votes_leave_exactly_one(smollm2_dir):
    assert connection.vendor == "postgresql"
    a = LanguageModel.objects.create(name="ma", in_arena=True)
    b = LanguageModel.objects.create(name="mb", in_arena=True)
    battle = Battle.objects.create(model_a=a, model_b=b, session_hash="s", ip_hash="i")
    Turn.objects.create(
        battle=battle, index=0, prompt="p", answer_a="x", answer_b="y", status_a="done", status_b="done"
    )
    barrier = threading.Barrier(2)
    outcomes = []

    def vote(winner):
        from django.db import connection as thread_connection

        barrier.wait()
        try:
            casting.vote_cast(public_id=battle.public_id, winner=winner, session_hash="s", ip_hash="i")
            outcomes.append("accepted")
        except base.ArenaError as exc:
            outcomes.append(f"refused {exc.status}")
        finally:
            thread_connection.close()

    threads = [threading.Thread(target=vote, args=(w,)) for w in ("model_a", "model_b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["accepted", "refused 409"]
    assert Vote.objects.filter(battle=battle).count() == 1


def test_vote_with_redis_sessions_and_limits_survives_a_cache_flush(arena_models, settings, redis_url):
    """Production's pairing (REDIS_URL set): sessions read from Redis and written through to the
    database, rate limits pipelined on Redis. Flushing the cache loses neither the voter nor the vote."""
    from django.core.cache import caches

    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": redis_url, "KEY_PREFIX": uuid.uuid4().hex}
    }  # fmt: skip
    settings.SESSION_ENGINE = "common.sessions"
    settings.ARENA_VOTES_PER_MINUTE = 1
    client = voter()
    client.get("/arena/")
    agree(client)
    public_id = start(client).json()["battle"]
    finish_turn(Battle.objects.get(public_id=public_id))
    from django.contrib.sessions.backends.cached_db import KEY_PREFIX

    session_cache_key = KEY_PREFIX + client.session.session_key
    assert caches["default"].get(session_cache_key) is not None  # read from Redis...
    caches["default"].delete(session_cache_key)  # ...and, once evicted, from the database
    voted = client.post(f"/arena/battles/{public_id}/vote/", {"winner": "model_a"})
    assert voted.status_code == 201, voted.content
    second = start(client).json()["battle"]
    finish_turn(Battle.objects.get(public_id=second))
    refused = client.post(f"/arena/battles/{second}/vote/", {"winner": "tie"})
    assert refused.status_code == 429 and "Too many votes" in refused.json()["error"]
    assert Vote.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_vote_claims_the_battle_only_if_unchanged_since_it_was_read():
    """PostgreSQL's vote path reads without a lock and writes in one statement that claims the battle:
    a battle that got another turn or failed in between is left alone, and the voter gets a refusal."""
    assert connection.vendor == "postgresql" and connection.get_autocommit()
    a = LanguageModel.objects.create(name="model-one", in_arena=True)
    b = LanguageModel.objects.create(name="model-two", in_arena=True)

    def finished_battle():
        battle = Battle.objects.create(model_a=a, model_b=b, session_hash="s", ip_hash="i")
        Turn.objects.create(
            battle=battle, index=0, prompt="p", answer_a="## x", answer_b="y", status_a="done", status_b="done"
        )
        return battle

    # The plain case: one statement marks the battle voted and inserts the vote.
    battle = finished_battle()
    cast = casting.vote_cast(public_id=battle.public_id, winner="tie", session_hash="s", ip_hash="i")
    vote = Vote.objects.get(pk=cast.id)
    assert (cast.model_a_name, cast.model_b_name, vote.winner, vote.turn_count) == ("model-one", "model-two", "tie", 1)
    assert vote.style_a["headers"] == 1 and vote.created_at is not None
    assert vote.battle_started_at == battle.created_at
    assert Battle.objects.get(pk=battle.pk).status == Battle.Status.VOTED
    # A turn added after the read: the claim fails and nothing is written.
    battle = finished_battle()
    stale = votes._vote_context(battle.public_id, session_hash="s", lock=False)
    vote = votes._vote_build(stale, winner="model_a", session_hash="s", ip_hash="i")
    Turn.objects.create(battle=battle, index=1, prompt="more")
    assert votes._vote_save_claiming(stale, vote) is False
    assert not Vote.objects.filter(battle=battle).exists()
    assert Battle.objects.get(pk=battle.pk).status == Battle.Status.ACTIVE
    refused = pytest.raises(base.ArenaError, match="finished answering")
    with refused:
        casting.vote_cast(public_id=battle.public_id, winner="model_a", session_hash="s", ip_hash="i")
    # A side that failed after the read: the same.
    battle = finished_battle()
    stale = votes._vote_context(battle.public_id, session_hash="s", lock=False)
    vote = votes._vote_build(stale, winner="model_b", session_hash="s", ip_hash="i")
    Battle.objects.filter(pk=battle.pk).update(status=Battle.Status.FAILED)
    assert votes._vote_save_claiming(stale, vote) is False
    assert not Vote.objects.filter(battle=battle).exists()
    assert Battle.objects.get(pk=battle.pk).status == Battle.Status.FAILED


def test_an_answer_cut_at_the_token_limit_is_recorded_and_sent(arena_models, monkeypatch):
    """Item 9 of the README demo's issue: the side whose answer stopped at max_new_tokens is marked cut
    (stored, in the voter's snapshot, and in the "done" event), the side that ended by itself is not."""
    greedy, _ = arena_models
    LanguageModel.objects.filter(pk=greedy.pk).update(generation={"max_new_tokens": 2, "temperature": 0.0})
    roomy = LanguageModel.objects.create(
        name="smollm2-roomy", backend="hf", model_args=greedy.model_args,
        generation={"max_new_tokens": 200, "temperature": 0.0}, in_arena=True,
    )  # fmt: skip
    sent = []
    monkeypatch.setattr("arena.tasks.Publisher.__call__", lambda self, kind, **fields: sent.append((kind, fields)))
    battle = Battle.objects.create(model_a=LanguageModel.objects.get(pk=greedy.pk), model_b=roomy,
                                   session_hash=salted_hash("voter-key", purpose="session"), ip_hash="i")  # fmt: skip
    turn = Turn.objects.create(battle=battle, index=0, prompt="What is the capital of France? Answer in one word.")
    before = battle_state(public_id=battle.public_id, session_key="voter-key")
    assert [before["turns"][0][side]["cut"] for side in "ab"] == [False, False]  # nothing known yet
    assert battle_generate(turn.pk, "a") == "done"
    assert battle_generate(turn.pk, "b") == "done"
    turn.refresh_from_db()
    assert (turn.cut_a, turn.cut_b) == (True, False)
    assert turn.answer_a and "Paris" in turn.answer_b
    assert [fields["cut"] for kind, fields in sent if kind == "battle.done"] == [True, False]
    state = battle_state(public_id=battle.public_id, session_key="voter-key")
    assert [state["turns"][0][side]["cut"] for side in "ab"] == [True, False]
    assert "smollm2" not in str(state)  # the mark names no model
    assert battle_state(public_id=battle.public_id, session_key="someone-else") is None
    assert generation.turn_side_finish(turn.pk, "a", "again", cut=False) is False  # done already: unchanged
    turn.refresh_from_db()
    assert turn.cut_a and turn.answer_a != "again"
