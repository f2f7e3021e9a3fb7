"""The real services: Celery tasks through Redis and through the embedded broker to real worker
processes, a WebSocket round trip through channels-redis and a real ASGI server, and PostgreSQL
transactions."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest
from celery import Celery
from django.db import DatabaseError, IntegrityError, connection, transaction

from arena.models import LanguageModel
from tests.conftest import clean_env, database_url_of, run_manage

pytestmark = pytest.mark.integration


@pytest.mark.django_db(transaction=True)
def test_task_through_redis_to_a_real_worker(redis_url, start_worker, processes):
    env = clean_env(
        DJANGO_SETTINGS_MODULE="config.settings.dev",
        DATABASE_URL=database_url_of(connection),
        CELERY_BROKER_URL=redis_url,
    )
    worker = start_worker(env=env, queues="default,evaluate")
    client = Celery("podium-test-client", broker=redis_url, backend="django-db", set_as_current=False)
    try:
        for queue in ("default", "evaluate"):
            result = client.send_task("workers.ping", args=[{"queue": queue}], queue=queue)
            try:
                answer = result.get(timeout=90)
            except Exception as exc:
                raise AssertionError(f"{exc!r}\n{processes.log_of(worker)}") from None
            assert answer["pong"] == {"queue": queue}
            assert answer["pid"] == worker.pid
    finally:
        client.close()
    # The result went to the database (the default result backend), not just to the client.
    from django_celery_results.models import TaskResult

    assert TaskResult.objects.filter(task_name="workers.ping", status="SUCCESS").count() == 2


def test_task_through_the_embedded_broker(tmp_path, start_worker, processes):
    """No servers at all: filesystem broker and SQLite results under PODIUM_VAR_DIR."""
    env = clean_env(DJANGO_SETTINGS_MODULE="config.settings.dev", PODIUM_VAR_DIR=str(tmp_path))
    assert run_manage("migrate", "--no-input", env=env).returncode == 0
    worker = start_worker(env=env, queues="default")
    script = (
        "from workers.diagnostics import ping; "
        "print(ping.delay('through the filesystem').get(timeout=90)['pong'])"
    )
    result = run_manage("shell", "-c", script, env=env, timeout=150)
    assert result.returncode == 0, f"{result.stderr}\n{processes.log_of(worker)}"
    assert result.stdout.strip().splitlines()[-1] == "through the filesystem"
    assert list((tmp_path / "broker" / "queue").iterdir()) == [], "the message was consumed"


@pytest.mark.django_db(transaction=True)
def test_websocket_round_trip_through_channels_redis(redis_url, start_asgi_server):
    import websockets
    from channels_redis.core import RedisChannelLayer

    env = clean_env(
        DJANGO_SETTINGS_MODULE="config.settings.dev",
        DATABASE_URL=database_url_of(connection),
        REDIS_URL=redis_url,
    )
    port = start_asgi_server(env=env)
    uri = f"ws://127.0.0.1:{port}/ws/ping/"

    async def scenario():
        layer = RedisChannelLayer(hosts=[redis_url])
        origin = f"http://127.0.0.1:{port}"
        async with websockets.connect(uri, origin=origin) as ws, websockets.connect(uri, origin=origin) as other:
            channel = json.loads(await asyncio.wait_for(ws.recv(), 10))["channel"]
            other_channel = json.loads(await asyncio.wait_for(other.recv(), 10))["channel"]
            assert channel != other_channel
            await ws.send(json.dumps({"ping": "hello"}))
            assert json.loads(await asyncio.wait_for(ws.recv(), 10)) == {"pong": "hello"}
            # A message published by another process (this one) through Redis reaches the browser.
            await layer.send(channel, {"type": "ping.pong", "value": "from another process"})
            assert json.loads(await asyncio.wait_for(ws.recv(), 10)) == {"pong": "from another process"}
            await ws.send("not json {")
            assert "error" in json.loads(await asyncio.wait_for(ws.recv(), 10))
            await ws.send(json.dumps({"ping": "x" * 10_000}))
            assert "error" in json.loads(await asyncio.wait_for(ws.recv(), 10))
            # The other client got none of it: its first message is the one sent to it now.
            await layer.send(other_channel, {"type": "ping.pong", "value": "marker"})
            assert json.loads(await asyncio.wait_for(other.recv(), 10)) == {"pong": "marker"}
        await layer.flush()

    asyncio.run(scenario())


@pytest.mark.django_db(transaction=True)
def test_websocket_ping_is_rate_limited_per_connection(start_asgi_server):
    import websockets

    from arena.play.consumers import PING_LIMIT

    env = clean_env(DJANGO_SETTINGS_MODULE="config.settings.dev", DATABASE_URL=database_url_of(connection))
    port = start_asgi_server(env=env)

    async def scenario():
        async with websockets.connect(f"ws://127.0.0.1:{port}/ws/ping/", origin=f"http://127.0.0.1:{port}") as ws:
            await asyncio.wait_for(ws.recv(), 10)  # {"channel": ...}
            for n in range(PING_LIMIT):
                await ws.send(json.dumps({"ping": n}))
                assert json.loads(await asyncio.wait_for(ws.recv(), 10)) == {"pong": n}
            await ws.send(json.dumps({"ping": "one too many"}))
            assert "rate limit" in json.loads(await asyncio.wait_for(ws.recv(), 10))["error"]
            with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 10)
            assert closed.value.rcvd.code == 4008

    asyncio.run(scenario())


@pytest.mark.django_db(transaction=True)
def test_websocket_from_a_foreign_origin_is_refused(redis_url, start_asgi_server):
    import websockets

    env = clean_env(DJANGO_SETTINGS_MODULE="config.settings.dev", DATABASE_URL=database_url_of(connection))
    port = start_asgi_server(env=env)

    async def scenario():
        with pytest.raises(websockets.exceptions.InvalidStatus):
            async with websockets.connect(f"ws://127.0.0.1:{port}/ws/ping/", origin="http://evil.example"):
                pass

    asyncio.run(scenario())


@pytest.mark.django_db(transaction=True)
def test_postgresql_unique_constraint_under_concurrent_inserts():
    assert connection.vendor == "postgresql"
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def insert():
        from django.db import connection as thread_connection

        try:
            barrier.wait()
            with transaction.atomic():
                LanguageModel.objects.create(name="twin")
                time.sleep(0.2)  # hold the transaction open while the other insert waits
            outcomes.append("created")
        except IntegrityError:
            outcomes.append("refused")
        finally:
            thread_connection.close()

    threads = [threading.Thread(target=insert) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["created", "refused"]
    assert LanguageModel.objects.filter(name="twin").count() == 1


@pytest.mark.django_db(transaction=True)
def test_postgresql_row_lock_and_rollback():
    model = LanguageModel.objects.create(name="locked")
    locked = threading.Event()
    release = threading.Event()

    def hold_lock():
        from django.db import connection as thread_connection

        with transaction.atomic():
            LanguageModel.objects.select_for_update().get(pk=model.pk)
            locked.set()
            release.wait(10)
        thread_connection.close()

    holder = threading.Thread(target=hold_lock)
    holder.start()
    assert locked.wait(10)
    try:
        with pytest.raises(DatabaseError), transaction.atomic():
            LanguageModel.objects.select_for_update(nowait=True).get(pk=model.pk)
    finally:
        release.set()
        holder.join()
    # A failed transaction leaves nothing behind.
    with pytest.raises(IntegrityError), transaction.atomic():
        LanguageModel.objects.create(name="rolled back")
        LanguageModel.objects.create(name="locked")
    assert not LanguageModel.objects.filter(name="rolled back").exists()
