"""``podium-upload DIR --url URL --token TOKEN --name NAME --licence L``: submit a local checkpoint.

Creates the submission (``POST /api/submissions/``), then sends every file through the tus endpoint
in chunks with a SHA-256 per chunk and a terminal progress bar. The weights go one shard at a time
in sorted name order (the server hashes them as they arrive, without reading them back); small files
go beside them. Interrupted (network, Ctrl-C, a crash), run the same command again: it finds the
submission in its state file and resumes every file from the offset the server holds.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from tqdm import tqdm

TUS = {"Tus-Resumable": "1.0.0"}
RETRIES = 8
STATE_FILE = Path(os.environ.get("PODIUM_STATE_FILE", Path.home() / ".cache" / "podium" / "uploads.json"))


class UploadError(RuntimeError):
    pass


def checkpoint_files(folder: Path) -> dict[str, int]:
    """The folder's plain files (no subfolders, no hidden files): {name: size}."""
    files = {p.name: p.stat().st_size for p in sorted(folder.iterdir()) if p.is_file() and not p.name.startswith(".")}
    if not files:
        raise UploadError(f"{folder} holds no files.")
    return files


def _state_key(url: str, folder: Path, files: dict[str, int]) -> str:
    stamp = {n: (s, int((folder / n).stat().st_mtime)) for n, s in files.items()}
    return hashlib.sha256(json.dumps([url, str(folder.resolve()), stamp], sort_keys=True).encode()).hexdigest()


def _state_load() -> dict:
    try:
        return json.loads(STATE_FILE.read_text())
    except (OSError, ValueError):
        return {}


def _state_save(state: dict) -> None:
    STATE_FILE.parent.mkdir(parents=True, exist_ok=True)
    temporary = STATE_FILE.with_suffix(".tmp")
    temporary.write_text(json.dumps(state))
    temporary.replace(STATE_FILE)


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500]
    return body.get("detail") or json.dumps(body.get("errors", body))


class Uploader:
    def __init__(self, client: httpx.Client, folder: Path, *, chunk: int, bar: tqdm):
        self.client, self.folder, self.chunk, self.bar = client, folder, chunk, bar
        self.final_state = ""

    def create(self, submission: str, name: str, size: int) -> str:
        meta = f"submission {base64.b64encode(submission.encode()).decode()},filename {base64.b64encode(name.encode()).decode()}"
        response = self.client.post("/leaderboard/uploads/", headers={**TUS, "Upload-Length": str(size), "Upload-Metadata": meta})
        if response.status_code != 201:
            raise UploadError(f"{name}: {response.status_code} {_detail(response)}")
        return response.headers["Location"]

    def offset(self, url: str) -> int | None:
        response = self.client.head(url, headers=TUS)
        if response.status_code == 200:
            return int(response.headers["Upload-Offset"])
        if response.status_code in (404, 410):
            return None
        raise UploadError(f"HEAD {url}: {response.status_code}")

    def _read(self, stream, offset: int, size: int) -> tuple[int, bytes, str]:
        stream.seek(offset)
        data = stream.read(min(self.chunk, size - offset))
        return offset, data, base64.b64encode(hashlib.sha256(data).digest()).decode()

    def send(self, url: str, name: str, size: int) -> None:
        """Send ``name`` from the server's offset to the end, retrying a dropped connection. The
        next chunk is read and hashed while the current one is on the wire."""
        offset = self.offset(url)
        if offset is None:
            raise UploadError(f"{name}: the server no longer has this upload.")
        self.bar.update(offset)
        with open(self.folder / name, "rb") as stream, ThreadPoolExecutor(max_workers=1) as reader:
            pending = reader.submit(self._read, stream, offset, size) if offset < size else None
            failures = 0
            while offset < size:
                start, data, digest = pending.result()
                if start != offset:
                    start, data, digest = self._read(stream, offset, size)
                after = offset + len(data)
                pending = reader.submit(self._read, stream, after, size) if after < size else None
                new_offset, failures = self._patch(url, name, offset, data, digest, failures)
                self.bar.update(new_offset - offset)
                offset = new_offset
                if pending is not None and new_offset != after:
                    pending.result()  # a resync: drop the prefetched chunk, read from the new offset
                    pending = reader.submit(self._read, stream, offset, size) if offset < size else None

    def _patch(self, url: str, name: str, offset: int, data: bytes, digest: str, failures: int) -> tuple[int, int]:
        """One PATCH: (the offset the server holds after it, consecutive failures so far)."""
        headers = {**TUS, "Upload-Offset": str(offset), "Content-Type": "application/offset+octet-stream",
                   "Upload-Checksum": f"sha256 {digest}"}  # fmt: skip
        try:
            response = self.client.patch(url, content=data, headers=headers)
        except httpx.TransportError as exc:
            if failures >= RETRIES:
                raise UploadError(f"{name}: {exc}; run the command again to resume.") from exc
            time.sleep(min(30, 2 ** (failures + 1)) / 4)
            held = self.offset(url)
            if held is None:
                raise UploadError(f"{name}: the server no longer has this upload.") from exc
            return held, failures + 1
        if response.status_code in (409, 460, 423) and failures < RETRIES:  # resync and resend
            return self.offset(url) or 0, failures + 1
        if response.status_code != 204:
            raise UploadError(f"{name}: {response.status_code} {_detail(response)}")
        self.final_state = response.headers.get("Podium-Submission-State", self.final_state)
        return int(response.headers["Upload-Offset"]), 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="podium-upload", description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="the checkpoint folder (config.json, tokenizer, *.safetensors)")
    parser.add_argument("--url", required=True, help="the Podium server, e.g. https://podium.example.org")
    parser.add_argument("--token", default=os.environ.get("PODIUM_TOKEN"), help="API token (or PODIUM_TOKEN)")
    parser.add_argument("--name", help="public model name, e.g. my-org/my-model-7b (default: the folder name)")
    parser.add_argument("--type", default="pretrained", choices=["pretrained", "fine-tuned", "chat", "merge"])
    parser.add_argument("--base-model", default="")
    parser.add_argument("--licence", required=True)
    parser.add_argument("--precision", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--chat-template", action="store_true", help="apply the chat template when evaluating")
    parser.add_argument("--private", action="store_true", help="a private variant (visible only to you)")
    parser.add_argument("--chunk-mb", type=int, default=32, help="chunk size in MiB (default 32)")
    parser.add_argument("--parallel", type=int, default=1, help="weight shards sent at once (default 1: in order)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per request")
    return parser


def _submission(client: httpx.Client, args, files: dict[str, int], state: dict, key: str) -> dict:
    """The submission to upload to: the one this folder started (if the server still takes files), else a new one."""
    known = state.get(key)
    if known:
        response = client.get(f"/api/submissions/{known['id']}/")
        if response.status_code == 200 and response.json().get("status") == "UPLOADING":
            print(f"Resuming submission {known['id']}", file=sys.stderr)
            return known
    body = {"model_name": args.name or args.folder.resolve().name, "model_type": args.type, "base_model": args.base_model,
            "licence": args.licence, "precision": args.precision, "apply_chat_template": args.chat_template,
            "private": args.private, "files": files}  # fmt: skip
    response = client.post("/api/submissions/", json=body)
    if response.status_code != 201:
        raise UploadError(f"The server refused the submission ({response.status_code}): {_detail(response)}")
    known = {"id": response.json()["id"], "uploads": {}}
    state[key] = known
    _state_save(state)
    return known


def upload(args) -> str:
    if not args.token:
        raise UploadError("Give --token (or set PODIUM_TOKEN): create one on the account page.")
    folder = args.folder
    files = checkpoint_files(folder)
    state = _state_load()
    key = _state_key(args.url, folder, files)
    headers = {"Authorization": f"Bearer {args.token}", "User-Agent": "podium-upload/1"}
    with httpx.Client(base_url=args.url.rstrip("/"), headers=headers, timeout=args.timeout) as client:
        known = _submission(client, args, files, state, key)
        with tqdm(total=sum(files.values()), unit="B", unit_scale=True, unit_divisor=1024, desc="upload") as bar:
            uploader = Uploader(client, folder, chunk=args.chunk_mb << 20, bar=bar)

            def one(name: str) -> None:
                url = known["uploads"].get(name)
                if url is None or uploader.offset(url) is None:
                    url = uploader.create(known["id"], name, files[name])
                    known["uploads"][name] = url
                    _state_save(state)
                uploader.send(url, name, files[name])

            weights = sorted(n for n in files if n.lower().endswith(".safetensors"))
            others = sorted(set(files) - set(weights))
            with ThreadPoolExecutor(max_workers=max(1, args.parallel) + 1) as pool:
                small = pool.submit(lambda: [one(n) for n in others])
                with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as shards:
                    for future in [shards.submit(one, n) for n in weights]:
                        future.result()
                small.result()
        state.pop(key, None)
        _state_save(state)
        status = client.get(f"/api/submissions/{known['id']}/").json()
    return f"Submitted {known['id']}: {status.get('status')} ({args.url.rstrip('/')}/leaderboard/submissions/{known['id']}/)"


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        print(upload(args))
    except UploadError as exc:
        print(f"podium-upload: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("podium-upload: interrupted; run the same command again to resume.", file=sys.stderr)
        return 130
    return 0
