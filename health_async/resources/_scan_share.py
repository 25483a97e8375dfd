"""Scan & Share: the patient side (share, then the token) and the hospital side (the token answered)."""

from __future__ import annotations

from ._abha_base import AbhaBase

__all__ = ["ScanShareMixin"]


class ScanShareMixin(AbhaBase):
    """Part of :class:`~health_async.resources.Abha` (see the module)."""
