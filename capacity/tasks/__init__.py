"""Tasks: the kinds of measurement, one folder each, behind one protocol (``capacity.tasks.protocol``).

``TASKS`` maps each kind to its ``Task``; a study's settings are its task's ``Config`` (``Recall``, ``Mqar``,
``Needle``, ``Bill``). Shared measuring code sits beside the folders: ``probe`` (write, read back, score),
``decode`` (the exact argmax decoder), ``metrics`` (capacity from a curve), ``published`` (papers' trained results)
and ``_shared`` (draws shared by the memories of one cell). Adding a task is one folder and one line below
(docs/architecture.md).
"""

from __future__ import annotations

from capacity.base import plugins
from capacity.errors import CapacityError
from capacity.tasks.bill.task import Bill, BillTask
from capacity.tasks.mqar.task import Mqar, MqarTask
from capacity.tasks.needle.task import Needle, NeedleTask
from capacity.tasks.protocol import Config, Schema, Task, Variable
from capacity.tasks.recall.task import Recall, RecallTask
from capacity.tasks.trained.task import TrainedTask

__all__ = ["TASKS", "get", "Task", "Config", "Schema", "Variable", "Recall", "Mqar", "Needle", "Bill"]

TASKS: dict[str, Task] = {t.name: t for t in (RecallTask(), BillTask(), MqarTask(), NeedleTask(), TrainedTask())}


_PLUGINS: dict[str, Task] = {}


def get(kind: str) -> Task:
    """The task of ``kind``: a built-in (``TASKS``) or a package's, declared by the entry point group
    ``capacity.tasks`` (``name = "mypkg.task:MyTask"``, a ``Task`` subclass or instance named ``name``)."""
    if kind in TASKS:
        return TASKS[kind]
    if kind not in _PLUGINS:
        found = plugins.entry_point("capacity.tasks", kind) if isinstance(kind, str) else None
        if found is None:
            known = [*TASKS, *sorted(plugins.entry_points("capacity.tasks"))]
            raise CapacityError(f"unknown task kind {kind!r}; available: {', '.join(known)}")
        task = found() if isinstance(found, type) and issubclass(found, Task) else found
        if not isinstance(task, Task) or task.name != kind:
            raise CapacityError(f"plug-in task {kind!r} is not a capacity.tasks.Task named {kind!r}, got {found!r}")
        _PLUGINS[kind] = task
    return _PLUGINS[kind]
