"""The plumbing ``client.hpr`` and ``client.hfr`` share: the partner headers, the per-call options and one POST
helper (sent once, or as a read), as the ABHA resources have."""

from __future__ import annotations

from .._base import PartnerOptions, PartnerResource

__all__ = ["RegistryBase", "RegistryOptions"]


class RegistryOptions(PartnerOptions, total=False):
    """Every per-call option of a ``client.hpr`` / ``client.hfr`` method: the partner headers (``user_id``,
    ``partner_user_id``, ``partner_hip_id``), ``encrypt``, ``retry`` and ``timeout`` (OTP, verify, create, onboard
    and link calls are never repeated once they may have reached the service, whatever the policy says)."""


class RegistryBase(PartnerResource):
    """What ``client.hpr`` and ``client.hfr`` build on: the partner headers and the POST helper of
    :class:`~health_async.resources._base.PartnerResource`."""
