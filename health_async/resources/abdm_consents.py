"""The old import path of :mod:`health_async.resources.abdm.consents`, kept so that code written for it still works."""

from .abdm.consents import Consents

__all__ = ["Consents"]
