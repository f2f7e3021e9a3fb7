"""A model's answers to one- and two-turn questions (MT-Bench's format), turn 2 in context.

::

    answers = answer_questions(backend, questions, max_new_tokens=1024)
    # [("answer to q0 turn 1", "answer to q0 turn 2"), ("answer to q1 turn 1",), ...]

Turn 2 is generated after ``[system?, user: turn 1, assistant: the model's own turn-1 answer, user:
turn 2]``. Backends that render chat prompts themselves (``hf``, ``vllm``) answer each turn in one
batch through ``generate_until``; the others (an OpenAI-compatible chat endpoint) answer one chat
request per turn. Sampling (``temperature > 0``) is seeded with ``seed + question index``, whatever the
batch, so a retry gives the same answers (the site's single-turn answers follow the same rule).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from evalcore.judging.questions import JudgeQuestion
from evalcore.models.base import Backend, GenerationRequest


def answer_questions(
    backend: Backend,
    questions: Sequence[JudgeQuestion],
    *,
    max_new_tokens: int,
    temperature: float = 0.0,
    top_p: float = 1.0,
    seed: int = 0,
    system_prompt: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[tuple[str, ...]]:
    """Each question's answer to each of its turns.

    Parameters
    ----------
    backend : Backend
        The answering model.
    questions : sequence of JudgeQuestion, length n
    max_new_tokens : int
        Per turn.
    temperature, top_p, seed :
        Greedy when ``temperature`` is 0; else sampled, question ``i`` with seed ``seed + i``.
    system_prompt : str, optional
        Sent as the system message of every conversation.
    progress : callable(k), optional
        Called with the number of turns just answered.

    Returns
    -------
    list of tuple of str, length n
        ``answers[i][t]`` is the answer to turn ``t + 1`` of question ``i``. A backend error
        propagates (nothing is half-answered silently).
    """
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}")
    if not 0.0 <= float(temperature) <= 10.0 or not 0.0 < float(top_p) <= 1.0:
        raise ValueError(f"temperature must be in [0, 10] and top_p in (0, 1], got {temperature!r}, {top_p!r}")
    for index, question in enumerate(questions):
        if not isinstance(question, JudgeQuestion):
            raise ValueError(f"question {index} is a {type(question).__name__}, not a JudgeQuestion")
    system = [{"role": "system", "content": system_prompt}] if system_prompt else []
    answers: list[list[str]] = [[] for _ in questions]
    most_turns = max((len(q.turns) for q in questions), default=0)
    for turn in range(most_turns):
        asking = [i for i, q in enumerate(questions) if len(q.turns) > turn]
        conversations = [_conversation(system, questions[i], answers[i], turn) for i in asking]
        texts = _generate(backend, conversations, [seed + i for i in asking], max_new_tokens=max_new_tokens,
                          temperature=float(temperature), top_p=float(top_p), progress=progress)  # fmt: skip
        for i, text in zip(asking, texts):
            answers[i].append(text)
    return [tuple(a) for a in answers]


def _conversation(system: list[dict], question: JudgeQuestion, earlier: list[str], turn: int) -> list[dict]:
    """``[system?, user 1, assistant 1, ..., user turn+1]``: the earlier turns with the model's own answers."""
    messages = list(system)
    for asked, answered in zip(question.turns[:turn], earlier):
        messages += [{"role": "user", "content": asked}, {"role": "assistant", "content": answered}]
    return [*messages, {"role": "user", "content": question.turns[turn]}]


def _generate(backend: Backend, conversations: list[list[dict]], seeds: list[int], *, max_new_tokens: int,
              temperature: float, top_p: float, progress) -> list[str]:  # fmt: skip
    try:
        contexts = [backend.chat_context(messages) for messages in conversations]
    except ValueError:  # the backend sends conversations, not rendered prompts
        contexts = None
    if contexts is not None:
        requests = [
            GenerationRequest(context=c, max_gen_toks=max_new_tokens, do_sample=temperature > 0,
                              temperature=temperature, top_p=top_p, seed=s)
            for c, s in zip(contexts, seeds)
        ]  # fmt: skip
        return [r.text for r in backend.generate_until(requests, progress=progress)]
    params = {"max_new_tokens": max_new_tokens, "temperature": temperature, "top_p": top_p}
    out = []
    for messages, s in zip(conversations, seeds):
        out.append(backend.chat(messages, {**params, "seed": s}))
        if progress is not None:
            progress(1)
    return out
