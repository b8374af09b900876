"""Tasks: the kinds of measurement, one folder each, behind one protocol (``lacapacity.tasks.protocol``).

A task is a folder ``capacity/tasks/<task>/`` whose ``task.py`` defines a ``Task`` subclass (and its ``Config``);
the folders are found here, nothing lists them (``TASKS``: kind -> its ``Task``, by folder name). A folder may
also hold ``figures.py``, its own figure functions (the figures layer: ``lacapacity.plots.render`` loads it, nothing
here imports it). A study's settings are its task's ``Config`` (``Recall``, ``Mqar``, ``Needle``, ``Bill``,
``Trained``, re-exported below as the public names). Shared measuring code sits beside the folders: ``probe``
(write, read back, score), ``decode`` (the exact argmax decoder), ``metrics`` (capacity from a curve),
``published`` (papers' trained results) and ``_shared`` (draws shared by the memories of one cell).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
from typing import Any

from lacapacity.base.registry import Registry
from lacapacity.errors import CapacityError
from lacapacity.tasks.bill.task import Bill
from lacapacity.tasks.mqar.task import Mqar
from lacapacity.tasks.needle.task import Needle
from lacapacity.tasks.protocol import Config, Measured, Schema, Task, Variable
from lacapacity.tasks.recall.task import Recall
from lacapacity.tasks.trained.task import Trained

__all__ = [
    "TASKS",
    "get",
    "available",
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
        raise CapacityError(f"plug-in task {kind!r} is not a lacapacity.tasks.Task named {kind!r}, got {found!r}")
    return task


def folder_tasks(module: str) -> list[Task[Any]]:
    """The tasks the module ``module`` (a folder's ``task.py``) defines: each concrete ``Task`` subclass whose class
    is defined there (not one it imports), an instance each, in the order they are written."""
    found = importlib.import_module(module)
    return [
        cls()
        for _, cls in inspect.getmembers(found, inspect.isclass)
        if issubclass(cls, Task) and cls.__module__ == module and not inspect.isabstract(cls)
    ]


# the built-in tasks: every folder here with a task.py, by folder name; a package's: a Task subclass or instance
# named as its entry point (group lacapacity.tasks)
_REGISTRY: Registry[Task[Any]] = Registry("lacapacity.tasks", "task kind", path=None, accept=_accept)
for _info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
    if _info.ispkg and importlib.util.find_spec(f"{__name__}.{_info.name}.task") is not None:
        for _task in folder_tasks(f"{__name__}.{_info.name}.task"):
            _REGISTRY.add(_task.name, _task)
TASKS: dict[str, Task[Any]] = _REGISTRY.own()


def get(kind: str) -> Task[Any]:
    """The task of ``kind``: a built-in (``TASKS``) or a package's, declared by the entry point group
    ``lacapacity.tasks`` (``name = "mypkg.task:MyTask"``, a ``Task`` subclass or instance named ``name``)."""
    return _REGISTRY.get(kind)


def available() -> dict[str, str]:
    """Task kind -> one-line description: the built-ins (by folder name), then the plug-ins packages declare."""
    return {name: task.description for name, task in _REGISTRY.loaded().items()}
