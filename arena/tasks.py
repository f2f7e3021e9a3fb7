"""Arena tasks (generation for battles, rating refits) run on the worker runtime."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from asgiref.sync import async_to_sync
from celery import current_app, shared_task
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import worker_process_init, worker_ready
from channels.layers import get_channel_layer
from django.conf import settings
from django.core.cache import cache
from django.db import OperationalError, connections

from arena.categories import services as categories_services
from arena.categories import tagger as categories
from arena.models import LanguageModel
from arena.play import generation
from arena.play.base import SIDES, ArenaError
from arena.play.dispatch import (
    CATEGORIES_PENDING_KEY,
    LIVE_PENDING_KEY,
    REFIT_PENDING_KEY,
    REFIT_PENDING_TIMEOUT_S,
    categories_tag_schedule,
    ratings_live_followup,
    ratings_refit_schedule,
)
from arena.play.streams import battle_group
from arena.publication import releases
from arena.publication.holds import battles_moderate
from arena.publication.redaction import published_redact
from arena.ratings import live
from arena.ratings.refit import snapshots_refit
from arena.votes.voters import voters_flag as voters_flag_run
from common.public_ids import battle_id
from evalcore.models import load_backend
from evalcore.models.base import ChatStream
from workers import metrics
from workers.queues import DEFAULT, GENERATE, JUDGE, LONG_TASK_OPTIONS, generation_queue
from workers.runtime import pool

log = logging.getLogger(__name__)

# What a voter reads when a side fails: nothing that names the model, its backend or its URL.
SIDE_FAILED_MESSAGE = "This model could not answer (an error or a time-out). This battle will not be rated."
SAVE_EVERY_S = 0.5
START_RETRIES = 5


def model_spec(model: LanguageModel) -> tuple[str, tuple]:
    """A hashable key for the worker's model pool; relative paths live under PODIUM_MODELS_DIR."""
    args = dict(model.model_args)
    if "path" in args and not Path(str(args["path"])).is_absolute():
        args["path"] = str(Path(settings.PODIUM_MODELS_DIR) / str(args["path"]))
    return model.backend, tuple(sorted((k, str(v)) for k, v in args.items()))


def load_model(spec: tuple[str, tuple]):
    backend, args = spec
    return load_backend(backend, **dict(args))


class GenerationTimeout(Exception):
    pass


# --- Warm generation workers -----------------------------------------------------------------------
# With ARENA_WORKER_PRELOAD (make demo's arena worker, compose's worker-arena), each process of a worker
# that serves a generate queue loads the arena models answered there as it starts, in a thread, so the
# first battle does not wait for a model to load (seconds on a CPU). A task that needs a model still
# loading waits for it (the pool's lock); a model that fails to load is logged and loaded again by the
# first task that needs it.


def arena_models_preload(queues: set[str]) -> int:
    """Load into this process's pool every battling arena model whose generation queue is in ``queues``;
    how many were loaded (or were loaded already)."""
    loaded = 0
    try:
        models = list(LanguageModel.objects.filter(in_arena=True, retired_at__isnull=True))
    finally:
        connections.close_all()  # this thread's connection: it reads nothing more
    for model in models:
        if generation_queue(model.queue_suffix) not in queues:
            continue
        spec = model_spec(model)
        try:
            pool.get(spec, lambda spec=spec: load_model(spec))
            loaded += 1
        except Exception:  # noqa: BLE001 - the first battle's task loads it again and reports the error
            log.exception("could not preload arena model %s", model.name)
    log.info("preloaded %d arena models for %s", loaded, ", ".join(sorted(queues)))
    return loaded


def _served_generate_queues() -> set[str]:
    consumed = getattr(current_app.amqp.queues, "consume_from", None) or {}
    return {name for name in consumed if name == GENERATE or name.startswith(f"{GENERATE}.")}


def _preload_in_thread() -> None:
    queues = _served_generate_queues()
    if settings.ARENA_WORKER_PRELOAD and queues:
        threading.Thread(target=arena_models_preload, args=(queues,), name="arena-preload", daemon=True).start()


@worker_process_init.connect
def _preload_prefork_child(**_) -> None:
    _preload_in_thread()  # each prefork child has a pool of its own


@worker_ready.connect
def _preload_threads_pool(sender=None, **_) -> None:
    pool_module = type(getattr(sender, "pool", None)).__module__
    if "prefork" not in pool_module:  # solo and threads pools answer in this process
        _preload_in_thread()


@shared_task(
    bind=True,
    name="arena.tasks.battle_generate",
    declared_queue=GENERATE,  # models with their own workers go to generate.<suffix>: see arena.play.dispatch
    soft_time_limit=settings.ARENA_GENERATION_TIMEOUT_S + 60,
    time_limit=settings.ARENA_GENERATION_TIMEOUT_S + 90,
    **LONG_TASK_OPTIONS,
)
def battle_generate(self, turn_id: int, side: str) -> str:
    """Generate one side's answer to a turn, streaming deltas to the battle's browsers."""
    if side not in SIDES:
        raise ValueError(f"side must be 'a' or 'b', not {side!r}")
    try:
        turn = generation.turn_side_start(turn_id, side)
    except OperationalError as exc:  # a busy database (SQLite under load): try again shortly
        if self.request.retries < START_RETRIES:
            raise self.retry(exc=exc, countdown=1 + self.request.retries) from None
        generation.turn_side_fail(turn_id, side, "", f"could not start: {exc}")
        return "failed"
    if turn is None:
        return "already finished"
    battle = turn.battle
    model = battle.model_a if side == "a" else battle.model_b
    log.info("battle %s turn %s side %s: generating", battle_id(battle.public_id), turn.index, side)
    publish = Publisher(battle_group(battle.public_id), {"turn": turn.index, "side": side})
    publish("battle.start")
    text = ""
    try:
        spec = model_spec(model)
        backend = pool.get(spec, lambda: load_model(spec))
        params = {**model.generation, "system_prompt": model.system_prompt or None}
        messages = generation.conversation_for_side(turn, side)
        deadline = time.monotonic() + settings.ARENA_GENERATION_TIMEOUT_S
        last_save = time.monotonic()
        stream = ChatStream(backend.stream_chat(messages, params))  # keeps why it stopped (the token limit?)
        for delta in stream:
            if not delta:
                continue
            publish("battle.delta", offset=len(text), text=delta)
            text += delta
            now = time.monotonic()
            if now > deadline:
                raise GenerationTimeout(f"no answer within {settings.ARENA_GENERATION_TIMEOUT_S} s")
            if now - last_save > SAVE_EVERY_S:
                if not generation.turn_side_progress(turn_id, side, text):
                    return "reaped"  # failed by the reaper meanwhile; it told the browsers
                last_save = now
    except (Exception, SoftTimeLimitExceeded) as exc:
        log.exception("battle %s turn %s side %s failed", battle_id(battle.public_id), turn.index, side)
        generation.turn_side_fail(turn_id, side, text, f"{type(exc).__name__}: {exc}")
        publish("battle.error", message=SIDE_FAILED_MESSAGE)
        metrics.battle_side_observe(side, "error", time.time() - turn.created_at.timestamp())
        return "failed"
    if not generation.turn_side_finish(turn_id, side, text, cut=stream.cut):
        return "reaped"
    metrics.battle_side_observe(side, "done", time.time() - turn.created_at.timestamp())
    publish("battle.done", text=text, cut=stream.cut)
    return "done"


class Publisher:
    """Sends a battle's events to its browsers, best effort: the answer is in the database, and a
    browser that missed events (the channel layer's Redis restarting) gets it with its next snapshot.
    After a failed send the next ones are skipped for a second, so an outage costs no time per token."""

    def __init__(self, group: str, event: dict):
        self.group, self.event = group, event
        self.send = async_to_sync(get_channel_layer().group_send)
        self.quiet_until = 0.0

    def __call__(self, kind: str, **fields) -> None:
        now = time.monotonic()
        if now < self.quiet_until:
            return
        try:
            self.send(self.group, {"type": kind, **fields, **self.event})
        except Exception as exc:  # noqa: BLE001 - a lost event must not fail the answer
            log.warning("could not publish %s to %s: %r", kind, self.group, exc)
            self.quiet_until = now + 1.0


@shared_task(name="arena.tasks.sides_reap", declared_queue=DEFAULT)
def sides_reap() -> int:
    """Fail the sides no worker answered in ``ARENA_SIDE_STALE_S`` (beat schedule) and tell browsers."""
    reaped = generation.turns_reap_stale(older_than_s=settings.ARENA_SIDE_STALE_S)
    for public_id, index, side in reaped:
        log.warning("battle %s turn %s side %s: no answer in time, marked failed", public_id, index, side)
        Publisher(battle_group(public_id), {"turn": index, "side": side})("battle.error", message=SIDE_FAILED_MESSAGE)
    return len(reaped)


# --- Rating refits -------------------------------------------------------------------------------
# Asked for through arena.play.dispatch.ratings_refit_schedule (debounced) after votes commit, and by the
# beat schedule (CELERY_BEAT_SCHEDULE in settings).
REFIT_RUNNING_KEY = "arena:ratings_refit:running"


@shared_task(name="arena.tasks.ratings_refit", declared_queue=DEFAULT, **LONG_TASK_OPTIONS)
def ratings_refit(force: bool = False, pending: str | None = None) -> dict:
    """Refit every rating snapshot from the counted votes (:func:`arena.ratings.refit.snapshots_refit`).

    One refit at a time: while another runs (a beat refit meeting a requested one), this one steps
    aside, so no older fit lands after a newer one. A requested one (``pending``: the token its request
    left in the pending key) marks its key orphaned first, and the running refit, when it ends, sends
    one follow-up for it (:func:`refit_orphan_followup`), so no vote waits for the beat. A refit that
    starts clears the pending key first (:func:`arena.play.dispatch.ratings_refit_schedule`), so the
    votes committed until then are in it and the next vote asks for the next refit: at most one waits.
    Idempotent (a refit with unchanged votes writes nothing), so a redelivery after a lost worker is
    harmless; the lock expires after 15 minutes if its holder died.
    """
    if not cache.add(REFIT_RUNNING_KEY, 1, timeout=15 * 60):
        if pending is not None and cache.get(REFIT_PENDING_KEY) == pending:
            cache.set(REFIT_PENDING_KEY, REFIT_ORPHANED, timeout=REFIT_PENDING_TIMEOUT_S)
            if cache.get(REFIT_RUNNING_KEY) is None:  # the running refit ended meanwhile: follow up here
                refit_orphan_followup()
        return {"skipped": "another refit is running"}
    try:
        cache.delete(REFIT_PENDING_KEY)  # before the votes are read: a vote after this asks again
        # Everything a new snapshot may publish is moderated first (tagged battles are held back).
        moderated = battles_moderate()
        with metrics.REFIT_SECONDS.time():
            summary = snapshots_refit(
                rounds=int(getattr(settings, "ARENA_REFIT_ROUNDS", 1000)),
                min_votes=int(getattr(settings, "ARENA_REFIT_MIN_VOTES", 10)),
                provisional_votes=int(getattr(settings, "ARENA_PROVISIONAL_VOTES", 300)),
                force=force,
                duplicate_percentile=float(getattr(settings, "ARENA_DUPLICATE_PERCENTILE", 99.9)),
            )
        # Battles this refit published: their public texts, redacted, ready for the battles API.
        summary = {**summary, "moderated": moderated, "turns_redacted": published_redact()}
    finally:
        cache.delete(REFIT_RUNNING_KEY)
        refit_orphan_followup()
    log.info("ratings refit: %s", summary)
    return summary


REFIT_ORPHANED = "orphaned"  # the pending key's value while its request has no task queued


def refit_orphan_followup() -> bool:
    """One refit for a request whose task stepped aside while another refit ran; True when sent."""
    if cache.get(REFIT_PENDING_KEY) != REFIT_ORPHANED:
        return False
    cache.delete(REFIT_PENDING_KEY)
    return ratings_refit_schedule()


LIVE_RUNNING_KEY = "arena:ratings_live:running"
LIVE_LOCK_S = 30


@shared_task(name="arena.tasks.ratings_live", declared_queue=DEFAULT, ignore_result=True)
def ratings_live() -> dict:
    """Refit the live point ratings (:func:`arena.ratings.live.live_refit`), asked for by each vote (debounced).

    Clears the pending marker before reading, so a vote committed after the read schedules the next
    fit. One at a time: while another runs, this one steps aside and leaves the marker; the running
    fit, once its lock is released, sends a follow-up when it finds the marker (the lock expires after
    LIVE_LOCK_S if its holder died). While the arena is small (at most
    ``ARENA_REFIT_ON_VOTE_MAX_VOTES`` counted votes) it also asks for a debounced full refit, so
    intervals follow votes within ``ARENA_REFIT_DEBOUNCE_S``; above that the beat schedule refits.
    """
    if not cache.add(LIVE_RUNNING_KEY, 1, timeout=LIVE_LOCK_S):
        return {"skipped": "another live fit is running"}
    try:
        cache.delete(LIVE_PENDING_KEY)
        with metrics.LIVE_SECONDS.time():
            summary = live.live_refit(
                min_votes=int(getattr(settings, "ARENA_REFIT_MIN_VOTES", 10)),
                min_category_votes=int(getattr(settings, "ARENA_LIVE_MIN_CATEGORY_VOTES", 50)),
            )
    finally:
        cache.delete(LIVE_RUNNING_KEY)
    if cache.get(LIVE_PENDING_KEY) is not None:  # a vote came during the fit; its task may have stepped aside
        ratings_live_followup()
    if summary["votes"] <= int(getattr(settings, "ARENA_REFIT_ON_VOTE_MAX_VOTES", 100_000)):
        summary["refit_scheduled"] = ratings_refit_schedule()
    summary["tagging_scheduled"] = categories_tag_schedule()  # the new votes' first prompts
    return summary


@shared_task(name="arena.tasks.voters_flag", declared_queue=DEFAULT, **LONG_TASK_OPTIONS)
def voters_flag() -> dict:
    """The anomalous-voter test on the counted votes under the latest fit (beat schedule: hourly);
    new flags wait in the review queue. Idempotent: a voter already flagged is not flagged twice."""
    summary = voters_flag_run(
        alpha=float(getattr(settings, "ARENA_VOTER_FLAG_ALPHA", 0.01)),
        min_votes=int(getattr(settings, "ARENA_VOTER_FLAG_MIN_VOTES", 20)),
    )
    log.info("voters flag: %s", summary)
    return summary


@shared_task(name="arena.tasks.release_build", declared_queue=DEFAULT, **LONG_TASK_OPTIONS)
def release_build() -> dict:
    """Write a data release at the newest snapshot (arena.publication.releases); a version that exists is skipped."""
    try:
        release = releases.release_build()
    except ArenaError as exc:
        log.warning("data release not written: %s", exc)
        return {"skipped": str(exc)}
    log.info("data release %s written to %s: %s", release.version, release.path, release.counts)
    return {"version": release.version, "counts": release.counts}


# --- Prompt categories ---------------------------------------------------------------------------
# Asked for by the live fit after votes (arena.play.dispatch.categories_tag_schedule, debounced) and by beat.
CATEGORIES_BATCHES_PER_TASK = 8  # then the task sends itself again, so other judge work gets a turn


@shared_task(name="arena.tasks.categories_tag", declared_queue=JUDGE, **LONG_TASK_OPTIONS)
def categories_tag() -> dict:
    """Tag new votes' first prompts with the configured category protocols
    (:func:`arena.categories.services.votes_categorize`), a batch at a time, then ask for a refit.

    Runs may overlap (a beat run meeting a vote's): each claims other votes (row locks, skipped by the
    other) and a tag stored twice is stored once. No lock: a killed worker leaves none behind, so the
    next run (redelivered, the next vote's or beat's) resumes at once; its stored tags are found in the
    cache and its claimed votes are still pending."""
    spec = categories.tagger_spec()
    if spec is None:
        return {"skipped": "no tagger configured (ARENA_CATEGORY_TAGGER)"}
    cache.delete(CATEGORIES_PENDING_KEY)  # before claiming: a vote after this asks for the next run
    totals: dict[str, int] = {}
    for _ in range(CATEGORIES_BATCHES_PER_TASK):
        summary = categories_services.votes_categorize(
            lambda: pool.get(("tagger", spec), lambda: load_model(spec)),
            batch=int(getattr(settings, "ARENA_CATEGORY_BATCH", 32)),
            max_attempts=int(getattr(settings, "ARENA_CATEGORY_MAX_ATTEMPTS", 3)),
        )
        for key, value in summary.items():
            totals[key] = totals.get(key, 0) + value
        if not summary["claimed"]:
            break
    more = categories_services.categorization_pending()
    if more:
        categories_tag_schedule(countdown=0)
    if totals.get("done") or totals.get("tagged"):
        totals["refit_scheduled"] = ratings_refit_schedule()
    log.info("prompt tagging: %s", totals)
    return totals
