"""podium_client.upload's state file: threads that record their uploads at once never lose it."""

from __future__ import annotations

import json
import threading

import httpx

from podium_client import upload


def test_uploads_recorded_from_many_threads_leave_a_whole_state_file(tmp_path, monkeypatch):
    monkeypatch.setattr(upload, "STATE_FILE", tmp_path / "state" / "uploads.json")
    state: dict = {"submission": {"id": "x", "uploads": {}}}
    uploads = state["submission"]["uploads"]
    upload._state_save(state)
    errors: list[BaseException] = []
    seen_empty: list[dict] = []
    done = threading.Event()

    def record(thread: int) -> None:
        try:
            for k in range(100):
                name = f"model-{thread:02d}-{k:03d}.safetensors"
                upload._state_save(state, lambda name=name: uploads.__setitem__(name, f"https://x/{name}"))
        except BaseException as exc:  # FileNotFoundError, or a dict changed while it was written
            errors.append(exc)

    def read() -> None:  # a second run reading the file meanwhile always finds a whole one
        while not done.is_set():
            loaded = upload._state_load()
            if "submission" not in loaded:
                seen_empty.append(loaded)

    reader = threading.Thread(target=read)
    reader.start()
    writers = [threading.Thread(target=record, args=(t,)) for t in range(8)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    done.set()
    reader.join()
    assert errors == [] and seen_empty == []
    saved = json.loads(upload.STATE_FILE.read_text())
    assert len(saved["submission"]["uploads"]) == 800
    assert sorted(p.name for p in upload.STATE_FILE.parent.iterdir()) == ["uploads.json"]  # no temporary left


class _Recorder:
    """Stands in for the httpx client: records the submission the command posts."""

    def __init__(self):
        self.posted = []

    def post(self, url, json):
        self.posted.append((url, json))
        return httpx.Response(201, json={"id": "abc"})


def test_open_weights_is_sent_only_when_the_owner_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(upload, "STATE_FILE", tmp_path / "uploads.json")
    for extra, said in (([], False), (["--open-weights"], True)):
        args = upload._parser().parse_args([str(tmp_path), "--url", "http://x", "--token", "t", "--licence", "mit", *extra])
        client = _Recorder()
        upload._submission(client, args, {"config.json": 1}, {}, "key")
        assert client.posted[0][0] == "/api/submissions/" and client.posted[0][1]["open_weights"] is said
