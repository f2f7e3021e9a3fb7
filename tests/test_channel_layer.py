"""The SQLite channel layer (the embedded default) across processes and at its limits."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
from channels.exceptions import ChannelFull

from config.channel_layer import SQLiteChannelLayer
from tests.conftest import REPO_ROOT, clean_env, run_manage


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


def test_capacity_and_expiry(tmp_path):
    layer = SQLiteChannelLayer(tmp_path / "layer.sqlite3", capacity=2, expiry=1)

    async def scenario():
        await layer.send("full", {"type": "x"})
        await layer.send("full", {"type": "x"})
        with pytest.raises(ChannelFull):
            await layer.send("full", {"type": "x"})
        await asyncio.sleep(1.1)
        await layer.send("full", {"type": "fresh"})  # the expired ones no longer count
        return await layer.receive("full")

    assert run(scenario())["type"] == "fresh"


def test_groups_and_discard(tmp_path):
    layer = SQLiteChannelLayer(tmp_path / "layer.sqlite3")

    async def scenario():
        a, b = await layer.new_channel(), await layer.new_channel()
        await layer.group_add("room", a)
        await layer.group_add("room", b)
        await layer.group_discard("room", b)
        await layer.group_send("room", {"type": "hello"})
        got = await asyncio.wait_for(layer.receive(a), 5)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(layer.receive(b), 0.3)
        return got

    assert run(scenario()) == {"type": "hello"}


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
def test_websocket_through_the_embedded_layer(tmp_path, start_asgi_server):
    """Default settings (no Redis): a message published by another process reaches the browser."""
    import websockets

    env = clean_env(DJANGO_SETTINGS_MODULE="config.settings.dev", PODIUM_VAR_DIR=str(tmp_path))
    assert run_manage("migrate", "--no-input", env=env).returncode == 0
    port = start_asgi_server(env=env)
    layer = SQLiteChannelLayer(tmp_path / "channels.sqlite3")

    async def scenario():
        async with websockets.connect(f"ws://127.0.0.1:{port}/ws/ping/", origin=f"http://127.0.0.1:{port}") as ws:
            await ws.send(json.dumps({"ping": 1}))
            assert json.loads(await asyncio.wait_for(ws.recv(), 10)) == {"pong": 1}
            await layer.group_send("ping", {"type": "ping.pong", "value": "from the test process"})
            assert json.loads(await asyncio.wait_for(ws.recv(), 10)) == {"pong": "from the test process"}

    run(scenario())
