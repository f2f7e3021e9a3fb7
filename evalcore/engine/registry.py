"""Finding tasks by name: the bundled configs plus folders given with ``--include-path``.

Every ``*.yaml`` file under a folder is a task or a group (files without a ``.yaml`` suffix, such
as ``_default_template_yaml``, are only ever included). A name resolves to a task, a group (its
tasks, recursively) or a tag (every task carrying it).

A file that does not load is skipped with a warning naming it and the reason (as the harness
does); asking for a task or group that such a file defines is an error carrying that reason.
Python code beside task files (``!function``) runs for the bundled tasks and for include paths
given with ``trust_task_code=True`` (``--trust-task-code``) or listed in ``trusted_paths`` (an
operator's own folders beside untrusted ones in one index), never for uploaded folders.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import yaml

from evalcore.boundary.validation import yaml_problem
from evalcore.engine.config import (
    GroupConfig,
    TaskConfig,
    group_config_from_mapping,
    load_config_file,
    resolve_includes,
    task_config_from_mapping,
)

BUNDLED = Path(__file__).resolve().parent.parent / "tasks"


class TaskIndex:
    """All tasks, groups and tags found in the bundled folder and the include paths."""

    def __init__(self, include_paths: list[str | Path] = (), *, bundled: bool = True,
                 trust_task_code: bool = False, trusted_paths: list[str | Path] = ()) -> None:  # fmt: skip
        self.tasks: dict[str, TaskConfig] = {}
        self.groups: dict[str, GroupConfig] = {}
        self.tags: dict[str, list[str]] = {}
        self.skipped: dict[str, str] = {}  # file -> why it did not load
        self._broken: dict[str, tuple[str, str]] = {}  # name -> (file, reason)
        folders = [(BUNDLED, True)] if bundled else []
        folders += [(Path(p), trust_task_code) for p in include_paths]
        folders += [(Path(p), True) for p in trusted_paths]  # an operator's own folders, in one index
        for folder, trusted in folders:
            if not folder.is_dir():
                raise ValueError(f"include path {str(folder)!r} is not a folder")
            for path in sorted(folder.rglob("*.yaml")):
                self._load(path, trusted)
        trusted_roots = [str(f.resolve()) for f, trusted in folders if trusted] + [str(BUNDLED)]
        for group in list(self.groups.values()):
            inside = any(group.source.startswith(root.rstrip("/") + "/") for root in trusted_roots)
            self._add_inline(group, trusted=trust_task_code or inside)

    def _load(self, path: Path, trusted: bool) -> None:
        try:
            config = load_config_file(path, trusted=trusted)
        except (ValueError, OSError, yaml.YAMLError, RecursionError) as exc:
            reason = yaml_problem(exc) if isinstance(exc, yaml.YAMLError) else str(exc)
            reason = " ".join(reason.removeprefix(f"{path.resolve()}: ").split())  # one line in the warning
            self.skipped[str(path)] = reason
            name = _declared_name(path)
            if name:
                self._broken.setdefault(name, (str(path), reason))
            warnings.warn(f"skipped task file {path}: {reason}", stacklevel=3)
            return
        self._add(config)

    def _add(self, config: TaskConfig | GroupConfig) -> None:
        # A later folder (a user's include path) overrides a bundled definition of the same name.
        if isinstance(config, GroupConfig):
            self.groups[config.group] = config
            for tag in config.tags:
                self.tags.setdefault(tag, []).append(config.group)
            return
        self.tasks[config.task] = config
        for tag in config.tags:
            if config.task not in self.tags.setdefault(tag, []):
                self.tags[tag].append(config.task)

    def _add_inline(self, group: GroupConfig, *, trusted: bool) -> None:
        """Register a group's inline members: new tasks and subgroups are named ``group::name``."""
        base_dir = Path(group.source).parent if group.source else Path.cwd()
        renamed = {}
        for item in group.inline:
            try:
                renamed.update(self._inline_member(group, item, base_dir, trusted))
            except (ValueError, OSError, yaml.YAMLError) as exc:
                self._broken.setdefault(group.group, (group.source, f"inline member {item!r}: {exc}"))
        if renamed:
            members = tuple(renamed.get(name, name) for name in group.tasks)
            self.groups[group.group] = GroupConfig(
                group.group, members, group.aggregate, group.source, group.raw, (), group.tags
            )

    def _inline_member(self, group: GroupConfig, item: dict, base_dir: Path, trusted: bool) -> dict[str, str]:
        data = dict(item)
        if "include" in data:
            included = resolve_includes_for(base_dir, data.pop("include"))
            data = {**included, **data}
        if "group" in data and "task" in data and "dataset_path" not in data:
            name = data["group"]
            if name in self.groups:
                return {}
            child = group_config_from_mapping({**data, "group": f"{group.group}::{name}"}, source=group.source)
            self.groups[child.group] = child
            self._add_inline(child, trusted=trusted)
            return {name: child.group}
        name = data["task"]
        overrides = {k: v for k, v in data.items() if k != "task"}
        if name in self.tasks:
            if overrides:
                self.tasks[name] = self.tasks[name].with_overrides(**overrides)
            return {}
        if name in self.groups or name in self.tags:
            return {}
        config = task_config_from_mapping(
            {**data, "task": f"{group.group}::{name}"}, source=group.source, base_dir=str(base_dir), trusted=trusted
        )
        self._add(config)
        return {name: config.task}

    def not_loaded(self, name: str) -> tuple[str, str] | None:
        """(file, reason) when a file that declares ``name`` was skipped; else None."""
        return self._broken.get(name)

    def names(self) -> list[str]:
        return sorted(set(self.tasks) | set(self.groups) | set(self.tags))

    def resolve(self, names: list[str]) -> tuple[list[TaskConfig], list[GroupConfig]]:
        """The tasks to run (deduplicated, in order) and the groups to aggregate."""
        tasks: dict[str, TaskConfig] = {}
        groups: dict[str, GroupConfig] = {}

        def visit(name: str, trail: tuple[str, ...]) -> None:
            if name in trail:
                raise ValueError(f"group cycle: {' -> '.join((*trail, name))}")
            if name in self.tasks:
                tasks.setdefault(name, self.tasks[name])
            elif name in self.groups:
                groups[name] = self.groups[name]
                for child in self.groups[name].tasks:
                    visit(child, (*trail, name))
            elif name in self.tags:
                for child in self.tags[name]:
                    visit(child, (*trail, name))
            elif name in self._broken:
                path, reason = self._broken[name]
                raise ValueError(f"task {name!r} cannot load ({path}): {reason}")
            else:
                close = [n for n in self.names() if name.split("_")[0] in n][:5]
                hint = f"; similar: {', '.join(close)}" if close else ""
                raise ValueError(f"unknown task {name!r}; `python -m evalcore tasks` lists them{hint}")

        for name in names:
            visit(name.strip(), ())
        return list(tasks.values()), list(groups.values())

    def group_members(self, group: GroupConfig) -> list[str]:
        """The leaf tasks of a group."""
        members: list[str] = []
        for child in group.tasks:
            if child in self.groups:
                members.extend(self.group_members(self.groups[child]))
            elif child in self.tags:
                members.extend(self.tags[child])
            else:
                members.append(child)
        return members


def resolve_includes_for(base_dir: Path, include) -> dict:
    """What an inline entry's ``include`` (a file or a list, relative to the group file) holds."""
    merged: dict = {}
    for item in include if isinstance(include, list) else [include]:
        merged.update(resolve_includes(base_dir / str(item)))
    return merged


def _declared_name(path: Path) -> str | None:
    """The task or group name a file declares, read without validating it (for error messages)."""
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_NameLoader)  # noqa: S506 - SafeLoader subclass
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    if not isinstance(data, dict):
        return None
    name = data.get("group") if "group" in data and "dataset_path" not in data else data.get("task")
    return name if isinstance(name, str) else None


class _NameLoader(yaml.SafeLoader):
    pass


_NameLoader.add_multi_constructor("!", lambda loader, suffix, node: None)
