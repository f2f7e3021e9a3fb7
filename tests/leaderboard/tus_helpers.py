"""Speaking tus to the Django test client: create a submission, create uploads, send chunks."""

from __future__ import annotations

import base64
from pathlib import Path

from podium_client.upload import chunk_checksum

TUS = {"Tus-Resumable": "1.0.0"}
UPLOADS = "/leaderboard/uploads/"
API = "/api/submissions/"
METADATA = {"model_name": "acme/tiny-llama", "model_type": "pretrained", "licence": "apache-2.0", "precision": "float32"}


def declared(folder: Path, **sizes: int) -> dict[str, int]:
    files = {p.name: p.stat().st_size for p in sorted(folder.iterdir())}
    files.update({k.replace("__", "."): v for k, v in sizes.items()})
    return files


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def create_draft(client, files: dict[str, int], headers=None, **fields):
    return client.post(API, {**METADATA, **fields, "files": files}, content_type="application/json", headers=headers or {})


def create_upload(client, draft_id: str, name: str, length: int, headers=None):
    meta = f"submission {b64(draft_id)},filename {b64(name)}"
    return client.post(UPLOADS, headers={**TUS, "Upload-Length": str(length), "Upload-Metadata": meta, **(headers or {})})


def checksum(data: bytes, algorithm: str = "sha256") -> str:
    return chunk_checksum(algorithm, [data])


def patch(client, url: str, offset: int, data: bytes, headers=None, with_checksum: bool = True, algorithm="crc32"):
    extra = {**TUS, "Upload-Offset": str(offset), **(headers or {})}
    if with_checksum:
        extra.setdefault("Upload-Checksum", checksum(data, algorithm))
    return client.generic("PATCH", url, data, content_type="application/offset+octet-stream", headers=extra)


def send_file(client, draft_id: str, name: str, data: bytes, chunk: int = 1 << 16, headers=None):
    """Create the upload and send it in chunks; the last response."""
    created = create_upload(client, draft_id, name, len(data), headers)
    assert created.status_code == 201, created.content
    url = created["Location"]
    response = created
    for start in range(0, len(data), chunk):
        response = patch(client, url, start, data[start : start + chunk], headers)
        if response.status_code != 204:
            return response
        assert int(response["Upload-Offset"]) == min(start + chunk, len(data))
    return response
