"""The requester's (HIU's) side: consent and subscription requests, the HIU's key set, the health data received."""

from __future__ import annotations

from ._abdm_base import AbdmBase

__all__ = ["HiuMixin"]


class HiuMixin(AbdmBase):
    """Part of :class:`~health_async.resources.Abdm` (see the module)."""
