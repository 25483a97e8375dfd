"""The ABHA profile after registration: search by mobile and pincode details.

The profile itself is :class:`~health_async.models.AbhaProfile` (``models/abha/_registration.py``: the same
``ProfileResponse``
the step answers carry). Wire shapes from ``registration.yml``: ``ProfileSearchKycAbhaResponse`` /
``ProfileAbha`` (``POST /abdm/v1/profile/search``) and ``PincodeResolvedPincodeData``
(``GET /abdm/v1/registration/pincode/{pincode}``).

Personal data stays out of ``repr``: the search answer's transaction id, ABHA addresses, (masked) ABHA numbers,
names, ages and genders. Pincode details are public postal data and are shown.
"""

from __future__ import annotations

from typing import ClassVar

import attrs

from ..._wire import empty_is_none, wire

__all__ = ["AbhaSearchMatch", "AbhaSearchResult", "PincodeDetails"]


@attrs.frozen
class AbhaSearchMatch:
    """One KYC-verified ABHA of the searched mobile number (wire ``ProfileAbha``, an entry of ``profiles``).

    To log into it: ``client.abha.login_init("search", str(match.index), txn_id=result.txn_id)``.
    """

    __wire_lenient__: ClassVar[bool] = True  # an entry of an answer that carries a txn id: see health_async._wire

    #: Its position in the answer, the identifier of a ``search`` login (wire ``index``, from 1).
    index: int | None = None
    #: The ABHA address. Hidden from ``repr``.
    abha_address: str | None = wire(default=None, pii=True)
    #: The ABHA number as the service shows it, masked (``xx-xxxx-xxxx-1525``). Hidden from ``repr``.
    abha_number: str | None = wire(default=None, pii=True)
    #: The holder's name. Hidden from ``repr``.
    name: str | None = wire(default=None, pii=True)
    #: ``"M"``, ``"F"`` or ``"O"``. Hidden from ``repr``.
    gender: str | None = wire(default=None, pii=True)
    #: Age in years. Hidden from ``repr``.
    age: int | None = wire(default=None, pii=True)
    #: True when the ABHA is KYC-verified (sent as the string ``"true"``).
    kyc_verified: bool | None = None
    #: The service's ``internal`` flag (undocumented meaning; kept as sent).
    internal: bool | None = None


@attrs.frozen
class AbhaSearchResult:
    """The answer of ``client.abha.search(mobile)``: the KYC-verified ABHAs of a mobile number.

    ``profiles`` is empty when the number holds none (the service may send ``null``); ``txn_id`` is what a
    ``search`` login continues with. ``repr`` shows only how many were found.
    """

    __wire_lenient__: ClassVar[bool] = True  # carries a txn id: see health_async._wire

    #: The matches, in the service's order (``()`` for none).
    profiles: tuple[AbhaSearchMatch, ...] = attrs.field(default=(), repr=False)
    #: The transaction id for ``login_init("search", ...)``. Hidden from ``repr``.
    txn_id: str | None = wire(parse=empty_is_none, default=None, pii=True, strict=True)

    @property
    def count(self) -> int:
        """How many ABHAs were found."""
        return len(self.profiles)

    def __repr__(self) -> str:
        return f"AbhaSearchResult(count={self.count})"


@attrs.frozen
class PincodeDetails:
    """Where a pincode is (wire ``PincodeResolvedPincodeData``): its state and district, names and LGD codes."""

    #: The pincode, as the service returned it.
    pincode: str | None = None
    #: The state's code (e.g. ``"20"``) and name (``"Jharkhand"``).
    state_code: str | None = None
    state_name: str | None = None
    #: The district's code (wire ``dist_code``, e.g. ``"339"``) and name (wire ``dist_name``, ``"Ranchi"``).
    district_code: str | None = wire("dist_code", "district_code", default=None)
    district_name: str | None = wire("dist_name", "district_name", default=None)
