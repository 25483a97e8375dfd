"""The inputs of the golden bundles: one realistic record per type (made-up people, the guide's example codes)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from health_async import fhir

IST = fhir.INDIA
WHEN = dt.datetime(2024, 7, 10, 15, 44, 1, tzinfo=IST)
PDF = b"%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00\xff\xd9"
PATIENT = fhir.Patient(
    "Asha Sharma",
    gender="female",
    birth_date=dt.date(1985, 3, 14),
    abha_number="91-1111-2222-3333",
    abha_address="asha.sharma@abdm",
    hospital_id="MRN-000123",
    hospital_id_system="https://hospital.example.org/mrn",
    phone="+919800000000",
)
DOCTOR = fhir.Practitioner("Dr. K. Rao", license_number="21-1521-3828-3227")
HOSPITAL = fhir.Organization("UVW Hospital", facility_id="IN2710000001", phone="+91 80 1234 5678")
LAB = fhir.Organization("Fake PathLabs", facility_id="IN2710000002", email="contact@pathlabs.example.org")
WHO: dict[str, Any] = {"patient": PATIENT, "practitioner": DOCTOR, "date": WHEN}


def lab_observations(n: int = 3) -> list[fhir.Observation]:
    base = [
        fhir.Observation(
            "Haemoglobin",
            value=13.2,
            unit="g/dL",
            low=12,
            high=16,
            interpretation="normal",
            code=fhir.Coding.loinc("718-7", "Hemoglobin [Mass/volume] in Blood"),
        ),
        fhir.Observation(
            "Fasting Blood Glucose",
            value=126,
            unit="mg/dL",
            low=70,
            high=100,
            interpretation="high",
            code=fhir.Coding.loinc("1558-6", "Fasting glucose [Mass/volume] in Serum or Plasma"),
        ),
        fhir.Observation("HBsAg", value="Non-reactive", range_text="Non-reactive"),
    ]
    return [base[i % 3] for i in range(n)]


def op_consult(n_extra: int = 0) -> dict[str, Any]:
    return fhir.op_consult(
        care_context_id="OP-2024-0001",
        organization=HOSPITAL,
        **WHO,
        chief_complaints=[
            fhir.Condition(
                "Foot swelling", code=fhir.Coding.snomed("297142003", "Foot swelling"), clinical_status="active"
            )
        ]
        * (1 + n_extra),
        physical_examination=[fhir.Observation("Body weight", value=62.5, unit="kg")],
        allergies=[fhir.Allergy("No known allergy", code=fhir.Coding.snomed("716186003", "No known allergy"))],
        medical_history=[
            fhir.Condition("Diabetes mellitus type 2", onset=dt.date(2019, 1, 1)),
            fhir.Procedure("Appendicectomy", date=dt.date(2010, 5, 12)),
        ],
        family_history=[fhir.FamilyHistory("Father", "Hypertension")],
        investigation_advice=[
            fhir.Investigation("Fasting lipid profile", code=fhir.Coding.snomed("252150008", "Fasting lipid profile"))
        ],
        medications=[
            fhir.Medication("Metformin 500 mg tablet", dosage="1 tablet twice a day after food", reason="Diabetes")
        ],
        medication_history=[
            fhir.MedicationHistory(
                "Telmisartan 20 mg oral tablet",
                code=fhir.Coding.snomed("134463001", "Telmisartan 20 mg oral tablet"),
                status="active",
                dosage="1 tablet daily",
                asserted=dt.date(2024, 7, 1),
            )
        ],
        procedures=[fhir.Procedure("Assessment of diabetic foot ulcer", date=WHEN)],
        follow_up=[fhir.FollowUp(dt.datetime(2024, 7, 24, 10, 0, tzinfo=IST), text="Review with lipid profile")],
        referral=[fhir.Investigation("Referral to podiatry")],
        documents=[fhir.Document(PDF, title="Consultation note")],
        encounter=fhir.Encounter(kind="ambulatory", start=WHEN, end=WHEN + dt.timedelta(minutes=20)),
    )


def prescription() -> dict[str, Any]:
    return fhir.prescription(
        care_context_id="RX-2024-0001",
        organization=HOSPITAL,
        **WHO,
        medications=[
            fhir.Medication("Metformin 500 mg tablet", dosage="1 tablet twice a day"),
            fhir.Medication(
                "Telmisartan 20 mg oral tablet",
                code=fhir.Coding.snomed("134463001", "Telmisartan 20 mg oral tablet"),
                dosage="1 tablet daily",
            ),
        ],
        prescription_file=fhir.Document(PDF),
    )


def lab_report(n: int = 3) -> dict[str, Any]:
    return fhir.lab_report(
        care_context_id="LAB-2024-0001",
        organization=LAB,
        **WHO,
        observations=lab_observations(n),
        report_pdf=PDF,
        conclusion="Raised fasting glucose",
        specimen=fhir.Specimen(
            "Serum specimen",
            code=fhir.Coding.snomed("119364003", "Serum specimen"),
            collected=dt.datetime(2024, 7, 10, 8, 30, tzinfo=IST),
            received=dt.datetime(2024, 7, 10, 9, 15, tzinfo=IST),
        ),
        code=fhir.Coding.loinc("24323-8", "Comprehensive metabolic 2000 panel"),
    )


def imaging_report() -> dict[str, Any]:
    return fhir.imaging_report(
        care_context_id="IMG-2024-0001",
        organization=HOSPITAL,
        **WHO,
        text="No active lung lesion. Heart size normal.",
        file=fhir.Document(PDF, title="Chest X-ray report"),
        title="Chest X-ray",
        code=fhir.Coding.loinc("36643-5", "XR Chest 2 Views"),
        images=[fhir.Document(JPEG, content_type="image/jpeg", title="Chest X-ray PA view")],
    )


def discharge_summary() -> dict[str, Any]:
    return fhir.discharge_summary(
        care_context_id="IP-2024-0001",
        organization=HOSPITAL,
        **WHO,
        encounter=fhir.Encounter(kind="inpatient", start=dt.date(2024, 7, 5), end=WHEN),
        chief_complaints=[fhir.Condition("Fever for 3 days")],
        physical_examination=[fhir.Observation("Body temperature", value=38.9, unit="Cel")],
        allergies=[fhir.Allergy("Penicillin allergy")],
        medical_history=[fhir.Condition("Hypertension", clinical_status="active")],
        family_history=[fhir.FamilyHistory("Mother", "Diabetes mellitus type 2")],
        investigations=lab_observations(2),
        investigations_conclusion="Raised fasting glucose",
        medications=[fhir.Medication("Paracetamol 650 mg tablet", dosage="1 tablet when needed for fever")],
        procedures=[fhir.Procedure("Blood culture", date=dt.date(2024, 7, 5))],
        care_plan="Oral antibiotics for 5 days; review in a week",
        documents=[fhir.Document(PDF, title="Discharge summary")],
    )


def immunization_record() -> dict[str, Any]:
    return fhir.immunization_record(
        care_context_id="IMM-2024-0001",
        organization=HOSPITAL,
        **WHO,
        immunizations=[
            fhir.Immunization("Hepatitis B vaccine", date=dt.date(2024, 6, 10), dose_number=1, lot_number="HB-231"),
            fhir.Immunization(
                "Hepatitis B vaccine",
                date=dt.date(2024, 7, 10),
                dose_number=2,
                code=fhir.Coding.snomed("871822003", "Hepatitis B vaccine"),
            ),
        ],
        recommendations=[
            fhir.VaccineDue(
                "Hepatitis B vaccine",
                due=dt.date(2025, 1, 10),
                dose_number=3,
                code=fhir.Coding.snomed("871822003", "Hepatitis B vaccine"),
            )
        ],
        documents=[fhir.Document(PDF, title="Vaccination certificate")],
    )


def wellness_record() -> dict[str, Any]:
    return fhir.wellness_record(
        care_context_id="WEL-2024-0001",
        organization=HOSPITAL,
        **WHO,
        vital_signs=[
            fhir.Observation("Heart rate", value=72, unit="/min", code=fhir.Coding.loinc("8867-4", "Heart rate")),
            fhir.Observation.blood_pressure(120, 80, interpretation="N"),
        ],
        body_measurements=[
            fhir.Observation("Body height", value=162, unit="cm"),
            fhir.Observation("Body weight", value=58.4, unit="kg"),
        ],
        physical_activity=[fhir.Observation("Steps", value=8042, unit="steps")],
        general_assessment=[fhir.Observation("Fluid intake", value=2.5, unit="L")],
        women_health=[fhir.Observation("Last menstrual period", value="2024-06-28")],
        lifestyle=[fhir.Observation("Diet type", value="Vegetarian")],
        documents=[fhir.Document(PDF, title="Wellness report")],
    )


def health_document() -> dict[str, Any]:
    return fhir.health_document(
        care_context_id="DOC-2024-0001",
        organization=HOSPITAL,
        **WHO,
        documents=fhir.Document(
            PDF, title="Laboratory report", type=fhir.Coding.snomed("4241000179101", "Laboratory report")
        ),
    )


def invoice_record() -> dict[str, Any]:
    return fhir.invoice_record(care_context_id="INV-2024-0001", **invoice_inputs())


def invoice_inputs() -> dict[str, Any]:
    gst = [fhir.PriceComponent("cgst", 6), fhir.PriceComponent("sgst", 6)]
    return dict(
        organization=HOSPITAL,
        **WHO,
        invoice_number="CA/5842",
        invoice_type="pharmacy",
        items=[
            fhir.InvoiceItem(
                "Paracetamol 1 g oral tablet",
                category="medicines",
                code=fhir.Coding.snomed("1172863005", "Paracetamol 1 g oral tablet"),
                quantity=10,
                unit="Tablet",
                prices=[fhir.PriceComponent("mrp", 100), fhir.PriceComponent("rate", 80), *gst],
            ),
            fhir.InvoiceItem(
                "Consultation",
                category="consultation",
                prices=[fhir.PriceComponent("rate", 500), fhir.PriceComponent("discount", 50)],
            ),
        ],
        total_net=542,
        total_gross=530,
    )


RECORDS: dict[str, Callable[[], dict[str, Any]]] = {
    "op_consult": op_consult,
    "prescription": prescription,
    "lab_report": lab_report,
    "imaging_report": imaging_report,
    "discharge_summary": discharge_summary,
    "immunization_record": immunization_record,
    "wellness_record": wellness_record,
    "health_document": health_document,
    "invoice_record": invoice_record,
}
