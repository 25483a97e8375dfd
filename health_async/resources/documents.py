"""The old import path of :mod:`health_async.resources.records.documents`, kept so that code written for it still
works."""

from .records.documents import KNOWN_TASKS, Documents, task_params

__all__ = ["Documents", "KNOWN_TASKS", "task_params"]
