"""The fake server's processing results (``GET /mr/api/v1/docs/{id}/result``), whose state advances as it is polled.

Every document of the fake has a result: the seeded ones and those uploaded through ``POST /mr/api/v2/docs``
(``server.data.documents[user][document_id]``). A result answers ``queued`` on its first poll, ``inprogress``
after, and ``completed`` once it has been polled more than :attr:`FakeRecords.polls_to_complete` times (2 by
default) *and* :attr:`FakeRecords.seconds_to_complete` seconds (0 by default) have passed since its first poll.
A completed result carries realistic extracted tests (``data.output.data[]``, taken from the document's smart
report when it has one), a PII block and a base64 FHIR bundle. An uploaded file whose content ends in ``b"error"``
ends in ``error`` with an error entry instead; :meth:`FakeRecords.fail` and :meth:`FakeRecords.delete` force the
other final states. An unknown id answers 404; a request without ``X-Pt-Id`` answers 400.

The upload routes (direct and presigned) note in the stored document (``upload.ends_in_error``) whether the file
ends in ``b"error"``.
"""

from __future__ import annotations

import base64
import random
import time
from typing import TYPE_CHECKING, Any, Final

from aiohttp import web

from ... import _json
from .. import _routes as R
from .._data import _TESTS
from .._domain import Domain

if TYPE_CHECKING:
    from .._common import RecordedRequest
    from .._domain import Server

__all__ = ["ROUTES", "FakeRecords"]

ROUTES: Final[tuple[str, ...]] = ("result",)

#: LOINC codes of the fake's lab tests.
_LOINC: Final = {
    "Haemoglobin": "718-7",
    "Total WBC Count": "6690-2",
    "Platelet Count": "777-3",
    "Fasting Blood Glucose": "1558-6",
    "HbA1c": "4548-4",
    "Serum Creatinine": "2160-0",
    "TSH": "3016-3",
}


class FakeRecords(Domain):
    """State and test controls of processing results (``server.records``)."""

    ROUTES = ROUTES

    def __init__(self, server: Server) -> None:
        super().__init__(server)
        #: Polls answered ``queued``/``inprogress`` before a result is ``completed`` (0: completed at once).
        self.polls_to_complete = 2
        #: Seconds from a result's first poll before it may be ``completed``.
        self.seconds_to_complete = 0.0
        self._polls: dict[str, int] = {}
        self._first_poll: dict[str, float] = {}
        self._failed: dict[str, list[dict[str, Any]]] = {}
        self._deleted: set[str] = set()

    # ------------------------------------------------------------------------------ test controls

    def configure(self, *, polls: int | None = None, seconds: float | None = None) -> None:
        """Set :attr:`polls_to_complete` and/or :attr:`seconds_to_complete`."""
        if polls is not None:
            self.polls_to_complete = polls
        if seconds is not None:
            self.seconds_to_complete = seconds

    def fail(self, document_id: str, errors: list[dict[str, Any]] | None = None) -> None:
        """Have ``document_id`` end in ``error`` with ``errors`` (default: one ``{code, message}`` entry)."""
        self._failed[document_id] = errors if errors is not None else [_PARSE_ERROR]

    def delete(self, document_id: str) -> None:
        """Have ``document_id``'s result answer ``deleted`` from now on."""
        self._deleted.add(document_id)

    def polls(self, document_id: str) -> int:
        """How many times ``document_id``'s result was asked for."""
        return self._polls.get(document_id, 0)

    def reset(self) -> None:
        """Forget poll counts (results start again from ``queued``), forced failures and deletions."""
        self._polls.clear()
        self._first_poll.clear()
        self._failed.clear()
        self._deleted.clear()

    # ------------------------------------------------------------------------------ routes

    def add_routes(self, app: web.Application) -> None:
        """``GET /mr/api/v1/docs/{document_id}/result``."""
        app.router.add_get(R.RESULT, self.server._route("result", self._result))

    async def _result(self, request: web.Request, _rec: RecordedRequest) -> web.StreamResponse:
        user = request.headers.get(R.PT_ID)
        if not user:
            return web.json_response({"message": "X-Pt-Id header is required"}, status=400)
        document_id = request.match_info["document_id"]
        raw = self.server.data.documents.get(user, {}).get(document_id)
        if raw is None:
            return web.Response(status=404, text="No such document.")
        polls = self._polls[document_id] = self._polls.get(document_id, 0) + 1
        now = time.monotonic()
        first = self._first_poll.setdefault(document_id, now)
        if document_id in self._deleted:
            return self.server._json(request, {"status": "deleted", "error": []})
        if polls <= self.polls_to_complete or now - first < self.seconds_to_complete:
            return self.server._json(request, {"status": "queued" if polls == 1 else "inprogress", "error": []})
        doc = _json.loads(raw)
        errors = self._failed.get(document_id)
        if errors is None and (doc.get("upload") or {}).get("ends_in_error"):
            errors = [_PARSE_ERROR]
        if errors is not None:
            return self.server._json(request, {"status": "error", "error": errors})
        return self.server._json(request, completed_result(doc, document_id))


_PARSE_ERROR: Final = {"code": 422, "message": "the document could not be parsed"}


def _range_json(low: float, high: float) -> str:
    return _json.dumps({"low": low, "high": high}).decode()


def completed_result(doc: dict[str, Any], document_id: str) -> dict[str, Any]:
    """A ``completed`` result body for a document: its smart report's values (or seeded ones) as extracted tests,
    a PII block and a base64 FHIR bundle, with the shapes of the service's interface."""
    rng = random.Random(document_id)
    report = doc.get("smart_report") or {}
    items = [*(report.get("verified") or []), *(report.get("unverified") or [])]
    known = {name: (unit, ref) for name, unit, ref, _ in _TESTS}
    picked: list[tuple[str, float, str, str]] = []
    for item in items:
        name = item.get("name")
        if name in known:
            try:
                picked.append((name, float(item["value"]), item.get("unit") or known[name][0], known[name][1]))
            except (KeyError, TypeError, ValueError):
                continue
    if not picked:
        for name, unit, ref, (lo, hi) in rng.sample(_TESTS, rng.randint(3, 5)):
            picked.append((name, round(rng.uniform(lo, hi), 1), unit, ref))
    tests: list[dict[str, Any]] = []
    for name, value, unit, ref in picked:
        low, high = (float(x) for x in ref.split("-"))
        factor = 10.0 if unit == "g/dL" else 1.0  # g/dL -> g/L, as a standard-unit conversion would
        normalised_unit = "g/L" if unit == "g/dL" else unit
        tests.append(
            {
                "test_name": name,
                "data": {
                    "value": value,
                    "unit": unit,
                    "unit_processed": unit,
                    "normal_range_report": _range_json(low, high),
                    "normal_range_eka": _range_json(low, high),
                    "unit_eka_id": f"un-{rng.randint(100, 999)}",
                    "display_range": ref,
                },
                "normalised_data": {
                    "value": round(value * factor, 3),
                    "unit": normalised_unit,
                    "normal_range_report": _range_json(low * factor, high * factor),
                    "normal_range_eka": _range_json(low * factor, high * factor),
                    "unit_eka_id": f"un-{rng.randint(100, 999)}",
                },
                "confidence": round(rng.uniform(0.8, 0.99), 2),
                "test_eka_id": f"lb-{rng.randint(10**6, 10**7)}",
                "loinc_id": _LOINC.get(name),
            }
        )
    date = doc.get("document_date_epoch") or 1_700_000_000
    patient_name = rng.choice(["Asha Sharma", "Ravi Iyer", "Meera Reddy", "Arjun Nair"])
    pii = {
        f"{document_id}/page-1.jpeg": [
            {
                "PageNum": 1,
                "DocumentDate": date,
                "Patient": {
                    "Age": {"Years": rng.randint(20, 80), "Months": 0, "Days": 0},
                    "Gender": "female",
                    "Name": patient_name,
                },
                "Report": {
                    "SampleCollectionDate": "10/07/2024 09:07:00",
                    "SampleReceivedDate": "10/07/2024 09:58:19",
                    "GeneratedDate": "10/07/2024 15:44:01",
                    "Doctor": "Dr. K. Rao",
                    "Facility": "Fake PathLabs",
                },
            }
        ]
    }
    bundle = {
        "resourceType": "Bundle",
        "type": "collection",
        "entry": [
            {"resource": {"resourceType": "Patient", "id": "patient-1", "name": [{"text": patient_name}]}},
            *(
                {
                    "resource": {
                        "resourceType": "Observation",
                        "status": "final",
                        "subject": {"reference": "Patient/patient-1"},
                        "code": {
                            "coding": [{"system": "http://loinc.org", "code": t["loinc_id"], "display": t["test_name"]}]
                        },
                        "valueQuantity": {"value": t["data"]["value"], "unit": t["data"]["unit"]},
                    }
                }
                for t in tests
            ),
        ],
    }
    return {
        "status": "completed",
        "error": [],
        "data": {"fhir": base64.b64encode(_json.dumps(bundle)).decode(), "output": {"data": tests, "pii": pii}},
    }
