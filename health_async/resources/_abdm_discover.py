"""The patient's app: find a hospital (providers) and discover and link its records to the ABHA (a guided flow)."""

from __future__ import annotations

from ._abdm_base import AbdmBase

__all__ = ["DiscoverMixin"]


class DiscoverMixin(AbdmBase):
    """Part of :class:`~health_async.resources.Abdm` (see the module)."""
