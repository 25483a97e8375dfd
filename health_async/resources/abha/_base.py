"""The plumbing every ``client.abha`` method shares: the partner headers and one POST helper (sent once, or as a
read). :class:`~health_async.resources.Abha` is built from this base and one mixin per concern: registration and
login (``abha.py``), the profile, card, QR, search and pincode (``_abha_profile.py``), the KYC and session flows
(``_abha_kyc.py``), Scan & Share (``_scan_share.py``)."""

from __future__ import annotations

from .._base import PartnerOptions, PartnerResource

__all__ = ["AbhaBase", "AbhaOptions"]


class AbhaOptions(PartnerOptions, total=False):
    """Every per-call option of a ``client.abha`` endpoint method (the partner headers, ``encrypt``, ``retry`` and
    ``timeout``: see :class:`~health_async.resources._base.PartnerOptions`)."""


class AbhaBase(PartnerResource):
    """What every ``client.abha`` mixin builds on (see the module): the partner headers and the POST helper of
    :class:`~health_async.resources._base.PartnerResource`."""
