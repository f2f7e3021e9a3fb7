"""The SQLite channel layer (the embedded default) across processes and at its limits."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
from channels.exceptions import ChannelFull

from config.channel_layer import SQLiteChannelLayer
from tests.conftest import REPO_ROOT, clean_env


def run(coro):
    return asyncio.run(coro)


def test_send_receive_in_order(tmp_path):
    layer = SQLiteChannelLayer(tmp_path / "layer.sqlite3")

    async def scenario():
        channel = await layer.new_channel()
        for i in range(3):
            await layer.send(channel, {"type": "x", "i": i, "data": b"\x00\xff"})
        return [await layer.receive(channel) for _ in range(3)]

    assert [m["i"] for m in run(scenario())] == [0, 1, 2]


class Clock:
    """A clock the test moves by hand: expiry without waiting, and without depending on timing."""

    def __init__(self, now: float = 1_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_capacity_and_expiry(tmp_path):
    clock = Clock()
    layer = SQLiteChannelLayer(tmp_path / "layer.sqlite3", capacity=2, expiry=60, clock=clock)

    async def scenario():
        await layer.send("full", {"type": "old"})
        clock.now += 30
        await layer.send("full", {"type": "x"})
        with pytest.raises(ChannelFull):
            await layer.send("full", {"type": "x"})
        clock.now += 30  # the first message is exactly 60 s old: still counted, still delivered
        with pytest.raises(ChannelFull):
            await layer.send("full", {"type": "x"})
        clock.now += 0.5  # now it has expired
        await layer.send("full", {"type": "fresh"})  # the expired one no longer counts
        return [await layer.receive("full") for _ in range(2)]

    assert [m["type"] for m in run(scenario())] == ["x", "fresh"]


def test_an_expired_message_is_not_delivered(tmp_path):
    clock = Clock()
    layer = SQLiteChannelLayer(tmp_path / "layer.sqlite3", expiry=5, clock=clock)

    async def scenario():
        await layer.send("c", {"type": "stale"})
        clock.now += 6
        await layer.send("other", {"type": "unrelated"})  # a send sweeps expired messages
        clock.now -= 6  # even read back at the old time, it is gone
        await layer.send("c", {"type": "live"})
        return await layer.receive("c")

    assert run(scenario())["type"] == "live"


def test_group_membership_expires(tmp_path):
    clock = Clock()
    layer = SQLiteChannelLayer(tmp_path / "layer.sqlite3", group_expiry=100, clock=clock)

    async def scenario():
        kept, lapsed = await layer.new_channel(), await layer.new_channel()
        await layer.group_add("room", lapsed)
        clock.now += 50
        await layer.group_add("room", kept)
        clock.now += 60  # lapsed joined 110 s ago, kept 60 s ago
        await layer.group_send("room", {"type": "hello"})
        await layer.send(lapsed, {"type": "marker"})
        return await layer.receive(kept), await layer.receive(lapsed)

    to_kept, to_lapsed = run(scenario())
    assert to_kept["type"] == "hello" and to_lapsed["type"] == "marker"


def test_groups_and_discard(tmp_path):
    layer = SQLiteChannelLayer(tmp_path / "layer.sqlite3")

    async def scenario():
        a, b = await layer.new_channel(), await layer.new_channel()
        await layer.group_add("room", a)
        await layer.group_add("room", b)
        await layer.group_discard("room", b)
        await layer.group_send("room", {"type": "hello"})
        await layer.send(b, {"type": "marker"})  # b's first message is this one: it got nothing from the group
        return await asyncio.wait_for(layer.receive(a), 5), await asyncio.wait_for(layer.receive(b), 5)

    assert run(scenario()) == ({"type": "hello"}, {"type": "marker"})


@pytest.mark.parametrize("name", ["", "has space", "x" * 200, "semi;colon"])
def test_invalid_names_are_refused(tmp_path, name):
    layer = SQLiteChannelLayer(tmp_path / "layer.sqlite3")
    with pytest.raises(TypeError):
        run(layer.send(name, {"type": "x"}))


def test_a_message_crosses_processes(tmp_path):
    path = tmp_path / "layer.sqlite3"
    layer = SQLiteChannelLayer(path)
    sender = (
        "import asyncio, sys; from config.channel_layer import SQLiteChannelLayer; "
        "asyncio.run(SQLiteChannelLayer(sys.argv[1]).group_send('g', {'type': 't', 'from': 'child'}))"
    )

    async def scenario():
        channel = await layer.new_channel()
        await layer.group_add("g", channel)
        subprocess.run([sys.executable, "-c", sender, str(path)], cwd=REPO_ROOT, check=True, timeout=60)
        return await asyncio.wait_for(layer.receive(channel), 10)

    assert run(scenario())["from"] == "child"


@pytest.mark.integration
def test_websocket_through_the_embedded_layer(sqlite_var_dir, start_asgi_server):
    """Default settings (no Redis): a message published by another process reaches the browser."""
    import websockets

    env = clean_env(DJANGO_SETTINGS_MODULE="config.settings.dev", PODIUM_VAR_DIR=str(sqlite_var_dir))
    port = start_asgi_server(env=env)
    layer = SQLiteChannelLayer(sqlite_var_dir / "channels.sqlite3")

    async def scenario():
        async with websockets.connect(f"ws://127.0.0.1:{port}/ws/ping/", origin=f"http://127.0.0.1:{port}") as ws:
            channel = json.loads(await asyncio.wait_for(ws.recv(), 10))["channel"]
            await ws.send(json.dumps({"ping": 1}))
            assert json.loads(await asyncio.wait_for(ws.recv(), 10)) == {"pong": 1}
            await layer.send(channel, {"type": "ping.pong", "value": "from the test process"})
            assert json.loads(await asyncio.wait_for(ws.recv(), 10)) == {"pong": "from the test process"}

    run(scenario())
