"""The requester's (HIU's) side: the health data received, decrypted, and the parsing status sent back.

The pushed data itself arrives typed as :class:`~health_async.models.HiuDataPush` (``models/abdm/_events.py``,
the ``abha.hiu_data_push`` webhook); :meth:`client.abdm.decrypt_health_data
<health_async.resources.Abdm.decrypt_health_data>` turns it into :class:`ReceivedBundle` items, and
:meth:`client.abdm.acknowledge_health_data <health_async.resources.Abdm.acknowledge_health_data>` sends one
:class:`HealthDataStatus` per care context (wire ``RecordsStatusResponse`` of ``registration.yml``).

Health data (the bundles) never appears in a ``repr``; nor does a status's free-text description.

Judgement call: :attr:`ReceivedBundle.report` is typed ``Any`` here, though it is always a
:class:`health_async.fhir.ValidationReport` when the client made it: the models sit below ``health_async.fhir`` in
the package's layers (``fhir`` uses the models' :class:`~health_async.models.HiType`), so they may not import it,
not even for a type. For the same reason a bundle is read with :func:`health_async.fhir.read`
(``read(received.bundle)``), not by a method here.
"""

from __future__ import annotations

from typing import Any, Final

import attrs

from ...errors import InvalidRequest

__all__ = ["HealthDataStatus", "ReceivedBundle"]

#: How many rules :meth:`HealthDataStatus.from_bundle` names in a description (the description has a limit).
_NAMED_RULES: Final = 10


@attrs.frozen
class ReceivedBundle:
    """One care context's FHIR bundle, decrypted from a data push and its checksum checked."""

    #: The care context's reference at the HIP (wire ``care_context_id`` of the entry).
    care_context_id: str
    #: The FHIR bundle (the decrypted JSON object). Health data: hidden from ``repr``.
    bundle: dict[str, Any] = attrs.field(repr=False)
    #: The entry's media type as sent (``"application/fhir+json"``), or ``None``.
    media: str | None = None
    #: The bundle's :class:`~health_async.fhir.ValidationReport` (:func:`health_async.fhir.validate`, computed when
    #: :meth:`~health_async.resources.Abdm.decrypt_health_data` decrypted it): ``report.ok``, ``report.record_type``,
    #: ``report.problems`` (paths and rules, never values). Nothing is refused for it: it is the patient's data, to
    #: be read as it is (:func:`health_async.fhir.read`) and reported with :meth:`HealthDataStatus.from_bundle`.
    #: ``None`` for a bundle made without one. Left out of ``repr`` and of comparisons.
    report: Any = attrs.field(default=None, repr=False, eq=False)


@attrs.frozen
class HealthDataStatus:
    """How reading one care context of a push went: what :meth:`client.abdm.acknowledge_health_data
    <health_async.resources.Abdm.acknowledge_health_data>` reports (wire ``RecordsStatusResponse``)."""

    #: The care context's reference (as in the push).
    care_context_id: str
    #: Whether its FHIR data was received and parsed.
    success: bool
    #: Why it failed (or a note); free text, hidden from ``repr``. Do not put health data in it.
    description: str | None = attrs.field(default=None, repr=False)

    @classmethod
    def from_bundle(cls, received: ReceivedBundle) -> HealthDataStatus:
        """The status of a decrypted bundle, from its :attr:`ReceivedBundle.report`: ``success`` when it has no
        validation error; otherwise a ``description`` naming the count of errors and their rules (at most ten; never
        a path or a value: it goes to the HIP through ABDM). :class:`~health_async.errors.InvalidRequest` for a
        bundle without a report (one :meth:`~health_async.resources.Abdm.decrypt_health_data` did not make)."""
        if not isinstance(received, ReceivedBundle):
            raise InvalidRequest("from_bundle takes a ReceivedBundle (from client.abdm.decrypt_health_data)")
        report = received.report
        if report is None:
            raise InvalidRequest("this ReceivedBundle has no validation report (make it with decrypt_health_data)")
        if report.ok:
            return cls(received.care_context_id, True)
        errors = report.errors
        rules = list(dict.fromkeys(p.rule for p in errors))
        named = ", ".join(rules[:_NAMED_RULES]) + (
            f" and {len(rules) - _NAMED_RULES} more" if len(rules) > _NAMED_RULES else ""
        )
        return cls(received.care_context_id, False, f"FHIR bundle not valid: {len(errors)} error(s) ({named})")
