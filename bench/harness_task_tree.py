"""Share of lm-evaluation-harness's task tree that the engine loads.

    python bench/harness_task_tree.py [--tree DIR] [--site-packages DIR] [--list REASON] [--json OUT]

Walks every ``*.yaml`` file under the harness's ``lm_eval/tasks`` folder and loads it with
``evalcore.engine.load_config_file`` (includes followed, ``!function`` code trusted, as for an
operator's ``--trust-task-code`` folder), then prints how many load and the failures counted by
reason. Task code often imports ``lm_eval`` itself, so the harness's site-packages folder (the
parity bench's venv, ``var/lmeval-venv``) is appended to ``sys.path`` when it exists: the harness
is "installed beside the engine", as in ``bench/engine_parity.py``. Data is not loaded.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import re
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evalcore.engine import load_config_file  # noqa: E402

DEFAULT_VENVS = [ROOT / "var" / "lmeval-venv", Path("/work/main/var/lmeval-venv")]


def find_site_packages() -> Path | None:
    for venv in DEFAULT_VENVS:
        found = sorted(glob.glob(str(venv / "lib" / "python3*" / "site-packages")))
        if found and (Path(found[0]) / "lm_eval").is_dir():
            return Path(found[0])
    return None


def reason_of(message: str) -> str:
    """A failure message reduced to its kind (paths, names and values removed)."""
    message = message.split("\n")[0]
    patterns = [
        (r"unsupported key\(s\) \[([^\]]*)\]", lambda m: f"unsupported key(s) [{m.group(1)}]"),
        (r"failed to import: (\w+): No module named '([\w.]+)'", lambda m: f"task code needs module {m.group(2).split('.')[0]}"),
        (r"failed to import: (\w+)", lambda m: f"task code failed to import ({m.group(1)})"),
        (r"unsupported fewshot_config key\(s\) (\[[^\]]*\])", lambda m: f"unsupported fewshot_config key(s) {m.group(1)}"),
        (r"unsupported generation_kwargs (\[[^\]]*\])", lambda m: f"unsupported generation_kwargs {m.group(1)}"),
        (r"filter function ('[^']*')", lambda m: f"filter function {m.group(1)}"),
        (r"metric ('[^']*') is not available for (\w+)", lambda m: f"metric {m.group(1)} for {m.group(2)}"),
        (r"'class' names a Python task class", lambda m: "Python task class (class:)"),
        (r"needs dataset_path", lambda m: "no dataset_path"),
        (r"needs doc_to_text", lambda m: "no doc_to_text"),
        (r"does not exist", lambda m: "included file does not exist"),
        (r"has no '(\w+)'", lambda m: "!function names a missing function"),
    ]
    for pattern, label in patterns:
        match = re.search(pattern, message)
        if match:
            return label(match)
    return re.sub(r"(/[^\s:']+)+", "PATH", message)[:120]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tree", default=None, help="the harness's lm_eval/tasks folder")
    parser.add_argument("--site-packages", default=None, help="site-packages holding lm_eval (appended to sys.path)")
    parser.add_argument("--list", default=None, metavar="REASON", help="print the files failing with this reason")
    parser.add_argument("--json", default=None, metavar="OUT", help="write {file: reason} of the failures here")
    args = parser.parse_args()
    site = Path(args.site_packages) if args.site_packages else find_site_packages()
    if site is None and args.tree is None:
        print("no lm-eval installation found: pass --tree (and --site-packages)", file=sys.stderr)
        return 2
    if site is not None and str(site) not in sys.path:
        sys.path.append(str(site))  # after the engine's own packages: ours win on a clash
    tree = Path(args.tree) if args.tree else site / "lm_eval" / "tasks"
    files = sorted(p for p in tree.rglob("*.yaml") if "__pycache__" not in p.parts)
    failures: dict[str, str] = {}
    for path in files:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                load_config_file(path, trusted=True)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - every failure is counted (some task code calls exit())
            failures[str(path.relative_to(tree))] = f"{type(exc).__name__}: {exc}" if not isinstance(exc, ValueError) else str(exc)
    loaded = len(files) - len(failures)
    print(f"harness task tree {tree}: {loaded} of {len(files)} files load ({100 * loaded / max(len(files), 1):.1f}%)")
    reasons = collections.Counter(reason_of(m) for m in failures.values())
    for reason, count in reasons.most_common():
        print(f"{count:>6}  {reason}")
    if args.list:
        for file, message in sorted(failures.items()):
            if reason_of(message) == args.list:
                print(f"  {file}: {message[:200]}")
    if args.json:
        Path(args.json).write_text(json.dumps(failures, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
