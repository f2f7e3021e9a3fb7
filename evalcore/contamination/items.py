"""Benchmark items as their tasks render them, and the text normalisation the scans share.

An item's text is what the engine puts in front of the model for that document (``doc_to_text``,
rendered by :class:`evalcore.engine.prompts.Prompter`) followed by its answer options when the task
has options and the prompt does not already show them (cloze-style multiple choice). ``doc_id`` is
the document's index in the split, the same number the engine writes in its samples files.

Normalisation follows GPT-3's appendix C and the textbook: lower case, punctuation removed (not
replaced by a space: ``don't`` becomes ``dont``, ``$1,200`` becomes ``1200``), whitespace collapsed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from evalcore.engine.config import TaskConfig
from evalcore.engine.data import evaluation_docs, load_splits, split_docs
from evalcore.engine.prompts import Prompter
from evalcore.engine.registry import TaskIndex

# Everything that is neither a word character nor whitespace, and the underscore (a \w character
# that string.punctuation lists as punctuation). NUL is kept: the corpus reader uses it as a
# document boundary word, and benchmark text never contains it (see :func:`words`).
_PUNCTUATION = re.compile(r"[^\w\s\x00]|_")


def normalise(text: str) -> str:
    """Lower-case ``text`` and delete punctuation (whitespace is collapsed by :func:`words`)."""
    return _PUNCTUATION.sub("", text.lower())


def words(text: str) -> list[str]:
    """The normalised words of ``text`` (split on any run of whitespace; NUL counts as a space)."""
    return normalise(text.replace("\x00", " ")).split()


@dataclass(frozen=True)
class BenchmarkItem:
    """One benchmark document as the model sees it.

    Attributes
    ----------
    task : str
    doc_id : int
        Index of the document in ``split`` (as in the engine's samples files).
    split : str
        Name of the split the document comes from (``test``, ``train``, ...).
    text : str
        The rendered prompt text, plus the options where the prompt does not show them.
    """

    task: str
    doc_id: int
    split: str
    text: str


def render_item(prompter: Prompter, doc: dict) -> str:
    """The text of one document: rendered ``doc_to_text`` and any options it does not contain."""
    text = prompter.text(doc)
    text = str(text)
    if prompter.has_choices:
        missing = [choice for choice in prompter.choices(doc) if choice not in text]
        if missing:
            text = "\n".join([text, *missing])
    return text


def resolve_tasks(names: list[str], *, include_paths=()) -> list[TaskConfig]:
    """Task configs for task, group or tag ``names``; an unknown name raises one ValueError."""
    names = [name.strip() for name in names if name and name.strip()]
    if not names:
        raise ValueError("no task given: pass --tasks NAME[,NAME...] (`python -m evalcore tasks` lists them)")
    tasks, _groups = TaskIndex(list(include_paths)).resolve(names)
    return tasks


def task_items(config: TaskConfig, *, split: str = "evaluation", limit: int | None = None) -> list[BenchmarkItem]:
    """The items of one task's ``split``.

    Parameters
    ----------
    config : TaskConfig
    split : {"evaluation", "training"}
        ``"evaluation"``: the split the engine evaluates (test, else validation); ``"training"``: the
        task's ``training_split`` (the memorisation probe's control).
    limit : int, optional
        Keep only the first ``limit`` documents.
    """
    splits = load_splits(config)
    if split == "evaluation":
        split_name, docs = evaluation_docs(config, splits)
    elif split == "training":
        docs = split_docs(config, splits, "training_split")
        if not docs:
            raise ValueError(f"task {config.task!r} has no training_split to use as a control")
        split_name = config.get("training_split")
    else:
        raise ValueError(f"split must be 'evaluation' or 'training', got {split!r}")
    if limit is not None:
        if limit < 1:
            raise ValueError("limit must be a positive number of documents")
        docs = docs[:limit]
    prompter = Prompter(config)
    items = []
    for doc_id, doc in enumerate(docs):
        if not isinstance(doc, dict):
            raise ValueError(f"task {config.task!r}: document {doc_id} is not a mapping")
        items.append(BenchmarkItem(config.task, doc_id, str(split_name), render_item(prompter, doc)))
    return items


def benchmark_items(names: list[str], *, include_paths=(), split: str = "evaluation",
                    limit: int | None = None) -> list[BenchmarkItem]:  # fmt: skip
    """The items of every task that ``names`` resolve to, task by task, in document order."""
    items: list[BenchmarkItem] = []
    for config in resolve_tasks(names, include_paths=include_paths):
        items.extend(task_items(config, split=split, limit=limit))
    return items
