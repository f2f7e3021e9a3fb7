"""A trusted task whose Python calls sys.exit at import (lm-eval has one that needs SWI-Prolog) is one
refused file with its reason; the rest of the tree loads and the process goes on."""

from __future__ import annotations

import textwrap

import pytest

from evalcore.engine import TaskIndex

TASK = """
task: {name}
dataset_path: json
dataset_kwargs: {{data_files: {{test: x.jsonl}}}}
test_split: test
output_type: generate_until
doc_to_text: "{{{{q}}}}"
doc_to_target: "{{{{a}}}}"
process_results: !function {module}.process
metric_list: [{{metric: acc}}]
"""


@pytest.mark.parametrize("exit_call", ["sys.exit(3)", "sys.exit('swipl is not installed')", "raise SystemExit"])
def test_a_task_module_that_exits_at_import_is_refused_alone(tmp_path, exit_call):
    (tmp_path / "fine.py").write_text("def process(doc, results):\n    return {'acc': 1.0}\n")
    (tmp_path / "exits.py").write_text(textwrap.dedent(f"import sys\n{exit_call}\ndef process(doc, results):\n    return {{}}\n"))
    (tmp_path / "good.yaml").write_text(TASK.format(name="good", module="fine"))
    (tmp_path / "bad.yaml").write_text(TASK.format(name="bad", module="exits"))
    with pytest.warns(UserWarning, match="skipped task file"):
        index = TaskIndex([tmp_path], bundled=False, trust_task_code=True)
    assert "good" in index.tasks and "bad" not in index.tasks
    (reason,) = [why for file, why in index.skipped.items() if file.endswith("bad.yaml")]
    assert "failed to import: called sys.exit(" in reason and "exits.py" in reason
