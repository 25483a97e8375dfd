"""A record to build later: :class:`Record`, a builder of this package and its inputs, built with the care
context's id by whoever pushes it.

A hospital's ``on_data_fetch`` callback (or a direct ``client.abdm.push_health_data``) may answer each care context
with builder inputs instead of a finished bundle::

    async def on_data_fetch(request):
        return {cid: fhir.Record(fhir.lab_report, patient=..., organization=..., date=..., observations=[...],
                                 conclusion=...)
                for cid in request.care_contexts}

The push builds each with its care context's id (so the document's ids are that care context's, and a re-push sends
the same bytes), then validates it like any bundle.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from ._build import (
    discharge_summary,
    from_processing_result,
    health_document,
    imaging_report,
    immunization_record,
    invoice_record,
    lab_report,
    op_consult,
    prescription,
    wellness_record,
)

__all__ = ["Record"]

#: The builders a :class:`Record` may name.
BUILDERS: Final = frozenset(
    {
        op_consult,
        prescription,
        lab_report,
        imaging_report,
        discharge_summary,
        immunization_record,
        invoice_record,
        wellness_record,
        health_document,
        from_processing_result,
    }
)


class Record:
    """A record to build with its care context's id: ``Record(fhir.lab_report, patient=..., ...)`` takes one of this
    package's builders and every keyword it takes but ``care_context_id``, which the push gives
    (:meth:`build`). Its repr names the builder only (the inputs are a person's data).

    Raises:
        TypeError: ``builder`` is not one of this package's builders, or ``care_context_id`` is given.
    """

    __slots__ = ("_builder", "_inputs")

    def __init__(self, builder: Callable[..., dict[str, Any]], /, *args: Any, **inputs: Any) -> None:
        if builder not in BUILDERS:
            raise TypeError("Record takes one of health_async.fhir's builders (lab_report, op_consult, ...)")
        if "care_context_id" in inputs:
            raise TypeError("Record gets care_context_id from the push: leave it out")
        self._builder = builder
        self._inputs: tuple[tuple[Any, ...], Mapping[str, Any]] = (args, dict(inputs))

    @property
    def builder(self) -> Callable[..., dict[str, Any]]:
        """The builder this record is made with."""
        return self._builder

    def build(self, care_context_id: str) -> dict[str, Any]:
        """The bundle, built for ``care_context_id`` (the builder's own ``TypeError``/``ValueError`` for inputs it
        refuses, naming the field, never the value)."""
        args, inputs = self._inputs
        return self._builder(*args, care_context_id=care_context_id, **inputs)

    def __repr__(self) -> str:
        return f"Record({self._builder.__name__})"
