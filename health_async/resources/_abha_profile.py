"""The ABHA profile after registration: profile, update, delete, card, QR, search by mobile, pincode."""

from __future__ import annotations

from ._abha_base import AbhaBase

__all__ = ["AbhaProfileMixin"]


class AbhaProfileMixin(AbhaBase):
    """Part of :class:`~health_async.resources.Abha` (see the module)."""
