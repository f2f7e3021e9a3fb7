"""Resumable uploads over loopback through the production server, against ``cp`` on the same disk.

    OMP_NUM_THREADS=1 .venv/bin/python bench/uploads.py                     # 4 GB and 1 GB checkpoints
    .venv/bin/python bench/uploads.py --sizes-gb 1 0.25 --dir /mnt/scratch  # where the disk is short

For each size: a generated checkpoint (SmolLM2's config and tokenizer files, one bfloat16
``model.safetensors`` of that size, random bytes) is uploaded by the ``podium-upload`` command
(32 MiB chunks, each with the checksum it sends by default, CRC-32 since 2026-12-01 and SHA-256
before; the server makes the weights' two SHA-256 digests as the bytes arrive) to gunicorn with two
sync workers (production's HTTP server, ``config.settings.prod``, PostgreSQL, a connection pool of
2 per process as production sets ``DATABASE_POOL_SIZE``), and the same
file is copied with ``cp`` to the same disk in the same run (page cache flushed with ``sync`` before
each). The server acknowledges a chunk once it is on disk (``LEADERBOARD_UPLOAD_FSYNC``, on by
default; ``--no-fsync`` measures the page-cache acknowledgement instead), so ``cp`` is timed both
ways: until ``cp`` returns (its bytes in the page cache) and until the copy is on disk too (``cp``,
then ``fsync`` of the copy). Reported: MB/s of the upload and of both copies and the ratios (end to
end: creating the submission, every chunk,
and the final checks and tensors digest that make it a PENDING submission), the CPU milliseconds per
MB spent by the web workers, the client and ``cp`` (a machine shared with other work stretches the
wall clock, much less these), the peak RSS of the web processes (sampled every 20 ms; it must not
grow with the file), and, for the largest size, a second
upload cut at 50% (the client killed) and resumed by running the command again: the time from the
restart to the first new byte accepted and the bytes sent twice. Writes bench/out/uploads.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench import web_servers  # noqa: E402

SMOLLM2 = Path(os.environ.get("PODIUM_MODELS_DIR", ROOT / "var" / "models")) / "SmolLM2-135M-Instruct"
BLOCK = 64 << 20


def make_checkpoint(folder: Path, size: int, seed: int) -> Path:
    """config + tokenizer files and one bfloat16 safetensors file of exactly ``size`` bytes."""
    folder.mkdir(parents=True)
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(SMOLLM2 / name, folder / name)
    tensors, n_tensors = {}, 64
    header = b""
    for _ in range(3):  # the header's length changes the data size: settle it
        data = size - 8 - len(header)
        per = (data // n_tensors) // 2 * 2
        last = data - per * (n_tensors - 1)
        tensors, offset = {}, 0
        for k in range(n_tensors):
            nbytes = per if k < n_tensors - 1 else last
            tensors[f"layers.{k:03d}.weight"] = {"dtype": "BF16", "shape": [nbytes // 2], "data_offsets": [offset, offset + nbytes]}
            offset += nbytes
        raw = json.dumps(tensors).encode()
        header = raw + b" " * (-len(raw) % 8)
    assert data % 2 == 0 and (size - 8 - len(header)) == data, "pick an even size"
    block = np.random.default_rng(seed).bytes(BLOCK)
    with open(folder / "model.safetensors", "wb") as out:
        out.write(struct.pack("<Q", len(header)) + header)
        left = data
        while left:
            out.write(block[: min(BLOCK, left)])
            left -= min(BLOCK, left)
            block = block[1:] + block[:1] if left else block  # no two blocks alike (duplicate checks stay honest)
    return folder


def server_env(db_url: str, var: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE", "REDIS_URL"}}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.prod", SECRET_KEY=secrets.token_urlsafe(48), SECURE_SSL="0",
        DEBUG="0", DATABASE_URL=db_url, CELERY_BROKER_URL="memory://", PODIUM_VAR_DIR=str(var),
        LEADERBOARD_SUBMISSIONS_PER_WEEK="1000", API_THROTTLE_SUBMISSIONS="1000/minute", OMP_NUM_THREADS="1",
        DATABASE_POOL_SIZE="2",  # as a production web process has it (README): not a new connection per chunk
        PYTHONUNBUFFERED="1",
    )  # fmt: skip
    return env


def setup_database() -> str:
    """Migrate, and an owner with an API token."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from leaderboard.accounts.tokens import token_create

    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user("bench@example.org", "bench@example.org", secrets.token_urlsafe(16))
    return token_create(owner=owner, name="bench")[1]


def start_server(env: dict, log: Path) -> tuple[int, subprocess.Popen]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    command = [str(Path(sys.executable).parent / "gunicorn"), "--bind", f"127.0.0.1:{port}", "--workers", "2",
               "--log-level", "warning", "config.wsgi:application"]  # fmt: skip
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    web_servers.wait_answering(port, b"OPTIONS /leaderboard/uploads/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                               b"HTTP/1.1 204", f"gunicorn (see {log})")  # fmt: skip
    return port, server


class RssSampler(threading.Thread):
    """The largest RSS of any gunicorn worker (the master's children), every 20 ms."""

    def __init__(self, master: subprocess.Popen):
        super().__init__(daemon=True)
        self.master, self.peak, self.stop = psutil.Process(master.pid), 0, threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for child in self.master.children():
                try:
                    self.peak = max(self.peak, child.memory_info().rss)
                except psutil.NoSuchProcess:
                    pass
            time.sleep(0.02)


def client(folder: Path, port: int, token: str, state: Path, name: str, work: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "podium_client", str(folder), "--url", f"http://127.0.0.1:{port}",
               "--token", token, "--licence", "mit", "--name", name, "--chunk-mb", "32"]  # fmt: skip
    env = {**os.environ, "PODIUM_STATE_FILE": str(state)}
    log = (work / f"client-{name.replace('/', '-')}.log").open("a")  # its progress bar and errors
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log, text=True)


def client_log(work: Path, name: str) -> str:
    """The end of a client's stderr (what it said before it failed)."""
    path = work / f"client-{name.replace('/', '-')}.log"
    return path.read_text(errors="replace")[-3000:] if path.exists() else ""


def timed_cp(source: Path, target: Path) -> tuple[float, float, float]:
    """Wall seconds of ``cp`` (until its bytes are in the page cache), CPU seconds of ``cp``, and the
    wall seconds of the ``fsync`` of the copy after it (until its bytes are on disk as well)."""
    subprocess.run(["sync"], check=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(["cp", str(source), str(target)], check=True)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    fd = os.open(target, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    flush = time.perf_counter() - start
    target.unlink()
    return seconds, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, flush


def server_cpu_s(server: subprocess.Popen) -> float:
    total = 0.0
    for child in psutil.Process(server.pid).children():
        times = child.cpu_times()
        total += times.user + times.system
    return total


def upload_once(folder: Path, port: int, token: str, work: Path, server: subprocess.Popen, name: str) -> dict:
    """One upload by the command; wall time, peak RSS of the web workers, and the CPU seconds the
    web workers and the client spent (a loaded machine stretches the first, not these)."""
    subprocess.run(["sync"], check=True)
    sampler = RssSampler(server)
    sampler.start()
    server_cpu = server_cpu_s(server)
    client_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    run = client(folder, port, token, work / f"state-{name}.json", name, work)
    out, _ = run.communicate(timeout=3600)
    seconds = time.perf_counter() - start
    sampler.stop.set()
    sampler.join()
    if run.returncode != 0 or "PENDING" not in out:
        raise SystemExit(f"upload failed (exit {run.returncode}): {out}\n{client_log(work, name)}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"seconds": seconds, "peak_rss_mb": sampler.peak / 2**20, "server_cpu_s": server_cpu_s(server) - server_cpu,
            "client_cpu_s": after.ru_utime + after.ru_stime - client_cpu.ru_utime - client_cpu.ru_stime}  # fmt: skip


def cut_and_resume(folder: Path, port: int, token: str, work: Path, var: Path) -> dict:
    """Kill the client at 50% of the weights, start it again, time until the offset moves on."""
    size = (folder / "model.safetensors").stat().st_size
    state = work / "state-resume.json"
    first = client(folder, port, token, state, "bench/resumed", work)
    uploads = var / "media" / "uploads"

    def held() -> int:
        files = list(uploads.glob("*/model.safetensors")) if uploads.exists() else []
        return max((f.stat().st_size for f in files), default=0)

    while held() < size // 2:
        if first.poll() is not None:
            raise SystemExit(f"the client finished before 50% (exit {first.returncode}): {client_log(work, 'bench/resumed')}")
        time.sleep(0.005)
    first.send_signal(signal.SIGKILL)
    first.wait()
    at_cut = held()
    time.sleep(1.0)  # the server notices the dropped connection and cuts the partial chunk off
    kept = held()
    start = time.perf_counter()
    second = client(folder, port, token, state, "bench/resumed", work)
    while held() <= kept and second.poll() is None:
        time.sleep(0.002)
    resumed_after = time.perf_counter() - start
    out, _ = second.communicate(timeout=3600)
    total = time.perf_counter() - start
    if second.returncode != 0 or "PENDING" not in out:
        raise SystemExit(f"resumed upload failed (exit {second.returncode}): {out}\n{client_log(work, 'bench/resumed')}")
    return {"cut_at_bytes": at_cut, "kept_bytes": kept, "resend_bytes": at_cut - kept,
            "seconds_to_first_new_byte": resumed_after, "seconds_to_finish": total}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-gb", type=float, nargs="+", default=[4.0, 1.0])
    parser.add_argument("--dir", type=Path, default=ROOT / "bench" / "out" / "uploads_work", help="work folder (same disk)")
    parser.add_argument("--no-fsync", action="store_true", help="the server acknowledges chunks from the page cache")
    args = parser.parse_args()
    sizes = [int(gb * 1e9) // 2 * 2 for gb in args.sizes_gb]
    work = args.dir
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    need = max(sizes) * 4 + sum(sizes)
    free = shutil.disk_usage(work).free
    if free < need:
        raise SystemExit(f"{free / 1e9:.1f} GB free in {work}; this run needs about {need / 1e9:.1f} GB: pass smaller --sizes-gb")
    var = work / "var"
    env = server_env(web_servers.database_url("podium_bench_uploads"), var)
    env["LEADERBOARD_UPLOAD_FSYNC"] = "0" if args.no_fsync else "1"
    os.environ.update({k: env[k] for k in ("DJANGO_SETTINGS_MODULE", "SECRET_KEY", "SECURE_SSL", "DEBUG", "DATABASE_URL",
                                            "CELERY_BROKER_URL", "PODIUM_VAR_DIR")})  # fmt: skip
    token = setup_database()
    port, server = start_server(env, work / "server.log")
    report: dict = {"cores": os.cpu_count(), "load_average_before": os.getloadavg(), "free_disk_gb": free / 1e9,
                    "server_fsync": not args.no_fsync, "runs": []}  # fmt: skip
    try:
        for k, size in enumerate(sizes):
            folder = make_checkpoint(work / f"ckpt-{k}", size, seed=k)
            total = sum(p.stat().st_size for p in folder.iterdir())
            cp_s, cp_cpu, flush_s = timed_cp(folder / "model.safetensors", work / "copy.safetensors")
            up = upload_once(folder, port, token, work, server, f"bench/m{k}")
            row = {"bytes": total, "cp_mb_s": size / cp_s / 1e6, "cp_on_disk_mb_s": size / (cp_s + flush_s) / 1e6,
                   "upload_mb_s": total / up["seconds"] / 1e6, "upload_s": up["seconds"], "cp_s": cp_s,
                   "cp_fsync_s": flush_s, "cp_cpu_s": cp_cpu, **up}  # fmt: skip
            row["ratio_upload_to_cp"] = row["upload_mb_s"] / row["cp_mb_s"]
            row["ratio_upload_to_cp_on_disk"] = row["upload_mb_s"] / row["cp_on_disk_mb_s"]
            row["cpu_ms_per_mb"] = {"server": 1000 * up["server_cpu_s"] / (total / 1e6),
                                    "client": 1000 * up["client_cpu_s"] / (total / 1e6),
                                    "cp": 1000 * cp_cpu / (size / 1e6)}  # fmt: skip
            print(f"{total / 1e9:.2f} GB: upload {row['upload_mb_s']:.0f} MB/s; cp {row['cp_mb_s']:.0f} MB/s "
                  f"(ratio {row['ratio_upload_to_cp']:.2f}), cp + fsync {row['cp_on_disk_mb_s']:.0f} MB/s "
                  f"(ratio {row['ratio_upload_to_cp_on_disk']:.2f}); web peak RSS {row['peak_rss_mb']:.0f} MB; CPU ms per MB: "
                  + ", ".join(f"{k} {v:.2f}" for k, v in row["cpu_ms_per_mb"].items()), flush=True)  # fmt: skip
            if k == 0:
                shutil.rmtree(var / "media" / "submissions", ignore_errors=True)
                make_checkpoint(work / "ckpt-resume", size, seed=100)
                row["resume"] = cut_and_resume(work / "ckpt-resume", port, token, work, var)
                shutil.rmtree(work / "ckpt-resume")
                print(f"  cut at 50%, resumed: first new byte after {row['resume']['seconds_to_first_new_byte']:.2f} s, "
                      f"{row['resume']['resend_bytes'] / 2**20:.0f} MiB sent twice", flush=True)  # fmt: skip
            report["runs"].append(row)
            shutil.rmtree(folder)
            shutil.rmtree(var / "media" / "submissions", ignore_errors=True)
    finally:
        server.terminate()
        server.wait(timeout=30)
    report["load_average_after"] = os.getloadavg()
    (ROOT / "bench" / "out" / "uploads.json").write_text(json.dumps(report, indent=2))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
