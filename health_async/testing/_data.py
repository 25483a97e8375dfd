"""Deterministic fake data for the fake server and the benchmarks: documents, profiles, Aadhaar numbers."""

from __future__ import annotations

import random
import uuid
from typing import Any

import attrs

from .. import _json

__all__ = ["FakeData", "make_document", "make_profile"]

_TESTS = [
    ("Haemoglobin", "g/dL", "13.0-17.0", (9.0, 18.0)),
    ("Total WBC Count", "10^3/uL", "4.0-11.0", (2.0, 16.0)),
    ("Platelet Count", "10^3/uL", "150-410", (90.0, 480.0)),
    ("Fasting Blood Glucose", "mg/dL", "70-100", (60.0, 180.0)),
    ("HbA1c", "%", "4.0-5.6", (4.0, 9.5)),
    ("Serum Creatinine", "mg/dL", "0.7-1.3", (0.5, 2.5)),
    ("TSH", "uIU/mL", "0.4-4.0", (0.1, 9.0)),
]
_FLAGS = {
    "normal": "sm-8146614980",
    "high": "sm-1420480405",
    "low": "sm-1220479757",
    "very high": "sm-2631712380",
    "critically high": "sm-4067205096",
}
_VAULT = "https://vault.fake.example"
_FIRST = ["Asha", "Ravi", "Meera", "Arjun", "Kavya", "Vikram", "Priya", "Rahul", "Neha", "Sanjay"]
_LAST = ["Sharma", "Iyer", "Reddy", "Nair", "Patel", "Gupta", "Menon", "Das", "Kulkarni", "Singh"]


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _flag(value: float, low: float, high: float) -> str:
    if value > high * 1.5:
        return "critically high"
    if value > high:
        return "high"
    if value < low:
        return "low"
    return "normal"


def make_document(rng: random.Random, document_id: str, *, date: int) -> dict[str, Any]:
    """A document description like the live service's: files, tags, a smart report of 5-7 items; 2-4 KB as JSON.

    Half use the live spellings (``eka_id``, ``unit_eka_id``; one in five ``dt``), one spelling per document as
    a producer sends, and all carry keys outside the interface.
    """
    live = rng.random() < 0.5
    items = []
    for index, (name, unit, ref, (lo, hi)) in enumerate(rng.sample(_TESTS, rng.randint(5, 7))):
        low, high = (float(x) for x in ref.split("-"))
        value = round(rng.uniform(lo, hi), 1)
        flag = _flag(value, low, high)
        item: dict[str, Any] = {
            "name": name,
            "value": str(value),
            "unit": unit,
            "range": ref,
            "result": flag.title(),
            "result_id": _FLAGS[flag],
            "display_result": flag.title(),
            "id": index,
            "vital_id": f"lb-{rng.randint(1000, 9999)}",
            "page_num": 1,
            "file_index": 0,
            "coordinates": [{"x": round(rng.random(), 3), "y": round(rng.random(), 3)} for _ in range(4)],
            "is_result_editable": True,
            "date": date,
        }
        item["eka_id" if live else "svc_id"] = f"el-{rng.randint(10**6, 10**7)}"
        item["unit_eka_id" if live else "unit_svc_id"] = f"un-{rng.randint(100, 999)}"
        items.append(item)
    split = rng.randint(0, len(items))
    return {
        "document_id": document_id,
        "source": rng.choice(["androidp", "iosp", "web"]),
        "document_date_epoch": date,
        ("dt" if rng.random() < 0.2 else "document_type"): "lr",
        "tags": sorted(rng.sample(["covid", "lab", "annual", "diabetes", "thyroid"], 2)),
        "user_tags": [],
        "thumbnail": f"{_VAULT}/{document_id}/thumb.jpeg",
        "files": [
            {
                "asset_url": f"https://vault.fake.example/{document_id}/page-1.jpeg",
                "file_type": "IMG",
                "masked_file": None,
            },
            {"asset_url": f"https://vault.fake.example/{document_id}/report.pdf", "file_type": "PDF"},
        ],
        "smart_report": {"verified": items[:split], "unverified": items[split:]},
    }


def make_profile(rng: random.Random, oid: str) -> dict[str, Any]:
    """An EMR user profile with fake personal data (wire names)."""
    first, last = rng.choice(_FIRST), rng.choice(_LAST)
    return {
        "oid": oid,
        "bid": str(rng.randint(10**13, 10**14 - 1)),
        "ps": "S",
        "c_ate": 1_700_000_000 + rng.randint(0, 10**7),
        "u_ate": 1_710_000_000 + rng.randint(0, 10**7),
        "gen": rng.choice(["M", "F", "O"]),
        "dob": f"{rng.randint(1950, 2010)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        "is_age": rng.random() < 0.2,
        "fn": first,
        "ln": last,
        "fln": f"{first} {last}",
        "bg": rng.choice(["A+", "B+", "O+", "AB+", "O-"]),
        "mobile": f"+91{rng.randint(6 * 10**9, 10**10 - 1)}",
        "email": f"{first.lower()}.{last.lower()}@example.com",
        "s": rng.choice(["Mr.", "Ms.", "Dr."]),
    }


def _d5(j: int, k: int) -> int:
    """The product ``j * k`` in the dihedral group D5 (0-4 rotations, 5-9 reflections), as Verhoeff numbers it."""
    if j < 5:
        return (j + k) % 5 + (5 if k >= 5 else 0)
    return (j - k) % 5 + (0 if k >= 5 else 5)


#: Verhoeff's permutation, applied ``i`` times to the ``i``-th digit from the right.
_SIGMA = (1, 5, 7, 6, 2, 8, 3, 0, 9, 4)


def _permute(times: int, digit: int) -> int:
    for _ in range(times % 8):
        digit = _SIGMA[digit]
    return digit


def verhoeff_digit(digits: str) -> str:
    """The Verhoeff check digit to append to ``digits`` (service-facts.md: an Aadhaar number's last digit is one).

    The fake's own copy, written from the algorithm (it does not use the client's validation).
    """
    c = 0
    for i, ch in enumerate(reversed(digits)):
        c = _d5(c, _permute(i + 1, int(ch)))
    inverse = (5 - c) % 5 if c < 5 else c
    return str(inverse)


def _aadhaar(rng: random.Random) -> str:
    body = str(rng.randint(2, 9)) + "".join(str(rng.randint(0, 9)) for _ in range(10))
    return body + verhoeff_digit(body)


@attrs.define
class FakeData:
    """The seeded state of a :class:`FakeHealthServer`; deterministic for a given seed."""

    #: OIDs of the seeded users.
    user_ids: list[str]
    #: user OID -> document id -> the JSON body of its description (pre-serialised: describe is fast).
    documents: dict[str, dict[str, bytes]]
    #: user OID -> list-item dicts (the ``record.item`` of ``GET /mr/api/v1/docs``), oldest upload first.
    list_items: dict[str, list[dict[str, Any]]]
    #: OID -> the profile body.
    profiles: dict[str, bytes]
    #: Aadhaar numbers for which aadhaar init succeeds.
    valid_aadhaar: list[str]
    #: Aadhaar numbers (valid by the digit rules) that the upstream refuses: number -> (status, error body).
    failing_aadhaar: dict[str, tuple[int, dict[str, Any]]]

    @classmethod
    def generate(cls, *, seed: int = 0, users: int = 3, documents_per_user: int = 50) -> FakeData:
        """Seed users, their documents and profiles, and Aadhaar numbers that succeed and that fail."""
        rng = random.Random(seed)
        user_ids = [str(rng.randint(10**14, 10**15 - 1)) for _ in range(users)]
        documents: dict[str, dict[str, bytes]] = {}
        list_items: dict[str, list[dict[str, Any]]] = {}
        for user in user_ids:
            docs: dict[str, bytes] = {}
            items: list[dict[str, Any]] = []
            for n in range(documents_per_user):
                document_id = _uuid(rng)
                date = 1_690_000_000 + n * 3600
                doc = make_document(rng, document_id, date=date)
                docs[document_id] = _json.dumps(doc)
                items.append(
                    {
                        "document_id": document_id,
                        "upload_date": date + 60,
                        "document_type": "lr",
                        "patient_id": user,
                        "metadata": {
                            "title": "Lab report",
                            "tags": doc["tags"],
                            "auto_tags": ["TYPE_TAG_SMART"],
                            "document_date": date,
                            "thumbnail": doc["thumbnail"],
                        },
                    }
                )
            documents[user] = docs
            list_items[user] = items
        profiles = {user: _json.dumps(make_profile(rng, user)) for user in user_ids}
        valid = [_aadhaar(rng) for _ in range(5)]
        failing = {
            _aadhaar(rng): (500, _abha_error(500, "Too many requests", "ABDM-1022", "Too many requests, try later")),
            _aadhaar(rng): (
                500,
                _abha_error(500, "OTP limit exceeded", "ABDM-1100", "You have requested multiple OTPs. Retry later"),
            ),
            _aadhaar(rng): (
                400,
                _abha_error(400, "Invalid Aadhaar number", "ABDM-1006", "Aadhaar number is not valid"),
            ),
        }
        return cls(user_ids, documents, list_items, profiles, valid, failing)

    def document_ids(self, user_id: str) -> list[str]:
        """The ids of a user's documents, in seeding order."""
        return list(self.documents.get(user_id, {}))


def _abha_error(code: int, error: str, source_code: str, message: str) -> dict[str, Any]:
    return {"code": code, "error": error, "source_error": {"code": source_code, "message": message}}
