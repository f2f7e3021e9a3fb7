"""WebSocket consumers."""

from __future__ import annotations

import json

from channels.generic.websocket import AsyncWebsocketConsumer

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
