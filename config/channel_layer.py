"""A Channels layer on a SQLite file: the embedded default when there is no Redis.

The in-memory layer only works inside one process, but arena answers are generated in Celery worker
processes and streamed to browsers connected to the web process. This layer lets several processes on
one machine share channels and groups through a SQLite file in WAL mode, with no server. Receivers
poll (every ``poll_interval`` seconds), so it suits a laptop demo; production uses channels-redis.

Messages are encoded with msgpack (never pickle), as channels-redis does.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
import uuid
from pathlib import Path

import msgpack
from channels.exceptions import ChannelFull
from channels.layers import BaseChannelLayer

SCHEMA = """
CREATE TABLE IF NOT EXISTS message (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    channel TEXT NOT NULL,
    body BLOB NOT NULL,
    expires REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS message_channel ON message (channel, id);
CREATE TABLE IF NOT EXISTS membership (
    grp TEXT NOT NULL,
    channel TEXT NOT NULL,
    expires REAL NOT NULL,
    PRIMARY KEY (grp, channel)
);
"""


class SQLiteChannelLayer(BaseChannelLayer):
    """Channel layer whose messages and group memberships live in one SQLite file.

    Parameters
    ----------
    path : str
        The SQLite file (created with its folder if missing).
    expiry : int
        Seconds a message waits for a receiver before it is dropped.
    group_expiry : int
        Seconds a group membership lasts without being renewed.
    capacity : int
        Messages a channel may hold; ``send`` beyond it raises ``ChannelFull``.
    poll_interval : float
        Seconds between looks for new messages in ``receive``.
    clock : callable
        Returns the current time in seconds (``time.time``); expiries are measured with it, and a
        test passes its own to move time on without waiting.
    """

    extensions = ["groups", "flush"]

    def __init__(
        self, path, expiry=60, group_expiry=86400, capacity=100, poll_interval=0.03, clock=time.time, **kwargs
    ):
        super().__init__(expiry=expiry, capacity=capacity, **kwargs)
        self.clock = clock
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.group_expiry = group_expiry
        self.poll_interval = poll_interval
        self.client_prefix = uuid.uuid4().hex
        with self._connect() as db:
            db.executescript(SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        return db

    def _run(self, fn, *args):
        def call():
            db = self._connect()
            try:
                return fn(db, *args)
            finally:
                db.close()

        return asyncio.to_thread(call)

    # Channels

    async def send(self, channel, message):
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_channel_name(channel)
        assert "__asgi_channel__" not in message
        body = msgpack.packb(message, use_bin_type=True)
        if not await self._run(self._insert, channel, body):
            raise ChannelFull(channel)

    def _insert(self, db, channel, body) -> bool:
        now = self.clock()
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("DELETE FROM message WHERE expires < ?", (now,))
            (queued,) = db.execute("SELECT COUNT(*) FROM message WHERE channel = ?", (channel,)).fetchone()
            if queued >= self.get_capacity(channel):
                db.execute("ROLLBACK")
                return False
            db.execute(
                "INSERT INTO message (channel, body, expires) VALUES (?, ?, ?)", (channel, body, now + self.expiry)
            )
            db.execute("COMMIT")
            return True
        except BaseException:
            db.execute("ROLLBACK")
            raise

    async def receive(self, channel):
        self.require_valid_channel_name(channel)
        while True:
            body = await self._run(self._pop, channel)
            if body is not None:
                return msgpack.unpackb(body, raw=False)
            await asyncio.sleep(self.poll_interval)

    def _pop(self, db, channel):
        db.execute("BEGIN IMMEDIATE")
        try:
            row = db.execute(
                "SELECT id, body FROM message WHERE channel = ? AND expires >= ? ORDER BY id LIMIT 1",
                (channel, self.clock()),
            ).fetchone()
            if row:
                db.execute("DELETE FROM message WHERE id = ?", (row[0],))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return row[1] if row else None

    async def new_channel(self, prefix="specific"):
        return f"{prefix}.sqlite{self.client_prefix}!{uuid.uuid4().hex}"

    # Groups

    async def group_add(self, group, channel):
        self.require_valid_group_name(group)
        self.require_valid_channel_name(channel)
        await self._run(
            lambda db: db.execute(
                "INSERT OR REPLACE INTO membership (grp, channel, expires) VALUES (?, ?, ?)",
                (group, channel, self.clock() + self.group_expiry),
            )
        )

    async def group_discard(self, group, channel):
        self.require_valid_group_name(group)
        self.require_valid_channel_name(channel)
        await self._run(
            lambda db: db.execute("DELETE FROM membership WHERE grp = ? AND channel = ?", (group, channel))
        )

    async def group_send(self, group, message):
        self.require_valid_group_name(group)
        channels = await self._run(
            lambda db: [
                row[0]
                for row in db.execute(
                    "SELECT channel FROM membership WHERE grp = ? AND expires >= ?", (group, self.clock())
                )
            ]
        )
        for channel in channels:
            try:
                await self.send(channel, message)
            except ChannelFull:
                pass  # as channels-redis does: a full member misses the message, the others still get it

    async def flush(self):
        await self._run(lambda db: db.executescript("DELETE FROM message; DELETE FROM membership;"))

    async def close(self):
        return None
