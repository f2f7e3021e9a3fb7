"""A model's answers to one- and two-turn questions (MT-Bench's format), turn 2 in context.

::

    answers = answer_questions(backend, questions, max_new_tokens=1024)
    # [("answer to q0 turn 1", "answer to q0 turn 2"), ("answer to q1 turn 1",), ...]

Turn 2 is generated after ``[system?, user: turn 1, assistant: the model's own turn-1 answer, user:
turn 2]``. Backends that render chat prompts themselves (``hf``, ``vllm``) answer each turn in one
batch through ``generate_until``; the others (an OpenAI-compatible chat endpoint) answer one chat
request per turn (``openai-chat`` too when given ``tokenizer=DIR``: that template serves its
log-likelihood tasks, and the endpoint applies its own to conversations). Sampling (``temperature >
0``) is seeded with ``seed + question index``, whatever the batch, so a retry gives the same answers
(the site's single-turn answers follow the same rule).
``temperatures`` sets the temperature by category: MT-Bench's answers were generated with
:data:`MT_BENCH_TEMPERATURES` (FastChat llm_judge's ``temperature_config``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from evalcore.judging.questions import JudgeQuestion
from evalcore.models.base import Backend, GenerationRequest

# The temperature FastChat's gen_model_answer.py uses for each MT-Bench category (its temperature_config).
MT_BENCH_TEMPERATURES = {
    "writing": 0.7, "roleplay": 0.7, "extraction": 0.0, "math": 0.0, "coding": 0.0, "reasoning": 0.0,
    "stem": 0.1, "humanities": 0.1,
}  # fmt: skip


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
    temperatures: Mapping[str, float] | None = None,
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
    temperatures : mapping category -> temperature, optional
        Overrides ``temperature`` for the questions of these categories (case-insensitive), e.g.
        :data:`MT_BENCH_TEMPERATURES`.

    Returns
    -------
    list of tuple of str, length n
        ``answers[i][t]`` is the answer to turn ``t + 1`` of question ``i``. A backend error
        propagates (nothing is half-answered silently).
    """
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}")
    by_category = {str(k).strip().lower(): v for k, v in (temperatures or {}).items()}
    for value in (temperature, *by_category.values()):
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 10.0:
            raise ValueError(f"a temperature must be a number in [0, 10], got {value!r}")
    if isinstance(top_p, bool) or not isinstance(top_p, int | float) or not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be a number in (0, 1], got {top_p!r}")
    for index, question in enumerate(questions):
        if not isinstance(question, JudgeQuestion):
            raise ValueError(f"question {index} is a {type(question).__name__}, not a JudgeQuestion")
    system = [{"role": "system", "content": system_prompt}] if system_prompt else []
    heat = [float(by_category.get(q.category.strip().lower(), temperature)) for q in questions]
    answers: list[list[str]] = [[] for _ in questions]
    most_turns = max((len(q.turns) for q in questions), default=0)
    for turn in range(most_turns):
        asking = [i for i, q in enumerate(questions) if len(q.turns) > turn]
        conversations = [_conversation(system, questions[i], answers[i], turn) for i in asking]
        texts = _generate(backend, conversations, [seed + i for i in asking], [heat[i] for i in asking],
                          max_new_tokens=max_new_tokens, top_p=float(top_p), progress=progress)  # fmt: skip
        for i, text in zip(asking, texts):
            answers[i].append(text)
    return [tuple(a) for a in answers]


def _conversation(system: list[dict], question: JudgeQuestion, earlier: list[str], turn: int) -> list[dict]:
    """``[system?, user 1, assistant 1, ..., user turn+1]``: the earlier turns with the model's own answers."""
    messages = list(system)
    for asked, answered in zip(question.turns[:turn], earlier):
        messages += [{"role": "user", "content": asked}, {"role": "assistant", "content": answered}]
    return [*messages, {"role": "user", "content": question.turns[turn]}]


def _generate(backend: Backend, conversations: list[list[dict]], seeds: list[int], temperatures: list[float], *,
              max_new_tokens: int, top_p: float, progress) -> list[str]:  # fmt: skip
    contexts = None
    if not getattr(backend, "sends_messages", False):  # openai-chat renders a template only for log-likelihoods
        try:
            contexts = [backend.chat_context(messages) for messages in conversations]
        except ValueError:  # the backend sends conversations, not rendered prompts
            contexts = None
    if contexts is not None:
        requests = [
            GenerationRequest(context=c, max_gen_toks=max_new_tokens, do_sample=t > 0, temperature=t, top_p=top_p, seed=s)
            for c, s, t in zip(contexts, seeds, temperatures)
        ]  # fmt: skip
        return [r.text for r in backend.generate_until(requests, progress=progress)]
    out = []
    for messages, s, t in zip(conversations, seeds, temperatures):
        out.append(backend.chat(messages, {"max_new_tokens": max_new_tokens, "temperature": t, "top_p": top_p, "seed": s}))
        if progress is not None:
            progress(1)
    return out
