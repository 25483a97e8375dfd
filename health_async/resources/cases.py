"""The old import path of :mod:`health_async.resources.records.cases`, kept so that code written for it still works."""

from .records.cases import Cases

__all__ = ["Cases"]
