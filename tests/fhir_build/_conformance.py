"""What the builders do not yet write that the guide's profile rules require (issue 43).

``validate`` now checks the NRCeS guide's profile rules generated from the guide's own packages (6.5.0 and 2.0.1);
the documents the builders make miss these (each required by both versions unless said), so the tests asserting
that a built document validates are expected to fail, strictly, until the builders write them (then the strict
marker fails the run: remove it):

- ``Patient.identifier.type`` (1..1 per identifier);
- ``Reference.type`` on the entries of the single-section profiles (Prescription, DiagnosticReport, Immunization
  records: their entries are sliced by ``type``, closed);
- the displays the profiles fix for section codes (``Composition.section:PhysicalExamination.code.coding.display``
  is "Physical exam section");
- DiagnosticReportLab/Imaging: ``category.coding.system`` fixed to SNOMED CT, ``conclusion`` 1..1,
  ``code.coding.display`` (and, in 2.0.1's Imaging, ``media``);
- ``display`` of the LOINC coding of an Observation's code, and of a ServiceRequest's code.
"""

from __future__ import annotations

import pytest

BUILDERS_NOT_YET_CONFORMANT = pytest.mark.xfail(
    strict=True,
    reason="issue 43: built documents miss what the guide's generated profile rules require (tests/fhir_build/"
    "_conformance.py lists it); remove this marker once the builders write it",
)
