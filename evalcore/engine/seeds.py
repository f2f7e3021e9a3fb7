"""The four seeds of lm-evaluation-harness 0.4.13's ``--seed``, and what each one drives in Podium.

lm-eval's ``--seed`` is one integer (all four seeds set to it) or comma-separated values
``random,numpy,torch,fewshot``, each an integer or ``None`` (that seed is not set); default
``0,1234,1234,1234`` (``lm_eval/_cli/run.py``, ``lm_eval/_cli/utils.py:_int_or_none_list_arg_type``,
``lm_eval/evaluator.py:simple_evaluate``). Podium reads the same text and gives each seed the job it
has there:

=========  =================================================  ===========================================
seed       lm-eval 0.4.13                                     Podium
=========  =================================================  ===========================================
random     ``random.seed``: task code (``process_docs``)      ``random.seed`` before a task's code runs;
                                                              the seed of the bootstrap intervals
numpy      ``np.random.seed``: task code                      ``np.random.seed`` before a task's code runs
torch      ``torch.manual_seed``: sampling in HF ``generate``  the sampling seed of generation requests:
                                                              request ``seed + 1000 * doc_id + repeat``
fewshot    the few-shot sampler's ``random.Random(seed)``     the same
=========  =================================================  ===========================================

``None`` leaves a global generator alone as in lm-eval; the sampling and bootstrap seeds, which Podium
needs as numbers, are then drawn from the system's entropy once per run and recorded (so an unseeded
run can still be repeated exactly). The bootstrap follows the random seed rather than numpy's so that a
default run's intervals (seed 0) are the ones ``python -m evalcore rescore`` (``--seed 0``) recomputes.
"""

from __future__ import annotations

import dataclasses
import random as pyrandom
from dataclasses import dataclass

import numpy as np

DEFAULT_SEED_TEXT = "0,1234,1234,1234"  # lm-eval 0.4.13's default --seed
DEFAULT_FEWSHOT_SEED = 1234  # its fourth value, the harness's default fewshot_random_seed
SEED_NAMES = ("random", "numpy", "torch", "fewshot")
MAX_SEED = 2**32 - 1  # numpy's range (np.random.seed refuses the rest), the strictest of the four


@dataclass(frozen=True)
class Seeds:
    """The four seeds (``None``: not set) and the two numbers Podium derives from them.

    ``sampling`` and ``bootstrap`` stay ``None`` until :meth:`resolved` fills them: the torch and the
    random seed, or where those are not set a number drawn once from the system's entropy.
    """

    random: int | None = 0
    numpy: int | None = 1234
    torch: int | None = 1234
    fewshot: int | None = 1234
    sampling: int | None = None
    bootstrap: int | None = None

    def __post_init__(self) -> None:
        for name in (*SEED_NAMES, "sampling", "bootstrap"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or not 0 <= value <= MAX_SEED):  # fmt: skip
                raise ValueError(
                    f"the {name} seed must be a whole number from 0 to {MAX_SEED} or None, got {value!r}"
                )

    @classmethod
    def legacy(cls, seed: int, fewshot_seed: int | None) -> Seeds:
        """What ``evaluate(seed=S, fewshot_seed=F)`` always meant: random, sampling and bootstrap S,
        numpy not touched, few-shot F."""
        return cls(random=seed, numpy=None, torch=seed, fewshot=fewshot_seed)

    def resolved(self) -> Seeds:
        """These seeds with ``sampling`` and ``bootstrap`` filled in (drawn where the seed is not set)."""
        draw = pyrandom.SystemRandom().randrange
        return dataclasses.replace(
            self,
            sampling=self.sampling if self.sampling is not None else (
                self.torch if self.torch is not None else draw(2**31)),
            bootstrap=self.bootstrap if self.bootstrap is not None else (
                self.random if self.random is not None else draw(2**31)),
        )  # fmt: skip

    def as_list(self) -> list[int | None]:
        """The four seeds in ``--seed`` order."""
        return [self.random, self.numpy, self.torch, self.fewshot]

    def as_dict(self) -> dict:
        """The four seeds under the names lm-eval records them (``results["config"]``), and the
        sampling and bootstrap seeds Podium used."""
        return {
            "random_seed": self.random, "numpy_seed": self.numpy, "torch_seed": self.torch,
            "fewshot_seed": self.fewshot, "sampling_seed": self.sampling, "bootstrap_seed": self.bootstrap,
        }  # fmt: skip

    def seed_globals(self) -> None:
        """Seed Python's and numpy's global generators (those that are set), as lm-eval does before
        task code runs: task code may draw from them (gpqa shuffles its answers with ``random``)."""
        if self.random is not None:
            pyrandom.seed(self.random)
        if self.numpy is not None:
            np.random.seed(self.numpy)


def parse_seed(text: str | None, *, option: str = "--seed") -> tuple[Seeds, int]:
    """``--seed`` as lm-eval 0.4.13 reads it: (the seeds, how many values were given).

    One value sets all four; four set one each; three (lm-eval accepts them with a warning) take the
    fourth from the default. Each value is an integer (``int()``'s spelling: ``+3``, `` 7 ``, ``1_0``) or
    ``none`` in any case. ``None`` (the option left out, counted as 0 values) is the default
    ``0,1234,1234,1234``. Raises
    ValueError naming ``option`` for anything lm-eval refuses, and for a value numpy's seed refuses
    (below 0 or above 2**32 - 1), which lm-eval refuses too when numpy is seeded with it.
    """
    if text is None:
        return Seeds(), 0
    shown = str(text)[:60]
    items = str(text).split(",")
    if len(items) not in (1, 3, 4):
        raise ValueError(
            f"{option} takes one integer (the random, numpy, torch and few-shot seeds all set to it) or 4 "
            f"comma-separated values random,numpy,torch,fewshot, each an integer or None; got {shown!r} "
            f"({len(items)} values)"
        )
    values: list[int | None] = []
    for item in items:
        word = item.strip().lower()
        if word == "none":
            values.append(None)
            continue
        try:
            value = int(word)
        except ValueError:
            raise ValueError(
                f"{option}: {item.strip()[:40]!r} is not an integer or None (in {shown!r})"
            ) from None
        if not 0 <= value <= MAX_SEED:
            raise ValueError(
                f"{option} values must be from 0 to {MAX_SEED} (numpy's seed range) or None, got {value}"
            )
        values.append(value)
    count = len(values)
    if count == 1:
        values *= len(SEED_NAMES)
    elif count == 3:
        values.append(DEFAULT_FEWSHOT_SEED)
    return Seeds(*values), count


def as_seeds(seed: int | Seeds, fewshot_seed: int | None = None) -> Seeds:
    """The engine's ``seed=`` / ``fewshot_seed=`` options as resolved :class:`Seeds`.

    ``seed`` is a :class:`Seeds` (then ``fewshot_seed`` is left out: the few-shot seed is its fourth) or,
    as before the four seeds existed, one integer for the random, sampling and bootstrap seeds with
    ``fewshot_seed`` (default 1234) for the few-shot sampler and numpy's generator left alone.
    """
    if isinstance(seed, Seeds):
        if fewshot_seed is not None:
            raise ValueError("give the few-shot seed once: as Seeds(fewshot=...) when seed is a Seeds")
        return seed.resolved()
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be a whole number or a Seeds, got {seed!r}")
    return Seeds.legacy(seed, DEFAULT_FEWSHOT_SEED if fewshot_seed is None else fewshot_seed).resolved()
