"""A patient's own search for their records (user-initiated linking, ``care-contexts/discover/introduction.mdx``):
what the hospital answers with, and the error codes of its answers.

The answers' shapes are ``registration.yml``'s ``ModelsDiscoverCareContextHmisConnect`` (``on-discover``),
``ModelsLinkOnInitHmisConnect`` (``discover/link/on-init``) and ``ModelsLinkOnConfirmHmisConnect``
(``discover/link/on-confirm``); the hospital side of the onboarding (``ModelsAddFacilityResponse``) and the
providers a user is linked with (``ProviderResponse``) are here too.

Judgement call (the codes): the answers' ``error.code`` is an integer (``ModelsError``) and no vendor page names the
codes of these three answers, so :class:`LinkingError` takes the number of the matching row of the vendor's
``abdm-connect/errors.mdx`` (``ABDM-1012`` -> ``1012``), with that row's message.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

import attrs

from ..._wire import wire
from ._hospital import CareContext

__all__ = ["CareContextProvider", "MatchedPatient", "FacilityOnboarded", "LinkingError"]


class LinkingError(enum.IntEnum):
    """Why a hospital refuses a step of a patient's own search; the value is the ``error.code`` sent, the
    :attr:`message` its ``error.message`` (the rows of ``abdm-connect/errors.mdx``)."""

    #: ``ABDM-1012``: no patient (or more than one: ABDM asks not to guess) matches the discovery.
    NO_MATCH = 1012
    #: ``ABDM-1017``: a link request for a discovery this hospital did not answer (or that has expired).
    UNKNOWN_DISCOVERY = 1017
    #: ``ABDM-1036``: the link request names a patient or care context the discovery did not offer.
    NOT_OFFERED = 1036
    #: ``ABDM-1014``: no mobile number to send the OTP to.
    NO_MOBILE = 1014
    #: ``ABDM-1004``: the OTP could not be sent (the hospital's SMS sender failed).
    OTP_NOT_SENT = 1004
    #: ``ABDM-1035`` (its 400 row): the OTP does not match.
    OTP_MISMATCH = 1035
    #: ``ABDM-1026``: the link reference is unknown, its OTP has expired or was already used.
    INVALID_LINK = 1026
    #: ``ABDM-1100``: too many wrong OTPs for this link.
    TOO_MANY_ATTEMPTS = 1100

    @property
    def message(self) -> str:
        """The ``error.message`` sent with this code."""
        return _MESSAGES[self]


_MESSAGES = {
    LinkingError.NO_MATCH: "No records found against the ABHA Address",
    LinkingError.UNKNOWN_DISCOVERY: "Invalid TransactionId",
    LinkingError.NOT_OFFERED: "Data does not matched",
    LinkingError.NO_MOBILE: "Invalid Mobile Email",
    LinkingError.OTP_NOT_SENT: "SMS Gateway is unavailable",
    LinkingError.OTP_MISMATCH: "OTP does not matched",
    LinkingError.INVALID_LINK: "Invalid Link Token",
    LinkingError.TOO_MANY_ATTEMPTS: (
        "You have requested multiple OTPs Or Exceeded maximum number of attempts for OTP match in this "
        "transaction. Please try again in 30 minutes."
    ),
}


def _care_contexts(value: Iterable[CareContext]) -> tuple[CareContext, ...]:
    return tuple(value)


@attrs.frozen
class MatchedPatient:
    """The one patient of your records a discovery matched, with the care contexts not yet linked to their ABHA:
    what ``on_discover`` returns and :meth:`client.abdm.answer_discover
    <health_async.resources.Abdm.answer_discover>` sends (one ``patients`` item per HI type).

    Checked when sent: ``reference`` and ``display`` are non-empty lines of text, every care context as for
    :meth:`~health_async.resources.Abdm.link_care_contexts` (its ``data`` is not sent: a discovery answer carries
    no bundle). Nothing here appears in a ``repr`` but the number of care contexts.
    """

    #: Your reference of the patient (wire ``ref_num``): the link request and the link confirmation name it.
    reference: str = attrs.field(repr=False)
    #: The patient as the PHR app shows it (wire ``display``), e.g. their name.
    display: str = attrs.field(repr=False)
    #: The care contexts the patient may link (none: answered as no match).
    care_contexts: tuple[CareContext, ...] = attrs.field(converter=_care_contexts, repr=lambda v: f"<{len(v)}>")
    #: The mobile number on your file, where the linking OTP goes; ``None``: the discovery's verified one.
    mobile: str | None = attrs.field(default=None, repr=False)


@attrs.frozen
class FacilityOnboarded:
    """A facility onboarded as an HIP (``POST /abdm/v1/hip/onboard``, ``ModelsAddFacilityResponse``)."""

    hip_id: str | None = None
    hip_name: str | None = None
    #: The facility's code at the service.
    hip_code: str | None = None
    #: Where the facility's Scan & Share QR code points.
    scan_share_url: str | None = None


@attrs.frozen
class CareContextProvider:
    """A facility a user has care contexts with (an item of ``GET /abdm/v1/care-contexts/providers``)."""

    hip_id: str | None = None
    hip_name: str | None = wire(default=None)
