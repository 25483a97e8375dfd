"""Scan & Share at the registration counter: the share, its token, the profile a hospital receives.

Written from ``registration.yml`` (``ScanandshareProfileShareRequest``, the 202 answer of
``POST /abdm/v2/profile/share``, ``ScanandshareResponse``, ``HipQRScanShareProfileResponseV2``) and the pages
``scan-and-share/*.mdx`` and ``phr/scan-and-share.mdx``. What a hospital receives is the ``abha.hip_profile_share``
webhook, typed as :class:`~health_async.models.ProfileShare` (:mod:`._abdm_events`).

* :class:`ShareLocation`: the device's location sent with a share (checked when made).
* :class:`ShareStatus`: where a share is (``success``, ``processing``, ``failed``; ``UNKNOWN`` for anything else).
* :class:`ShareToken`: the facility's answer to a share: the token number, the facility, the status.

Where the files disagree: the status enum of the OpenAPI spells ``" processing"`` and ``" failed"`` with a leading
space (and ``success`` without): the status is read without surrounding space or case. The answer of
``GET /abdm/v2/profile/share/{request_id}`` is ``ScanandshareResponse`` (``expiry``, ``request_id``, ``status``,
``token_number``), while ``phr/scan-and-share.mdx`` says it carries "HIP details, token expiry, and whether the
token should be displayed" (the fields of the v1 answer ``HipQRScanShareProfileResponseV2``: ``hip_id``,
``hip_name``, ``token_expiry``, ``show_token_screen``...): both are read, the v2 spelling first.

Personal data (the token number, the device's location) is left out of every ``repr``.
"""

from __future__ import annotations

import datetime as dt
from typing import ClassVar, Self

import attrs

from ..._config import finite
from ..._wire import WireEnum, instant, local, wire
from ...errors import InvalidRequest

__all__ = ["ShareLocation", "ShareStatus", "ShareToken"]


class ShareStatus(WireEnum):
    """Where a Scan & Share request is. ``UNKNOWN`` stands for a value this version does not know."""

    #: The facility answered (with a token number, or without one: the token is optional).
    SUCCESS = "success"
    #: Sent to the facility; its answer has not come yet.
    PROCESSING = "processing"
    #: The share did not reach the facility, or the facility refused it.
    FAILED = "failed"
    UNKNOWN = "unknown"

    @classmethod
    def from_wire(cls, value: object) -> Self:
        """The member for a wire value, without surrounding space or case (the OpenAPI's enum spells
        ``" processing"``); ``UNKNOWN`` for anything else, never an error."""
        if not isinstance(value, str):
            return cls["UNKNOWN"]
        return super().from_wire(value.strip().lower())


def _coordinate(name: str, value: object, limit: float) -> float:
    degrees = finite(value)
    if degrees is None:
        raise InvalidRequest(f"{name} must be a finite number of degrees")
    if not -limit <= degrees <= limit:
        raise InvalidRequest(f"{name} must be within [-{limit:g}, {limit:g}] degrees")
    return degrees


@attrs.frozen
class ShareLocation:
    """The device's location when the QR code was scanned (``location`` of the share; the vendor asks for it:
    "Use the device location for the location data").

    Checked when made (:class:`~health_async.errors.InvalidRequest` naming the rule, never the value): finite
    numbers, ``latitude`` within [-90, 90] and ``longitude`` within [-180, 180] degrees. Sent as the decimal text
    the OpenAPI asks for (``HipLocation``: strings). A person's whereabouts: hidden from ``repr``.
    """

    latitude: float = attrs.field(repr=False)
    longitude: float = attrs.field(repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "latitude", _coordinate("latitude", self.latitude, 90.0))
        object.__setattr__(self, "longitude", _coordinate("longitude", self.longitude, 180.0))

    def to_wire(self) -> dict[str, str]:
        """``HipLocation``: ``{"latitude": "<text>", "longitude": "<text>"}``."""
        return {"latitude": repr(self.latitude), "longitude": repr(self.longitude)}


@attrs.frozen
class ShareToken:
    """The facility's answer to a Scan & Share (``GET /abdm/v2/profile/share/{request_id}``).

    Final when :attr:`status` is ``SUCCESS`` (:attr:`token_number` set, or ``None`` when the facility registered
    the patient without a token: the token is optional) or ``FAILED``. Lenient (see :mod:`health_async._wire`): a
    side field that does not fit reads as not sent; the token number itself must fit.
    """

    __wire_lenient__: ClassVar[bool] = True

    #: The request the share is tracked by (the answer's, else the one asked for).
    request_id: str = wire(default="")
    status: ShareStatus = ShareStatus.UNKNOWN
    #: The status exactly as sent (useful when :attr:`status` is ``UNKNOWN``).
    raw_status: str | None = wire("status", default=None)
    #: The token the facility gave (hidden from ``repr``; never logged).
    token_number: str | None = wire(pii=True, strict=True, default=None)
    #: When the token expires: wire ``expiry`` (v2), else ``token_expiry`` (v1).
    expires_at: dt.datetime | None = wire("expiry", "token_expiry", parse=instant, default=None)
    #: The facility (its HIP id): the answer's, else the one the share was sent to.
    hip_id: str | None = wire(default=None)
    #: The facility's name, when the answer carries it (v1 ``hip_name``).
    hip_name: str | None = wire(default=None)
    #: The facility's address, when the answer carries it (v1 ``address``: the facility's, not the patient's).
    hip_address: str | None = wire("address", default=None)
    #: Whether the app should show the token screen, when the answer says (v1 ``show_token_screen``).
    show_token_screen: bool | None = wire(default=None)
    #: The counter the share was sent to (from the call; the answer does not carry it).
    counter_id: str | None = local()

    @property
    def done(self) -> bool:
        """The facility has answered, one way or the other (``SUCCESS`` or ``FAILED``)."""
        return self.status in (ShareStatus.SUCCESS, ShareStatus.FAILED)
