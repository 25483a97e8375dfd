"""The plumbing every ``client.abdm`` method shares: the optional partner headers, and which of the client's defaults
a call sends (:meth:`AbdmBase._headers`, :meth:`AbdmBase._named_patient_headers`). :class:`~health_async.resources.Abdm`
is built from this base and one mixin per concern: the hospital's side (``abdm.py``), the patient's app finding and
linking records (``_abdm_discover.py``), the requester's side (``_abdm_hiu.py``); consents are a resource of their
own (``abdm_consents.py``, ``client.abdm.consents``)."""

from __future__ import annotations

from ..._config import NOT_GIVEN
from .._base import Resource

__all__ = ["AbdmBase"]


class AbdmBase(Resource):
    """What every ``client.abdm`` part builds on (see the module)."""

    def _headers(self, oid: str | None = None, partner_user_id: str | None = None) -> dict[str, str]:
        """The optional partner headers; a ``None`` here means "the client's default"."""
        return self._partner_headers(
            NOT_GIVEN if oid is None else oid, NOT_GIVEN if partner_user_id is None else partner_user_id
        )

    def _named_patient_headers(self, oid: str | None = None, partner_user_id: str | None = None) -> dict[str, str]:
        """The partner headers of a call that names its patient in the body (a link's ``abha_address``, an SMS's
        mobile, a consent request's patient): ``X-Pt-Id`` and ``X-Partner-Pt-Id`` only when the call gives them,
        never the client's ``user_id`` / ``partner_user_id``; ``X-Hip-Id`` the call's facility, else the client's.

        Judgement call: the client's defaults name *its* default patient, and sent beside a body naming another one
        the service files the call under the default patient (a link for ``b@sbx`` listed as ``user_id``'s). The
        configuration table says ``user_id`` goes on records and ABHA calls; the same holds for
        ``partner_user_id``, the other header naming a patient. ``partner_hip_id`` names the facility, not a
        patient, so its default is still sent."""
        return self._partner_headers(oid, partner_user_id)
