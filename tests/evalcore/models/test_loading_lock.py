"""Models are built one at a time in a process: building one imports transformers' lazily loaded
modules, and two threads doing that at once (an evaluation and a judge starting together in one
threads-pool worker) got "cannot import name 'AutoModelForCausalLM' from 'transformers'"."""

from __future__ import annotations

import threading

import pytest

from evalcore.models import BACKENDS, load_backend

BUILDING = threading.Event()  # set while a ProbeBackend is being built
OVERLAPS: list[str] = []


class ProbeBackend:
    """Stands in only for a backend's construction: it notes another build that starts beside it."""

    def __init__(self, *, label: str) -> None:
        if BUILDING.is_set():
            OVERLAPS.append(label)
        BUILDING.set()
        try:
            # Long enough for the other thread to get here if nothing held it back; the assertion below
            # does not depend on it: with the lock no other build can start in this window at all.
            threading.Event().wait(0.5)
        finally:
            BUILDING.clear()
        self.label = label


@pytest.fixture
def probe(monkeypatch):
    monkeypatch.setitem(BACKENDS, "probe", f"{__name__}:ProbeBackend")
    OVERLAPS.clear()
    BUILDING.clear()


def test_two_threads_loading_at_once_build_one_after_the_other(probe):
    start, built, errors = threading.Barrier(2), [], []

    def build(label: str) -> None:
        start.wait()
        try:
            built.append(load_backend("probe", label=label).label)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=build, args=(label,)) for label in ("evaluation", "judge")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors and sorted(built) == ["evaluation", "judge"]
    assert OVERLAPS == [], f"{OVERLAPS} started building while another model was being built"


def test_a_failed_build_releases_the_lock(probe):
    """Another thread can build after a build that raised (the lock is not left held)."""
    with pytest.raises(TypeError):
        load_backend("probe", nonsense=1)
    done = []
    other = threading.Thread(target=lambda: done.append(load_backend("probe", label="next").label))
    other.start()
    other.join(timeout=30)
    assert done == ["next"]
