"""Documents to records: each evaluated document with its prompt (plain text, or a conversation and
the text the model reads), its target, choices and few-shot examples. The runner asks the model for
each record and scores it."""

from __future__ import annotations

import math

from evalcore.engine.chat import ChatOptions, as_messages, as_text, conversation
from evalcore.engine.config import TaskConfig
from evalcore.engine.data import evaluation_docs, load_splits, split_docs
from evalcore.engine.prompts import FewshotSampler, Prompter
from evalcore.engine.seeds import Seeds, as_seeds


def fewshot_pool(config: TaskConfig, splits: dict[str, list[dict]]) -> tuple[str | None, list[dict]]:
    """(split name, documents) few-shot examples come from: inline samples, then the splits."""
    samples = config.fewshot_config.get("samples")
    if callable(samples):
        samples = list(samples())  # a trusted task's list of examples (the harness calls it the same way)
    if samples is not None:
        if not isinstance(samples, list) or not all(isinstance(s, dict) for s in samples):
            raise ValueError(f"task {config.task!r}: fewshot_config.samples must be a list of documents")
        return None, samples
    for which in ("fewshot_split", "training_split", "validation_split", "test_split"):
        docs = split_docs(config, splits, which)
        if docs is not None and (which != "test_split" or config.get("fewshot_split")):
            return config.get(which), docs
    return None, []


def documents_limit(limit: int | float, available: int) -> int:
    """How many documents ``--limit`` keeps, as lm-eval 0.4.13 reads it: a whole number of documents, or
    below 1 a fraction of them, rounded up (0.1 of 1,319: 132)."""
    if isinstance(limit, bool) or not isinstance(limit, int | float) or not 0 < limit < float("inf"):
        raise ValueError(f"--limit must be a positive number of documents or a fraction below 1, got {limit!r}")
    if limit < 1:
        return math.ceil(available * limit)
    if limit != int(limit):
        raise ValueError(f"--limit takes a whole number of documents (or a fraction below 1), got {limit!r}")
    return int(limit)


def build_records(config: TaskConfig, *, num_fewshot: int | None, limit: int | None, seed: int | Seeds,
                  fewshot_seed: int | None = None, chat=None, options: ChatOptions | None = None) -> list[dict]:  # fmt: skip
    """One record per evaluated document: id, document, prompt, target, few-shot ids, choices.

    ``seed`` and ``fewshot_seed`` are :func:`evalcore.engine.seeds.as_seeds`'s: the few-shot sampler
    draws with the few-shot seed, and task code runs after the random and numpy seeds are set.

    With ``options.apply_chat_template`` the prompt is a conversation (:mod:`evalcore.engine.chat`):
    the record keeps its ``messages`` and its ``prompt`` is ``chat(messages)``, the text the model
    reads (the model's chat template; for a backend that sends messages, their JSON). A system
    instruction without the template goes first in the plain prompt. ``chat`` alone (older callers)
    means the template with a single user turn.
    """
    if options is None:
        options = ChatOptions(apply_chat_template=chat is not None)
    seeds = as_seeds(seed, fewshot_seed)
    if config.get("process_docs") is not None:
        # Task code may draw from Python's and numpy's global generators (gpqa shuffles its answers):
        # seed them as the harness does (random.seed(random_seed), np.random.seed(numpy_seed)) so the
        # same documents come out.
        seeds.seed_globals()
    splits = load_splits(config)
    split_name, docs = evaluation_docs(config, splits)
    if limit is not None:
        docs = docs[: documents_limit(limit, len(docs))]
    shots = config.get("num_fewshot", 0) if num_fewshot is None else num_fewshot
    pool_split, pool = fewshot_pool(config, splits)
    if shots and not pool:
        raise ValueError(f"task {config.task!r} asks for {shots} few-shot examples but has no few-shot split")
    sampler = FewshotSampler(
        pool,
        sampler=config.fewshot_config.get("sampler", "default"),
        seed=seeds.fewshot,
        same_split=pool_split is not None and pool_split == split_name,
    )
    prompter = Prompter(config)
    records = []
    for doc_id, doc in enumerate(docs):
        if not isinstance(doc, dict):
            raise ValueError(f"task {config.task!r}: document {doc_id} is not a mapping")
        fewshot_ids = sampler.sample(shots, doc)
        records.append(_record(config, prompter, doc_id, doc, [pool[i] for i in fewshot_ids], fewshot_ids,
                               _prompt_maker(prompter, options, chat)))  # fmt: skip
    return records


def _prompt_maker(prompter: Prompter, options: ChatOptions, chat):
    """``make(doc, shots, text=None) -> (prompt, messages or None)`` for one task's documents."""
    if options.plain:
        return lambda doc, shots, text=None: (prompter.context(doc, shots, text=text), None)

    def make(doc, shots, text=None):
        turns = conversation(prompter, doc, shots, system_instruction=options.system_instruction, text=text)
        if not options.apply_chat_template:
            return as_text(turns), None
        messages = as_messages(turns, multiturn=options.fewshot_as_multiturn)
        return chat(messages), messages

    return make


def _record(config: TaskConfig, prompter: Prompter, doc_id: int, doc: dict, shots: list[dict], fewshot_ids: list[int],
            make) -> dict:  # fmt: skip
    record = {"doc_id": doc_id, "doc": doc, "fewshot_ids": fewshot_ids}
    if config.output_type == "multiple_choice" and prompter.is_multiple_input(doc):
        # Winogrande style: one context per choice, the target is the shared continuation.
        choices = prompter.choices(doc)
        made = [make(doc, shots, text=choice) for choice in choices]
        record["contexts"] = [prompt for prompt, _ in made]
        record["prompt"] = record["contexts"][0]
        if made[0][1] is not None:
            record["messages"] = made[0][1]
        record["choices"] = choices
        record["continuation"] = str(prompter.target(doc))
        record["target"] = prompter.text(doc)
        return record
    record["prompt"], messages = make(doc, shots)
    if messages is not None:
        record["messages"] = messages
    if config.output_type == "multiple_choice":
        record["choices"] = prompter.choices(doc)
    record["target"] = prompter.target(doc)
    return record
