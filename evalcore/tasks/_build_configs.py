"""Regenerate the bundled MMLU and BBH task files (run from the repository root).

    PODIUM_DATA_DIR=../shared/data python -m evalcore.tasks._build_configs

MMLU: one file per subject and style, including a shared template, plus a group per style.
BBH: one file per task with its three chain-of-thought exemplars inline as
``fewshot_config.samples`` (the prompts are part of the protocol; no test data is copied).
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
STYLES = {
    "letter": ("mmlu", ["acc"]),
    "cloze": ("mmlu_cloze", ["acc", "acc_norm"]),
    "hybrid": ("mmlu_hybrid", ["acc", "acc_norm"]),
}


class _Literal(str):
    pass


def _dump(data: dict, path: Path) -> None:
    class Dumper(yaml.SafeDumper):
        pass

    def literal(dumper, value):
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(_Literal, literal)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.dump(data, Dumper=Dumper, sort_keys=False, allow_unicode=True, width=120), encoding="utf-8")


def build_mmlu(data_dir: Path) -> None:
    subjects = sorted(p.name[: -len("_test.csv")] for p in (data_dir / "benchmarks/mmlu/test").glob("*_test.csv"))
    for style, (group, metrics) in STYLES.items():
        names = []
        for subject in subjects:
            name = f"{group}_{subject}"
            names.append(name)
            _dump(
                {
                    "include": f"../_{style}_template_yaml",
                    "task": name,
                    "tag": f"{group}_subjects",
                    "description": f"The following are multiple choice questions (with answers) about {subject.replace('_', ' ')}.\n\n",
                    "dataset_kwargs": {
                        "data_files": {
                            "dev": f"${{PODIUM_DATA_DIR}}/benchmarks/mmlu/dev/{subject}_dev.csv",
                            "test": f"${{PODIUM_DATA_DIR}}/benchmarks/mmlu/test/{subject}_test.csv",
                        }
                    },
                },
                HERE / "mmlu" / style / f"{name}.yaml",
            )
        _dump(
            {
                "group": group,
                "task": names,
                "aggregate_metric_list": [{"metric": m, "aggregation": "mean", "weight_by_size": True} for m in metrics],
                "metadata": {"version": 1},
            },
            HERE / "mmlu" / f"{group}.yaml",
        )


def _bbh_exemplars(text: str) -> tuple[str, list[dict]]:
    body = text.split("-----\n", 1)[1].strip("\n")
    description, _, rest = body.partition("\n\nQ: ")
    samples = []
    for block in ("Q: " + rest).split("\n\nQ: "):
        block = block[3:] if block.startswith("Q: ") else block
        question, _, answer = block.partition("\nA: Let's think step by step.\n")
        samples.append({"input": question, "target": _Literal(answer.strip("\n"))})
    return description.strip(), samples


def build_bbh(data_dir: Path) -> None:
    names = []
    for prompt_file in sorted((data_dir / "benchmarks/bbh/cot-prompts").glob("*.txt")):
        subject = prompt_file.stem
        description, samples = _bbh_exemplars(prompt_file.read_text(encoding="utf-8"))
        name = f"bbh_cot_fewshot_{subject}"
        names.append(name)
        _dump(
            {
                "include": "_bbh_template_yaml",
                "task": name,
                "description": description + "\n\n",
                "dataset_kwargs": {"field": "examples", "data_files": {"test": f"${{PODIUM_DATA_DIR}}/benchmarks/bbh/{subject}.json"}},
                "fewshot_config": {"sampler": "first_n", "samples": samples},
            },
            HERE / "bbh" / f"{name}.yaml",
        )
    _dump(
        {
            "group": "bbh",
            "task": names,
            "aggregate_metric_list": [
                {"metric": "exact_match", "filter_list": "get-answer", "aggregation": "mean", "weight_by_size": True}
            ],
            "metadata": {"version": 1},
        },
        HERE / "bbh" / "bbh.yaml",
    )


if __name__ == "__main__":
    root = Path(os.environ.get("PODIUM_DATA_DIR", "../shared/data"))
    build_mmlu(root)
    build_bbh(root)
