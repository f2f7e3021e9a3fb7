"""WebSocket consumers."""

from __future__ import annotations

import json
import logging
import time
from collections import deque

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from arena.play.identity import arena_key_of
from arena.play.selectors import battle_state
from arena.play.streams import battle_group
from arena.publication.consent import consent_of

MAX_PING_BYTES = 4096
PING_LIMIT = 30  # messages per connection per PING_WINDOW_S
PING_WINDOW_S = 60.0
JOIN_ATTEMPTS = 4

log = logging.getLogger(__name__)


class PingConsumer(AsyncWebsocketConsumer):
    """``/ws/ping/``: proves the WebSocket path and the channel layer work end to end, for one client.

    On connect the client gets ``{"channel": NAME}``: its own channel on the layer (a process that
    shares the layer can send ``{"type": "ping.pong", "value": X}`` to it). A client message
    ``{"ping": X}`` goes through the layer to this connection only and comes back as ``{"pong": X}``;
    anything else gets ``{"error": ...}``. Nothing a client sends reaches any other client. More than
    ``PING_LIMIT`` messages in ``PING_WINDOW_S`` seconds closes the connection (code 4008).
    """

    async def connect(self):
        self.recent: deque[float] = deque()
        await self.accept()
        await self.send(json.dumps({"channel": self.channel_name}))

    async def receive(self, text_data=None, bytes_data=None):
        now = time.monotonic()
        while self.recent and now - self.recent[0] > PING_WINDOW_S:
            self.recent.popleft()
        self.recent.append(now)
        if len(self.recent) > PING_LIMIT:
            await self.send(json.dumps({"error": f"rate limit: at most {PING_LIMIT} messages in {PING_WINDOW_S:.0f} s"}))
            await self.close(code=4008)
            return
        if text_data is None or len(text_data) > MAX_PING_BYTES:
            await self.send(json.dumps({"error": f"send a JSON text message of at most {MAX_PING_BYTES} bytes"}))
            return
        try:
            message = json.loads(text_data)
        except (json.JSONDecodeError, RecursionError):  # RecursionError: '[[[[...' nested past the limit
            await self.send(json.dumps({"error": "not JSON"}))
            return
        if not isinstance(message, dict) or "ping" not in message:
            await self.send(json.dumps({"error": 'expected {"ping": ...}'}))
            return
        await self.channel_layer.send(self.channel_name, {"type": "ping.pong", "value": message["ping"]})

    async def ping_pong(self, event):
        await self.send(json.dumps({"pong": event["value"]}))


class BattleConsumer(AsyncWebsocketConsumer):
    """``/ws/arena/battles/<public_id>/``: streams both answers of the voter's own battle.

    On connect the voter gets a snapshot of the battle (prompts, text so far, each side's status and
    ``cut``: the answer stopped at the model's token limit), then live events: ``start``, ``delta`` (with
    the character ``offset`` it starts at, so a client can drop what it already has), ``done`` (with the
    full text and ``cut``) and ``error``. Model names are never sent
    before the vote. The only client message is ``{"type": "sync"}``, answered with a new snapshot.
    """

    async def connect(self):
        self.group = None
        public_id = self.scope["url_route"]["kwargs"]["public_id"]
        # Loads the session: a forged or expired cookie is no session (its key alone proves nothing).
        session_key = await database_sync_to_async(arena_key_of)(self.scope.get("session"))
        if not session_key:
            await self.close(code=4403)
            return
        if await database_sync_to_async(consent_of)(self.scope.get("session")) is None:
            await self.close(code=4451)  # the voter has not agreed to the current terms
            return
        self.state_args = {"public_id": public_id, "session_key": session_key}
        state = await database_sync_to_async(battle_state)(**self.state_args)
        if state is None:
            await self.close(code=4404)
            return
        self.group = battle_group(public_id)
        joined = await self.join_group()
        await self.accept()
        await self.send(json.dumps({"type": "snapshot", **state}))
        if not joined:  # the layer (Redis) is down: the snapshot, then "try again later"; the page reconnects
            self.group = None
            await self.close(code=1013)

    async def join_group(self) -> bool:
        """Join the battle's group; after a Redis restart the layer's pooled connections fail once
        each before fresh ones replace them, so a few tries, then False."""
        for attempt in range(JOIN_ATTEMPTS):
            try:
                await self.channel_layer.group_add(self.group, self.channel_name)
                return True
            except Exception as exc:  # noqa: BLE001 - redis-py's ConnectionError and the like
                log.warning("joining %s failed (attempt %s): %r", self.group, attempt + 1, exc)
        return False

    async def disconnect(self, code):
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None):
        try:
            message = json.loads(text_data) if text_data and len(text_data) <= MAX_PING_BYTES else None
        except (json.JSONDecodeError, RecursionError):  # RecursionError: '[[[[...' nested past the limit
            message = None
        if not isinstance(message, dict) or message.get("type") != "sync":
            await self.send(json.dumps({"type": "invalid", "message": 'the only message is {"type": "sync"}'}))
            return
        state = await database_sync_to_async(battle_state)(**self.state_args)
        await self.send(json.dumps({"type": "snapshot", **(state or {})}))

    async def forward(self, event, kind):
        payload = {key: value for key, value in event.items() if key != "type"}
        await self.send(json.dumps({"type": kind, **payload}))

    async def battle_start(self, event):
        await self.forward(event, "start")

    async def battle_delta(self, event):
        await self.forward(event, "delta")

    async def battle_done(self, event):
        await self.forward(event, "done")

    async def battle_error(self, event):
        await self.forward(event, "error")
