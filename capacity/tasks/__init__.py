"""Tasks: the kinds of measurement, one folder each, behind one protocol (``capacity.tasks.protocol``).

``TASKS`` maps each kind to its ``Task``; a study's settings are its task's ``Config`` (``Recall``, ``Mqar``,
``Needle``, ``Bill``, ``Trained``). Shared measuring code sits beside the folders: ``probe`` (write, read back, score),
``decode`` (the exact argmax decoder), ``metrics`` (capacity from a curve), ``published`` (papers' trained results)
and ``_shared`` (draws shared by the memories of one cell). Adding a task is one folder and one line below
(docs/architecture.md).
"""

from __future__ import annotations

from typing import Any

from capacity.base.registry import Registry
from capacity.errors import CapacityError
from capacity.tasks.bill.task import Bill, BillTask
from capacity.tasks.mqar.task import Mqar, MqarTask
from capacity.tasks.needle.task import Needle, NeedleTask
from capacity.tasks.protocol import Config, Measured, Schema, Task, Variable
from capacity.tasks.recall.task import Recall, RecallTask
from capacity.tasks.trained.task import Trained, TrainedTask

__all__ = [
    "TASKS",
    "get",
    "Task",
    "Config",
    "Schema",
    "Variable",
    "Measured",
    "Recall",
    "Mqar",
    "Needle",
    "Bill",
    "Trained",
]


def _accept(kind: str, found: object) -> Task[Any]:
    task = found() if isinstance(found, type) and issubclass(found, Task) else found
    if not isinstance(task, Task) or task.name != kind:
        raise CapacityError(f"plug-in task {kind!r} is not a capacity.tasks.Task named {kind!r}, got {found!r}")
    return task


# the built-in tasks; a package's: a Task subclass or instance named as its entry point (group capacity.tasks)
_REGISTRY: Registry[Task[Any]] = Registry("capacity.tasks", "task kind", path=None, accept=_accept)
for _task in (RecallTask(), BillTask(), MqarTask(), NeedleTask(), TrainedTask()):
    _REGISTRY.add(_task.name, _task)
TASKS: dict[str, Task[Any]] = _REGISTRY.own()


def get(kind: str) -> Task[Any]:
    """The task of ``kind``: a built-in (``TASKS``) or a package's, declared by the entry point group
    ``capacity.tasks`` (``name = "mypkg.task:MyTask"``, a ``Task`` subclass or instance named ``name``)."""
    return _REGISTRY.get(kind)
