"""The fake server's documents (issue 37): its HIP sends the NRCeS guide's own example bundles, one per HI type,
kept with their source in ``health_async/testing/abdm/_documents/`` (copies of ``tests/data/fhir_read/``), not
made with the library's builders; each validates as the record type of its HI type, and the wheel carries them."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from health_async import fhir
from health_async.fhir import RecordType
from health_async.models import HiType
from health_async.testing.abdm import _hiu as fake_hiu
from health_async.testing.abdm._hiu import DOCUMENTS, example_document

ROOT = Path(__file__).resolve().parents[2]
FHIR_READ = ROOT / "tests" / "data" / "fhir_read"
FHIR_650 = ROOT / "tests" / "data" / "fhir" / "examples-6.5.0"  # InvoiceRecord: 3.0.1 has none
PACKAGED = Path(fake_hiu.__file__).parent / "_documents"


def test_the_fake_sends_the_guides_examples_kept_with_their_source() -> None:
    assert set(DOCUMENTS) == {t.value for t in HiType}  # one per HI type
    assert {p.name for p in PACKAGED.glob("*.json")} == set(DOCUMENTS.values())
    for name in DOCUMENTS.values():  # byte for byte the copies whose provenance tests/data/fhir*/README.md gives
        source = FHIR_650 if name == DOCUMENTS["Invoice"] else FHIR_READ
        assert (PACKAGED / name).read_bytes() == (source / name).read_bytes()
    readme = (PACKAGED / "README.md").read_text(encoding="utf-8")
    assert "gauravvaishnav17/ig-test" in readme and "f93a9edefce0f2b38cd6f03bf48147552955e298" in readme
    wheel = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["hatch"]["build"]["targets"]
    assert wheel["wheel"]["packages"] == ["health_async"] and "exclude" not in wheel["wheel"]  # package data goes along
    ignored = (ROOT / ".gitignore").read_text(encoding="utf-8")
    assert "*.json" not in ignored and "_documents" not in ignored  # hatchling leaves out what git ignores


@pytest.mark.parametrize("hi_type", sorted(DOCUMENTS))
def test_each_document_validates_as_the_record_type_of_its_hi_type(hi_type: str) -> None:
    document = example_document(hi_type)
    report = fhir.validate(document)
    assert report.ok, report.errors
    assert report.record_type is RecordType.from_hi_type(hi_type)
    assert example_document(hi_type) is not document  # a fresh dict each call: a test may change its copy


def test_an_unknown_hi_type_has_no_document() -> None:
    with pytest.raises(ValueError, match="hi_type must be one of"):
        example_document("LabReport")
