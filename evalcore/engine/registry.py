"""Finding tasks by name: the bundled configs plus folders given with ``--include-path``.

Every ``*.yaml`` file under a folder is a task or a group (files without a ``.yaml`` suffix, such
as ``_default_template_yaml``, are only ever included). A name resolves to a task, a group (its
tasks, recursively) or a tag (every task carrying it).
"""

from __future__ import annotations

from pathlib import Path

from evalcore.engine.config import GroupConfig, TaskConfig, load_config_file

BUNDLED = Path(__file__).resolve().parent.parent / "tasks"


class TaskIndex:
    """All tasks, groups and tags found in the bundled folder and the include paths."""

    def __init__(self, include_paths: list[str | Path] = (), *, bundled: bool = True) -> None:
        self.tasks: dict[str, TaskConfig] = {}
        self.groups: dict[str, GroupConfig] = {}
        self.tags: dict[str, list[str]] = {}
        folders = ([BUNDLED] if bundled else []) + [Path(p) for p in include_paths]
        for folder in folders:
            if not folder.is_dir():
                raise ValueError(f"include path {str(folder)!r} is not a folder")
            for path in sorted(folder.rglob("*.yaml")):
                self._add(load_config_file(path))

    def _add(self, config: TaskConfig | GroupConfig) -> None:
        # A later folder (a user's include path) overrides a bundled definition of the same name.
        if isinstance(config, GroupConfig):
            self.groups[config.group] = config
            return
        self.tasks[config.task] = config
        for tag in config.tags:
            self.tags.setdefault(tag, []).append(config.task)

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
