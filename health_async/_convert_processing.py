"""Parsing hooks of the processing models (:mod:`health_async.models._processing`), on the one converter.

Hand-written like the document hooks of :mod:`health_async._convert`: one ``dict.get`` and a type check per
field; errors name the field, never the value. Registered on import (``resources.documents`` imports this module).
"""

from __future__ import annotations

import base64
import binascii
import math
from typing import Any, Final, cast

from . import _json
from ._convert import _dict, _Invalid, _objects, _str, _validation_error, converter
from .errors import ResponseValidationError
from .models import ExtractedTest, ProcessingError, ProcessingResult, ProcessingStatus, ReferenceRange

__all__ = ["decode_fhir", "structure_result", "structure_tests"]


def _text(value: Any, field: str) -> str | None:
    """A value kept as text, as the smart report keeps it: strings as they are, numbers as their text."""
    kind = type(value)
    if value is None:
        return None
    if kind is str:
        return cast(str, value)
    if kind is int:
        return str(value)
    if kind is float:
        if not math.isfinite(value):
            raise _Invalid(field)
        return repr(value)
    raise _Invalid(field)


def _optional_float(value: Any, field: str) -> float | None:
    kind = type(value)
    if value is None:
        return None
    if kind is float or kind is int:
        return float(value)
    if kind is str:
        try:
            return float(value)
        except ValueError:
            pass
    raise _Invalid(field)


def _bound(value: Any) -> float | None:
    # A range bound: a number or a numeric string; anything else is "no bound" (ranges are best effort).
    if type(value) is float or type(value) is int:
        return float(value) if math.isfinite(value) else None
    if type(value) is str:
        try:
            number = float(value)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def _range(value: Any) -> ReferenceRange | None:
    """A ``normal_range_*``: an object, or (as the schema says) a JSON string of one, with ``low``/``high``.

    Judgement call: anything else (empty, a text range, JSON that is not an object) gives ``None`` rather than
    failing the whole result; the printed range is still in ``display_range``.
    """
    if value is None:
        return None
    if type(value) is str:
        if not value.strip():
            return None
        try:
            value = _json.loads(value)
        except _json.JSONDecodeError:
            return None
    if type(value) is not dict:
        return None
    get = value.get
    low = get("low", get("min"))
    high = get("high", get("max"))
    found = ReferenceRange(_bound(low), _bound(high))
    return None if found.low is None and found.high is None else found


def _code(value: Any) -> int | str | None:
    if value is None or type(value) is int or type(value) is str:
        return value
    if type(value) is float and value.is_integer():
        return int(value)
    raise _Invalid("error[].code")


def _test(data: Any, _: Any = None) -> ExtractedTest:
    d = _dict(data, "output.data[]")
    get = d.get
    raw = get("data")
    raw = {} if raw is None else _dict(raw, "data")
    norm = get("normalised_data")
    if norm is None:
        norm = get("normalized_data")
    norm = {} if norm is None else _dict(norm, "normalised_data")
    rget, nget = raw.get, norm.get
    return ExtractedTest(
        name=_str(get("test_name", get("name")), "test_name"),
        value=_text(rget("value"), "data.value"),
        unit=_str(rget("unit"), "data.unit"),
        unit_processed=_str(rget("unit_processed"), "data.unit_processed"),
        unit_eka_id=_str(rget("unit_eka_id"), "data.unit_eka_id"),
        display_range=_text(rget("display_range"), "data.display_range"),
        range_report=_range(rget("normal_range_report")),
        range_eka=_range(rget("normal_range_eka")),
        normalised_value=_text(nget("value"), "normalised_data.value"),
        normalised_unit=_str(nget("unit"), "normalised_data.unit"),
        normalised_unit_eka_id=_str(nget("unit_eka_id"), "normalised_data.unit_eka_id"),
        normalised_range_report=_range(nget("normal_range_report")),
        normalised_range_eka=_range(nget("normal_range_eka")),
        confidence=_optional_float(get("confidence"), "confidence"),
        test_eka_id=_str(get("test_eka_id"), "test_eka_id"),
        loinc_id=_str(get("loinc_id"), "loinc_id"),
    )


def _errors(value: Any) -> tuple[ProcessingError, ...]:
    if type(value) is dict:  # one error object instead of an array
        value = [value]
    out = []
    for entry in _objects(value, "error"):
        out.append(ProcessingError(_code(entry.get("code")), _text(entry.get("message"), "error[].message")))
    return tuple(out)


def _result(data: Any, _: Any = None, document_id: str | None = None) -> ProcessingResult:
    d = _dict(data, "result")
    raw_status = _str(d.get("status"), "status")
    errors = d.get("error")
    if errors is None:
        errors = d.get("errors")
    body = d.get("data")
    tests_data = fhir_data = pii = None
    if body is not None:
        body = _dict(body, "data")
        fhir_data = body.get("fhir") or None
        if fhir_data is not None and type(fhir_data) is not str and type(fhir_data) is not dict:
            raise _Invalid("data.fhir")
        output = body.get("output")
        if output is not None:
            output = _dict(output, "data.output")
            tests_data = output.get("data")
            if tests_data is not None and type(tests_data) is not list:
                raise _Invalid("data.output.data")
            pii = output.get("pii")
        if pii is None:
            pii = body.get("pii")  # the brief's (and some producers') placement, beside output
        if pii is not None and type(pii) is not dict:
            raise _Invalid("data.output.pii")
    return ProcessingResult(
        document_id=document_id,
        status=ProcessingStatus.from_wire(raw_status),
        raw_status=raw_status,
        errors=_errors(errors),
        tests_data=tests_data,
        fhir_data=fhir_data,
        pii=pii,
    )


def structure_result(data: Any, document_id: str | None = None) -> ProcessingResult:
    """Parse a result body; ``document_id`` (from the request) is kept on the result."""
    try:
        return _result(data, None, document_id)
    except Exception as exc:
        raise _validation_error("ProcessingResult", exc) from exc


def structure_tests(data: Any) -> tuple[ExtractedTest, ...]:
    """Parse ``data.output.data`` (called on first access of :attr:`ProcessingResult.tests`)."""
    try:
        return tuple(map(_test, _list_of_tests(data)))
    except Exception as exc:
        raise _validation_error("ExtractedTest", exc) from exc


def _list_of_tests(data: Any) -> list[Any]:
    if type(data) is not list:
        raise _Invalid("data.output.data")
    return data


def decode_fhir(data: Any) -> dict[str, Any]:
    """``data.fhir``: base64 (standard or URL-safe, padding optional) of a JSON object; an object is taken as is.

    Raises :class:`ResponseValidationError` (naming the field, never the content) when it is neither.
    """
    if type(data) is dict:
        return data
    if type(data) is not str:
        raise ResponseValidationError("the response does not fit ProcessingResult: field data.fhir has the wrong shape")
    text = data.strip()
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_" if "-" in text or "_" in text else None)
        bundle = _json.loads(raw)
    except (binascii.Error, ValueError):
        raise ResponseValidationError(
            "the response does not fit ProcessingResult: field data.fhir is not base64 of JSON"
        ) from None
    if type(bundle) is not dict:
        raise ResponseValidationError(
            "the response does not fit ProcessingResult: field data.fhir is not a JSON object"
        )
    return bundle


# ----------------------------------------------------------------------------- plain data (CLI, logs)


def _unstructure_result(result: ProcessingResult) -> dict[str, Any]:
    # Personal data (pii, the FHIR bundle) is left out; ask for it explicitly (result.pii, result.fhir).
    return {
        "document_id": result.document_id,
        "status": result.status.name,
        "raw_status": result.raw_status,
        "errors": [{"code": e.code, "message": e.message} for e in result.errors],
        "tests": [_unstructure_test(t) for t in result.tests],
    }


def _plain_range(r: ReferenceRange | None) -> dict[str, float | None] | None:
    return None if r is None else {"low": r.low, "high": r.high}


def _unstructure_test(t: ExtractedTest) -> dict[str, Any]:
    return {
        "name": t.name,
        "value": t.value,
        "unit": t.unit,
        "unit_processed": t.unit_processed,
        "unit_eka_id": t.unit_eka_id,
        "display_range": t.display_range,
        "range_report": _plain_range(t.range_report),
        "range_eka": _plain_range(t.range_eka),
        "normalised_value": t.normalised_value,
        "normalised_unit": t.normalised_unit,
        "normalised_unit_eka_id": t.normalised_unit_eka_id,
        "normalised_range_report": _plain_range(t.normalised_range_report),
        "normalised_range_eka": _plain_range(t.normalised_range_eka),
        "confidence": t.confidence,
        "test_eka_id": t.test_eka_id,
        "loinc_id": t.loinc_id,
    }


_STRUCTURE: Final = (
    (ProcessingResult, _result),
    (ExtractedTest, _test),
    (ProcessingError, lambda d, _=None: _errors([d])[0]),
    (ReferenceRange, lambda d, _=None: _range(d) or ReferenceRange()),
)
for _cls, _hook in _STRUCTURE:
    converter.register_structure_hook(_cls, _hook)
converter.register_unstructure_hook(ProcessingResult, _unstructure_result)
converter.register_unstructure_hook(ExtractedTest, _unstructure_test)
converter.register_unstructure_hook(ProcessingStatus, lambda s: s.name)
