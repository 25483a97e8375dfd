"""The KYC upgrade and the user session flows of ``client.abha`` (the ABHA flow machinery)."""

from __future__ import annotations

from ._abha_base import AbhaBase

__all__ = ["AbhaKycMixin"]


class AbhaKycMixin(AbhaBase):
    """Part of :class:`~health_async.resources.Abha` (see the module)."""
