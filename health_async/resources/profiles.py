"""The old import path of :mod:`health_async.resources.patients.profiles`, kept so that code written for it still
works."""

from .patients.profiles import Profiles

__all__ = ["Profiles"]
