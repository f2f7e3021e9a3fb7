"""The battle WebSocket in-process: who may connect, what it sends, and hostile client messages."""

from __future__ import annotations

import asyncio
import json

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.db import connections
from django.test import Client

from arena.models import Battle, LanguageModel
from arena.play.streams import battle_group
from config.asgi import application
from tests.arena_terms import agree

pytestmark = pytest.mark.django_db(transaction=True)


def voter_with_battle():
    LanguageModel.objects.create(name="secret-model-one", in_arena=True, backend="hf", model_args={"path": "x"})
    LanguageModel.objects.create(name="secret-model-two", in_arena=True, backend="hf", model_args={"path": "x"})
    client = Client()
    client.get("/arena/")
    agree(client)

    response = client.post("/arena/battles/", {"prompt": "Hello there"})
    assert response.status_code == 201
    return client, response.json()["battle"]


def communicator(public_id, cookie: str | None):
    headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
    if cookie:
        headers.append((b"cookie", cookie.encode()))
    return WebsocketCommunicator(application, f"/ws/arena/battles/{public_id}/", headers=headers)


def cookie_of(client: Client) -> str:
    return f"sessionid={client.cookies['sessionid'].value}"


def test_owner_gets_a_snapshot_then_live_events_without_names():
    client, public_id = voter_with_battle()

    async def scenario():
        ws = communicator(public_id, cookie_of(client))
        connected, _ = await ws.connect(timeout=60)
        assert connected
        snapshot = json.loads(await ws.receive_from(timeout=60))
        assert snapshot["type"] == "snapshot" and snapshot["turns"][0]["prompt"] == "Hello there"
        layer = get_channel_layer()
        await layer.group_send(
            battle_group(public_id), {"type": "battle.delta", "turn": 0, "side": "a", "offset": 0, "text": "Hi"}
        )
        delta = json.loads(await ws.receive_from(timeout=60))
        assert delta == {"type": "delta", "turn": 0, "side": "a", "offset": 0, "text": "Hi"}
        nested = "[" * 2000 + "]" * 2000  # within the size limit, past json's recursion limit
        for hostile in ("not json", json.dumps([1, 2]), json.dumps({"type": "vote", "winner": "model_a"}), "x" * 10_000, nested):
            await ws.send_to(text_data=hostile)
            assert json.loads(await ws.receive_from(timeout=60))["type"] == "invalid"
        await ws.send_to(text_data=json.dumps({"type": "sync"}))
        again = json.loads(await ws.receive_from(timeout=60))
        assert again["type"] == "snapshot"
        await ws.disconnect()
        await database_sync_to_async(connections.close_all)()  # the consumer's thread's connection
        return json.dumps([snapshot, delta, again])

    sent = asyncio.run(scenario())
    assert "secret-model" not in sent


def test_no_session_and_other_voters_are_refused():
    _, public_id = voter_with_battle()
    stranger = Client()
    stranger.get("/arena/")
    agree(stranger)

    async def scenario():
        anonymous = communicator(public_id, None)
        connected, code = await anonymous.connect(timeout=60)
        assert not connected and code == 4403
        forged = communicator(public_id, "sessionid=" + "f" * 32)
        connected, code = await forged.connect(timeout=60)
        assert not connected and code == 4403
        other = communicator(public_id, cookie_of(stranger))
        connected, code = await other.connect(timeout=60)
        assert not connected and code == 4404
        await database_sync_to_async(connections.close_all)()

    asyncio.run(scenario())
    assert Battle.objects.count() == 1
