"""``podium-upload DIR --url URL --token TOKEN --name NAME --licence L``: submit a local checkpoint.

Creates the submission (``POST /api/submissions/``), then sends every file through the tus endpoint
in chunks, each with its checksum (CRC-32 by default: a transport check the server verifies before it
keeps the chunk; the server makes the weights' SHA-256 digests itself), and a terminal progress bar. The weights go one shard at a time
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
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from tqdm import tqdm

TUS = {"Tus-Resumable": "1.0.0"}
RETRIES = 8
PIECE = 1 << 18  # a chunk is handed to httpx in pieces of this size (see Uploader._patch)
CHECKSUMS = ("crc32", "sha256", "sha1")
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


_STATE_LOCK = threading.Lock()


def _state_save(state: dict, change=None) -> None:
    """Apply ``change`` (a function) to ``state`` and write it, atomically. The small files' thread
    and the shards' threads record their uploads at once: without the lock one thread's rename
    could take another's half-written temporary file (a state file that no longer parses, so the
    next run starts a new submission) or leave it none to rename (the upload crashed)."""
    with _STATE_LOCK:
        if change is not None:
            change()
        STATE_FILE.parent.mkdir(parents=True, exist_ok=True)
        temporary = STATE_FILE.with_name(f"{STATE_FILE.name}.{os.getpid()}.tmp")  # one per process
        temporary.write_text(json.dumps(state))
        temporary.replace(STATE_FILE)


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500]
    return body.get("detail") or json.dumps(body.get("errors", body))


def chunk_checksum(algorithm: str, pieces: list[bytes]) -> str:
    """The ``Upload-Checksum`` value of a chunk: the algorithm and the base64 digest (CRC-32 as 4
    bytes, big-endian, as tus servers read it)."""
    if algorithm == "crc32":
        crc = 0
        for piece in pieces:
            crc = zlib.crc32(piece, crc)
        digest = crc.to_bytes(4, "big")
    else:
        hasher = hashlib.new(algorithm)
        for piece in pieces:
            hasher.update(piece)
        digest = hasher.digest()
    return f"{algorithm} {base64.b64encode(digest).decode()}"


def server_checksum(client: httpx.Client, wanted: str | None) -> str:
    """The checksum algorithm to send: ``wanted``, or crc32 where the server offers it, else sha256."""
    response = client.options("/leaderboard/uploads/")
    offered = [a.strip() for a in response.headers.get("Tus-Checksum-Algorithm", "").split(",") if a.strip()]
    if wanted is not None:
        if wanted not in offered:
            raise UploadError(f"The server does not take {wanted} checksums (it offers: {', '.join(offered) or 'none'}).")
        return wanted
    return "crc32" if "crc32" in offered else "sha256"


class Uploader:
    def __init__(self, client: httpx.Client, folder: Path, *, chunk: int, bar: tqdm, checksum: str = "crc32"):
        self.client, self.folder, self.chunk, self.bar, self.checksum = client, folder, chunk, bar, checksum
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

    def _read(self, stream, offset: int, size: int, buffer: bytearray) -> tuple[int, memoryview, str]:
        """The chunk at ``offset``, read into ``buffer`` (one of two, reused for the whole file:
        a fresh 32 MiB object per chunk cost more in page faults than reading it), and its checksum."""
        view = memoryview(buffer)[: min(self.chunk, size - offset)]
        stream.seek(offset)
        filled = 0
        while filled < len(view):
            n = stream.readinto(view[filled:])
            if not n:
                raise UploadError(f"{self.folder}: a file became shorter while it was being sent.")
            filled += n
        return offset, view, chunk_checksum(self.checksum, [view])

    def send(self, url: str, name: str, size: int) -> None:
        """Send ``name`` from the server's offset to the end, retrying a dropped connection. The
        next chunk is read and checksummed (on a second thread, into the other buffer) while the
        current one is on the wire."""
        offset = self.offset(url)
        if offset is None:
            raise UploadError(f"{name}: the server no longer has this upload.")
        self.bar.update(offset)
        buffers = [bytearray(min(self.chunk, size)) for _ in range(2)]
        turn = 0

        def read_next(at: int):  # into the buffer the chunk before the current one used
            nonlocal turn
            turn ^= 1
            return reader.submit(self._read, stream, at, size, buffers[turn]) if at < size else None

        with open(self.folder / name, "rb", buffering=0) as stream, ThreadPoolExecutor(max_workers=1) as reader:
            pending = read_next(offset)
            failures = 0
            while offset < size:
                start, data, digest = pending.result()
                if start != offset:
                    start, data, digest = self._read(stream, offset, size, buffers[turn])
                after = offset + len(data)
                pending = read_next(after)
                new_offset, failures = self._patch(url, name, offset, data, digest, failures)
                self.bar.update(new_offset - offset)
                offset = new_offset
                if new_offset != after:  # a resync: drop the prefetched chunk (if any), read from the new offset
                    if pending is not None:
                        pending.result()
                    pending = read_next(offset)

    def _patch(self, url: str, name: str, offset: int, data: memoryview, checksum: str,
               failures: int) -> tuple[int, int]:  # fmt: skip
        """One PATCH: (the offset the server holds after it, consecutive failures so far).

        The body goes as pieces of ``PIECE`` bytes: httpx hands each to one ``send`` after copying it
        into a bytes object (cheap at this size, and the memory is reused), where one 32 MiB bytes
        object was copied again, what was left of it, after every partial ``send``."""
        headers = {**TUS, "Upload-Offset": str(offset), "Content-Type": "application/offset+octet-stream",
                   "Content-Length": str(len(data)), "Upload-Checksum": checksum}  # fmt: skip
        pieces = [data[i : i + PIECE] for i in range(0, len(data), PIECE)]
        try:
            response = self.client.patch(url, content=pieces, headers=headers)
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
    parser.add_argument("--open-weights", action="store_true",
                        help="anyone may download these weights (shown on the board; default: not open)")  # fmt: skip
    parser.add_argument("--chunk-mb", type=int, default=32, help="chunk size in MiB (default 32)")
    parser.add_argument("--checksum", choices=CHECKSUMS, default=None,
                        help="each chunk's checksum (default: crc32 where the server offers it, else sha256)")
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
            "private": args.private, "open_weights": args.open_weights, "files": files}  # fmt: skip
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
        checksum = server_checksum(client, args.checksum)
        known = _submission(client, args, files, state, key)
        with tqdm(total=sum(files.values()), unit="B", unit_scale=True, unit_divisor=1024, desc="upload") as bar:
            uploader = Uploader(client, folder, chunk=args.chunk_mb << 20, bar=bar, checksum=checksum)

            def one(name: str) -> None:
                url = known["uploads"].get(name)
                if url is None or uploader.offset(url) is None:
                    url = uploader.create(known["id"], name, files[name])
                    _state_save(state, lambda: known["uploads"].__setitem__(name, url))
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
