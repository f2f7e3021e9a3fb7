"""Running a judge run on a worker: answers, judgments in both orders, scores (``evalcore.judging``).

Every result is keyed: answers by (model, instruction set hash, index), judgments by (run, index,
order), cached verdicts by (judge key, protocol hash, prompt hash). A retry after a worker died
reuses every stored answer and verdict and overwrites the rest, never duplicating a row; judging a
second model re-reads the first one's verdicts from the cache (no model call) to refit the
length-controlled win rates across all judged models.
"""

from __future__ import annotations

import logging
import math
import time

from django.db import transaction
from django.utils import timezone

from evalcore.judging import JudgmentCache, PairItem, judge_key, judge_pairs
from evalcore.judging.cost import MeteredBackend, cost_per_1000, logprob_prompt_tokens
from evalcore.judging.run import Instruction, judge_run
from evalcore.models.base import GenerationRequest
from leaderboard.judging.configs import (
    answerer_of,
    instructions_check,
    instructions_sha256,
    judge_spec,
    model_load,
    protocol_of,
)
from leaderboard.judging.grading_runner import grade_run_execute
from leaderboard.judging.states import answers_claim, judge_run_progress
from leaderboard.judging.store import DatabaseStore
from leaderboard.models import JudgeAnswer, JudgeConfig, JudgeRun, Judgment

log = logging.getLogger(__name__)

ROUNDS = 200  # Bradley-Terry bootstrap rounds over judgments
SEED = 0
ANSWER_POLL_S = 2.0  # how often a run waiting for another run's answers looks for them
ANSWER_WAIT_MAX_S = 3600.0


def answers_generate(backend, instructions: list[str], *, generation: dict, max_new_tokens: int,
                     progress=None) -> list[str]:  # fmt: skip
    """Each instruction's answer, decoded as ``generation`` says (greedy unless a temperature is set).

    Backends that render chat prompts (``hf``, ``vllm``) generate in batches; others answer one chat
    request per instruction. Sampling is seeded per instruction, so a retry gives the same answers.
    """
    system = [{"role": "system", "content": generation["system_prompt"]}] if generation.get("system_prompt") else []
    conversations = [[*system, {"role": "user", "content": text}] for text in instructions]
    temperature, top_p, seed = generation.get("temperature", 0.0), generation.get("top_p", 1.0), generation.get("seed", 0)
    contexts = None
    if not getattr(backend, "sends_messages", False):  # openai-chat: the server applies its own template
        try:
            contexts = [backend.chat_context(c) for c in conversations]
        except ValueError:
            contexts = None
    if contexts is not None:
        requests = [
            GenerationRequest(context=c, max_gen_toks=max_new_tokens, do_sample=temperature > 0,
                              temperature=temperature, top_p=top_p, seed=seed + i)
            for i, c in enumerate(contexts)
        ]  # fmt: skip
        return [r.text for r in backend.generate_until(requests, progress=progress)]
    params = {"max_new_tokens": max_new_tokens, "temperature": temperature, "top_p": top_p}
    return [backend.chat(c, {**params, "seed": seed + i}) for i, c in enumerate(conversations)]


def _stored_answers(model, set_sha: str) -> dict[int, str]:
    rows = JudgeAnswer.objects.filter(model=model, instructions_sha256=set_sha, turn=1).values_list("idx", "text")
    return dict(rows)


def answers_ensure(model, instructions: list[str], set_sha: str, *, max_new_tokens: int, report,
                   run_id: int | None = None) -> list[str]:  # fmt: skip
    """The stored answers of ``model`` to the instruction set, generating (and storing) the missing ones.

    With ``run_id``, generation is claimed first (:func:`~leaderboard.judging.states.answers_claim`):
    while another live run generates the same answers, this one waits for them (its heartbeat kept).
    """
    stored = _stored_answers(model, set_sha)
    missing = [i for i in range(len(instructions)) if i not in stored]
    waited = 0.0
    while missing and run_id is not None and not answers_claim(run_id, model.name, set_sha, len(missing)):
        if waited >= ANSWER_WAIT_MAX_S:
            raise RuntimeError(f"waited {waited:.0f} s for another run to generate {model.name}'s answers")
        report(f"waiting for the answers of {model.name}", 0, len(missing))
        time.sleep(ANSWER_POLL_S)
        waited += ANSWER_POLL_S
        stored = _stored_answers(model, set_sha)
        missing = [i for i in range(len(instructions)) if i not in stored]
    if missing:
        spec, generation = answerer_of(model)
        log.info("judge answers: %s answers %d instructions (%s)", model.name, len(missing), generation["source"])
        done = [0]

        def progress(n: int) -> None:
            done[0] += n
            report(f"answers of {model.name}", done[0], len(missing))

        texts = answers_generate(model_load(spec), [instructions[i] for i in missing], generation=generation,
                                 max_new_tokens=max_new_tokens, progress=progress)  # fmt: skip
        rows = [JudgeAnswer(model=model, instructions_sha256=set_sha, idx=i, text=t) for i, t in zip(missing, texts)]
        JudgeAnswer.objects.bulk_create(rows, update_conflicts=True, unique_fields=["model", "instructions_sha256", "idx", "turn"],
                                        update_fields=["text"])  # fmt: skip
        stored.update(zip(missing, texts))
    elif waited:
        log.info("judge answers: %s's answers were generated by another run (waited %.0f s)", model.name, waited)
    return [stored[i] for i in range(len(instructions))]


def _peers(run: JudgeRun, keys: dict) -> list[JudgeRun]:
    """The latest finished run of every other model under the same config, judge, protocol and answers."""
    latest: dict[int, JudgeRun] = {}
    candidates = JudgeRun.objects.filter(config=run.config, status=JudgeRun.Status.FINISHED, **keys).exclude(
        model=run.model
    ).select_related("model").order_by("id")
    for peer in candidates:
        latest[peer.model_id] = peer
    return list(latest.values())


def _finite(x):
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None


def run_results(entry: dict, rating: dict | None, notes: list[str], style: dict | None = None) -> dict:
    """The numbers a run shows: the win rate, the discrete win rate and the LC win rate, each with its 95%
    interval as ``evalcore.judging.judge_run`` made it (mid-p at the effective size; ``delta-mid-p`` for LC),
    the method in ``*_interval`` and the interval's standard error (None where it is lopsided), over ``n``
    pairs; the Bradley-Terry rating and its style-controlled variant (answer length and markdown as
    covariates), each with an interval."""
    out = {"n": entry.get("n", 0), "failed_pairs": entry.get("failed_pairs", 0), "level": entry.get("level"),
           "bradley_terry": rating, "bradley_terry_style": style, "notes": notes}  # fmt: skip
    for value, prefix, se in (("win_rate", "win_rate", "standard_error"),
                              ("discrete_win_rate", "discrete", "discrete_standard_error"),
                              ("lc_win_rate", "lc", "lc_standard_error")):  # fmt: skip
        out.update({value: _finite(entry.get(value)), f"{prefix}_ci_low": _finite(entry.get(f"{prefix}_ci_low")),
                    f"{prefix}_ci_high": _finite(entry.get(f"{prefix}_ci_high")), se: _finite(entry.get(se)),
                    f"{prefix}_interval": entry.get(f"{prefix}_interval")})  # fmt: skip
    return out


def _judgments_store(run: JudgeRun, judged) -> None:
    rows = []
    for _, j in judged:
        idx = int(str(j.pair_id).rsplit("/", 1)[1])
        rows.append(Judgment(run=run, idx=idx, order=j.order, p_first=j.p_first, verdict=j.verdict or "",
                             winner=j.winner or "", weight=j.weight, raw=j.raw or "", prompt_sha256=j.prompt_sha256,
                             ok=j.ok, error=(j.error or "")[:500]))  # fmt: skip
    fields = ["p_first", "verdict", "winner", "weight", "raw", "prompt_sha256", "ok", "error"]
    Judgment.objects.bulk_create(rows, batch_size=500, update_conflicts=True, unique_fields=["run", "idx", "order"],
                                 update_fields=fields)  # fmt: skip


def judge_run_execute(run_id: int) -> None:
    """Judge a RUNNING run's model against the baseline (a single-answer config: grade its answers,
    :mod:`leaderboard.judging.grading_runner`) and store everything; raises on failure."""
    run = JudgeRun.objects.select_related("config", "config__baseline", "config__judge_model", "model").get(pk=run_id)
    if run.status != JudgeRun.Status.RUNNING:
        raise RuntimeError(f"judge run {run_id} is {run.status}, not RUNNING")
    config = run.config
    if config.kind == JudgeConfig.Kind.SINGLE:
        grade_run_execute(run_id)
        return
    if run.model_id == config.baseline_id:
        raise ValueError(f"{run.model.name} is this judge's baseline: it is not judged against itself")
    instructions = instructions_check(config.instructions)
    set_sha = instructions_sha256(instructions, config.max_new_tokens)
    progress: dict = {}

    def report(stage: str, done: int, total: int) -> None:
        progress.update(stage=stage, done=done, total=total)
        judge_run_progress(run_id, progress)

    report("loading the judge", 0, 1)
    judge = model_load(judge_spec(config))
    protocol = protocol_of(config, tokenizer=getattr(judge, "tokenizer", None))
    keys = {"judge_key": judge_key(judge)[:200], "protocol_sha256": protocol.sha256, "instructions_sha256": set_sha}
    JudgeRun.objects.filter(pk=run_id).update(**keys)
    answers = {
        config.baseline.name: answers_ensure(config.baseline, instructions, set_sha, run_id=run_id,
                                             max_new_tokens=config.max_new_tokens, report=report),
        run.model.name: answers_ensure(run.model, instructions, set_sha, max_new_tokens=config.max_new_tokens,
                                       report=report, run_id=run_id),
    }  # fmt: skip
    report("judging", 0, 2 * len(instructions))
    cache = JudgmentCache(DatabaseStore(), judge_key=judge_key(judge), protocol_sha256=protocol.sha256)
    items = [Instruction(str(i), text) for i, text in enumerate(instructions)]
    base, mine = answers[config.baseline.name], answers[run.model.name]
    pairs = [PairItem(f"{run.model.name}/{ins.instruction_id}", ins.text, base[k], mine[k]) for k, ins in enumerate(items)]
    metered = MeteredBackend(judge)
    started = time.monotonic()
    own = judge_pairs(metered, protocol, pairs, cache=cache)
    fresh = sum(1 for j in own if not j.cached)
    seconds = time.monotonic() - started
    # Tokens as the backend's calls show them (endpoints, generated verdicts); the hf log-prob path reads
    # the model directly, so its prompts are counted with the judge's tokenizer (cached ones left out).
    tokenizer = getattr(judge, "tokenizer", None)
    if metered.prompt_tokens is None and protocol.verdict.method == "logprob" and tokenizer is not None:
        metered.add_tokens(prompt=logprob_prompt_tokens(tokenizer, protocol, pairs, judgments=own))
    cost = cost_per_1000(seconds=seconds, judgments=fresh, prompt_tokens=metered.prompt_tokens,
                         completion_tokens=metered.completion_tokens) if fresh else None  # fmt: skip
    log.info("judge run %s: %d judgments, %d computed, %d from the cache", run_id, len(own), fresh, len(own) - fresh)
    _judgments_store(run, [(run.model.name, j) for j in own])
    _scores_refresh(run_id, judge, protocol, cache, items, answers, keys, progress, fresh, cost)


def _scores_refresh(run_id, judge, protocol, cache, items, answers, keys, progress, fresh, cost=None) -> None:
    """Refit the scores of every model judged under the same config, judge and protocol (their verdicts
    come from the cache), then mark the run FINISHED; serialised per config, so two runs finishing at
    once each see the other."""
    with transaction.atomic():
        run = JudgeRun.objects.select_related("config", "config__baseline", "model").get(pk=run_id)
        JudgeConfig.objects.select_for_update().get(pk=run.config_id)
        config = run.config
        peers = [p for p in _peers(run, keys) if p.model_id != config.baseline_id]
        texts = [i.text for i in items]
        for peer in peers:
            answers[peer.model.name] = answers_ensure(peer.model, texts, keys["instructions_sha256"],
                                                      max_new_tokens=config.max_new_tokens, report=lambda *a: None)  # fmt: skip
        results, judged = judge_run(judge, protocol, items, answers, baseline=config.baseline.name, cache=cache,
                                    rounds=ROUNDS, seed=SEED)  # fmt: skip
        ratings = (results.get("bradley_terry") or {}).get("ratings", {})
        styled = (results.get("bradley_terry_style") or {}).get("ratings", {})
        for peer in JudgeRun.objects.select_for_update().filter(pk__in=[p.pk for p in peers]).select_related("model"):
            kept = {k: (peer.results or {}).get(k) for k in ("judgments_computed", "cost")}
            peer.results = run_results(results["models"][peer.model.name], ratings.get(peer.model.name), results["notes"],
                                       styled.get(peer.model.name))  # fmt: skip
            peer.results.update(kept)
            peer.save(update_fields=["results", "updated_at"])
        run = JudgeRun.objects.select_for_update().get(pk=run_id)
        run.results = run_results(results["models"][run.model.name], ratings.get(run.model.name), results["notes"],
                                  styled.get(run.model.name))  # fmt: skip
        run.results["judgments_computed"] = fresh
        run.results["cost"] = cost
        run.status = JudgeRun.Status.FINISHED
        run.finished_at = timezone.now()
        run.failure_reason = ""
        run.progress = {**progress, "stage": "finished"}
        run.save()
