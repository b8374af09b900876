"""Tasks: the kinds of measurement, one folder each, behind one protocol (``capacity.tasks.protocol``).

``TASKS`` maps each kind to its ``Task``; a study's settings are its task's ``Config`` (``Recall``, ``Mqar``,
``Needle``, ``Bill``). Shared measuring code sits beside the folders: ``probe`` (write, read back, score),
``decode`` (the exact argmax decoder), ``metrics`` (capacity from a curve), ``published`` (papers' trained results)
and ``_shared`` (draws shared by the memories of one cell). Adding a task is one folder and one line below
(docs/architecture.md).
"""

from __future__ import annotations

from capacity.errors import CapacityError
from capacity.tasks.bill.task import Bill, BillTask
from capacity.tasks.mqar.task import Mqar, MqarTask
from capacity.tasks.needle.task import Needle, NeedleTask
from capacity.tasks.protocol import Config, Schema, Task, Variable
from capacity.tasks.recall.task import Recall, RecallTask

__all__ = ["TASKS", "get", "Task", "Config", "Schema", "Variable", "Recall", "Mqar", "Needle", "Bill"]

TASKS: dict[str, Task] = {t.name: t for t in (RecallTask(), BillTask(), MqarTask(), NeedleTask())}


def get(kind: str) -> Task:
    """The task of ``kind`` (one of ``TASKS``)."""
    if kind not in TASKS:
        raise CapacityError(f"unknown task kind {kind!r}; available: {', '.join(TASKS)}")
    return TASKS[kind]
