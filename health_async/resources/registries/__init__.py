"""``client`` namespaces of ABDM milestone 4's registries: ``client.hpr`` (professionals) and ``client.hfr``
(facilities).

The resources themselves are also in :mod:`health_async.resources`."""

from ._registration import HprRegistration
from .hfr import Hfr
from .hpr import Hpr

__all__ = ["Hfr", "Hpr", "HprRegistration"]
