"""Arena tasks (generation for battles, rating refits) run on the worker runtime."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from asgiref.sync import async_to_sync
from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from channels.layers import get_channel_layer
from django.conf import settings

from arena import services
from arena.models import LanguageModel
from workers.queues import LONG_TASK_OPTIONS
from workers.runtime import pool

log = logging.getLogger(__name__)

# What a voter reads when a side fails: nothing that names the model, its backend or its URL.
SIDE_FAILED_MESSAGE = "This model could not answer (an error or a time-out). This battle will not be rated."
SAVE_EVERY_S = 0.5


def battle_group(public_id) -> str:
    """The channel-layer group of a battle's browsers (a UUID: reveals nothing)."""
    return f"battle.{public_id}"


def model_spec(model: LanguageModel) -> tuple[str, tuple]:
    """A hashable key for the worker's model pool; relative paths live under PODIUM_MODELS_DIR."""
    args = dict(model.model_args)
    if "path" in args and not Path(str(args["path"])).is_absolute():
        args["path"] = str(Path(settings.PODIUM_MODELS_DIR) / str(args["path"]))
    return model.backend, tuple(sorted((k, str(v)) for k, v in args.items()))


def load_model(spec: tuple[str, tuple]):
    from evalcore.models import load_backend

    backend, args = spec
    return load_backend(backend, **dict(args))


class GenerationTimeout(Exception):
    pass


@shared_task(
    name="arena.tasks.battle_generate",
    soft_time_limit=settings.ARENA_GENERATION_TIMEOUT_S + 60,
    time_limit=settings.ARENA_GENERATION_TIMEOUT_S + 90,
    **LONG_TASK_OPTIONS,
)
def battle_generate(turn_id: int, side: str) -> str:
    """Generate one side's answer to a turn, streaming deltas to the battle's browsers."""
    if side not in services.SIDES:
        raise ValueError(f"side must be 'a' or 'b', not {side!r}")
    turn = services.turn_side_start(turn_id, side)
    if turn is None:
        return "already finished"
    battle = turn.battle
    model = battle.model_a if side == "a" else battle.model_b
    send = async_to_sync(get_channel_layer().group_send)
    group = battle_group(battle.public_id)
    event = {"turn": turn.index, "side": side}
    send(group, {"type": "battle.start", **event})
    text = ""
    try:
        spec = model_spec(model)
        backend = pool.get(spec, lambda: load_model(spec))
        params = {**model.generation, "system_prompt": model.system_prompt or None}
        messages = services.conversation_for_side(turn, side)
        deadline = time.monotonic() + settings.ARENA_GENERATION_TIMEOUT_S
        last_save = time.monotonic()
        for delta in backend.stream_chat(messages, params):
            if not delta:
                continue
            send(group, {"type": "battle.delta", "offset": len(text), "text": delta, **event})
            text += delta
            now = time.monotonic()
            if now > deadline:
                raise GenerationTimeout(f"no answer within {settings.ARENA_GENERATION_TIMEOUT_S} s")
            if now - last_save > SAVE_EVERY_S:
                services.turn_side_progress(turn_id, side, text)
                last_save = now
    except (Exception, SoftTimeLimitExceeded) as exc:
        log.exception("battle %s turn %s side %s failed", battle.public_id, turn.index, side)
        services.turn_side_fail(turn_id, side, text, f"{type(exc).__name__}: {exc}")
        send(group, {"type": "battle.error", "message": SIDE_FAILED_MESSAGE, **event})
        return "failed"
    services.turn_side_finish(turn_id, side, text)
    send(group, {"type": "battle.done", "text": text, **event})
    return "done"
