"""The plumbing every ``client.abdm`` method shares: the optional partner headers. :class:`~health_async.resources.Abdm`
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
