"""WebSocket consumers."""

from __future__ import annotations

import json

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from arena.selectors_battles import battle_state
from arena.streams import battle_group

PING_GROUP = "ping"
MAX_PING_BYTES = 4096


class PingConsumer(AsyncWebsocketConsumer):
    """``/ws/ping/``: proves the WebSocket path and the channel layer work end to end.

    A client message ``{"ping": X}`` is published to the ``ping`` group through the channel layer
    and comes back to every member as ``{"pong": X}``; anything else gets ``{"error": ...}``.
    """

    async def connect(self):
        await self.channel_layer.group_add(PING_GROUP, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        await self.channel_layer.group_discard(PING_GROUP, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None):
        if text_data is None or len(text_data) > MAX_PING_BYTES:
            await self.send(json.dumps({"error": f"send a JSON text message of at most {MAX_PING_BYTES} bytes"}))
            return
        try:
            message = json.loads(text_data)
        except json.JSONDecodeError:
            await self.send(json.dumps({"error": "not JSON"}))
            return
        if not isinstance(message, dict) or "ping" not in message:
            await self.send(json.dumps({"error": 'expected {"ping": ...}'}))
            return
        await self.channel_layer.group_send(PING_GROUP, {"type": "ping.pong", "value": message["ping"]})

    async def ping_pong(self, event):
        await self.send(json.dumps({"pong": event["value"]}))


class BattleConsumer(AsyncWebsocketConsumer):
    """``/ws/arena/battles/<public_id>/``: streams both answers of the voter's own battle.

    On connect the voter gets a snapshot of the battle (prompts, text so far, each side's status),
    then live events: ``start``, ``delta`` (with the character ``offset`` it starts at, so a client can
    drop what it already has), ``done`` (with the full text) and ``error``. Model names are never sent
    before the vote. The only client message is ``{"type": "sync"}``, answered with a new snapshot.
    """

    async def connect(self):
        self.group = None
        public_id = self.scope["url_route"]["kwargs"]["public_id"]
        session = self.scope.get("session")
        session_key = getattr(session, "session_key", None)
        if not session_key:
            await self.close(code=4403)
            return
        self.state_args = {"public_id": public_id, "session_key": session_key}
        state = await database_sync_to_async(battle_state)(**self.state_args)
        if state is None:
            await self.close(code=4404)
            return
        self.group = battle_group(public_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.send(json.dumps({"type": "snapshot", **state}))

    async def disconnect(self, code):
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None):
        try:
            message = json.loads(text_data) if text_data and len(text_data) <= MAX_PING_BYTES else None
        except json.JSONDecodeError:
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
