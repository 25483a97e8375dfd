"""``fhir.read`` and ``fhir.validate`` on untrusted bytes and text (hypothesis): random bytes and text, the guide's
examples cut at a random point, and byte order marks and whitespace put before them. Only the library's own error
(``InvalidRequest``, from ``read``) or a report (from ``validate``) comes out: never msgspec's or json's
``DecodeError``, nor a ``ValueError``, ``KeyError`` or ``TypeError`` of the code, nor a report of the validator's
own failure (``internal``)."""

from __future__ import annotations

import functools
import pathlib

from hypothesis import given, settings
from hypothesis import strategies as st

from health_async import InvalidRequest
from health_async.fhir import FhirRecord, RecordType, ValidationReport, read, validate

EXAMPLES = pathlib.Path(__file__).parents[1] / "data" / "fhir" / "examples"
#: The two smallest examples (130 and 250 kB): a cut example is decoded up to its cut by up to three decoders.
SMALL = {
    RecordType.PRESCRIPTION: "Bundle-Prescription-example-06.json",
    RecordType.DIAGNOSTIC_REPORT: "Bundle-DiagnosticReport-Lab-example-03.json",
}
BOM = b"\xef\xbb\xbf"
FUZZ = settings(max_examples=200, deadline=None)


@functools.cache
def _example(record_type: RecordType) -> bytes:
    return (EXAMPLES / SMALL[record_type]).read_bytes()


def _check(data: str | bytes) -> FhirRecord | None:
    """Both entry points on ``data``: the record (``None`` when ``read`` refused it with the library's error)."""
    report = validate(data)
    assert isinstance(report, ValidationReport)
    assert "internal" not in {p.rule for p in report.problems}
    refused: InvalidRequest | None = None
    try:
        record = read(data)
    except InvalidRequest as error:
        refused = error
    if refused is not None:
        assert refused.__context__ is None  # no JSON library's exception (json's keeps the whole input) rides along
        assert str(refused).startswith(("the FHIR input is empty", "the FHIR input is not JSON"))
        assert not report.ok
        return None
    assert isinstance(record, FhirRecord)
    repr(record)
    return record


@FUZZ
@given(st.one_of(st.binary(max_size=300), st.text(max_size=300)))
def test_random_bytes_and_text(data: str | bytes) -> None:
    _check(data)


@FUZZ
@given(st.sampled_from(list(SMALL)), st.floats(min_value=0, max_value=1), st.booleans(), st.booleans())
def test_an_example_cut_at_a_random_point(record_type: RecordType, where: float, bom: bool, as_text: bool) -> None:
    whole = _example(record_type)
    cut = (BOM if bom else b"") + whole[: int(len(whole) * where)]
    if as_text:
        _check(cut.decode("utf-8", errors="replace"))  # a cut inside a character: U+FFFD
    else:
        _check(cut)


_PREFIX = st.lists(st.sampled_from([BOM, b" ", b"\n", b"\t", b"\r", b"\x0c", b"\xc2\xa0"]), max_size=4).map(b"".join)


@FUZZ
@given(st.sampled_from(list(SMALL)), _PREFIX, st.sampled_from([b"", b" ", b"\n", b"\r\n", b"\x00"]), st.booleans())
def test_boms_and_whitespace_around_an_example(
    record_type: RecordType, prefix: bytes, suffix: bytes, as_text: bool
) -> None:
    """One leading BOM then JSON's whitespace: read and valid, in bytes as in text. Anything else (a second BOM, a
    BOM after whitespace, a form feed, a no-break space, a NUL after the value) is not JSON: refused, not crashed."""
    data = prefix + _example(record_type) + suffix
    record = _check(data.decode("utf-8") if as_text else data)
    rest = prefix.removeprefix(BOM)
    accepted = not rest.strip(b" \t\n\r") and suffix != b"\x00"
    assert (record is not None) is accepted
    if record is not None:
        assert record.record_type is record_type
        assert validate(data).ok
