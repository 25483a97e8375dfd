"""``client.abdm.consents``: consents (create, list, details, approve, deny, revoke), the consent PIN and
auto-approval (``registration.yml``: ``/abdm/v1/consents/*``)."""

from __future__ import annotations

from ._abdm_base import AbdmBase

__all__ = ["Consents"]


class Consents(AbdmBase):
    """Consents and the consent PIN (see the module)."""
