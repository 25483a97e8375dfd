"""The registry models read every field the vendor's schemas give, under the vendor's names.

registration.yml carries no example answer for the ``/abdm/nhpr/v1`` operations (their rows in
``tests/test_vendor_examples.py`` parse none), so each operation's 200 schema is filled here with a value of each
property's type, and the answer goes through the parser ``test_vendor_examples.PARSERS`` names for it (the one the
resource uses): nothing is refused, and every property of the ``data`` object lands in a field of the model.
Unwrapped answers (``hpr/aadhaar/mobile/init``'s), and a ``success: false`` envelope, are read as the resource does.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

import health_async as ha
from health_async import errors as E
from health_async.models.registries._answer import unwrap

from ..test_vendor_examples import PARSERS, _load, _resolve

SPEC = _load("registration.yml")
OPERATIONS = [
    (method.upper(), path)
    for path, operations in SPEC["paths"].items()
    if path.startswith("/abdm/nhpr/v1/")
    for method in operations
]


def _sample(schema: Any, name: str = "x") -> Any:
    """A value of the schema's type (every property filled), strings naming their property."""
    schema = _resolve(SPEC, schema)
    kind = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "object" or (isinstance(schema, dict) and "properties" in schema):
        return {key: _sample(sub, key) for key, sub in (schema.get("properties") or {}).items()}
    if kind == "array":
        return [_sample(schema.get("items") or {}, name)]
    if kind == "boolean":
        return True
    if kind == "integer":
        return 7
    return f"{name}-1"  # a string, or untyped (``{}``): text


def _answer(method: str, path: str) -> Any:
    response = SPEC["paths"][path][method.lower()]["responses"]["200"]
    return _sample(response["content"]["application/json"]["schema"])


def _wire_names(model: object) -> set[str]:
    names: set[str] = set()
    for field in attrs.fields(type(model)):  # type: ignore[arg-type]
        declared = field.metadata.get("health_async.wire")
        spelled = getattr(declared, "names", ()) or (field.name,)
        names.update(name.split(".")[0] for name in spelled)
    return names


def test_the_twelve_operations_are_in_the_vendors_file() -> None:
    assert len(OPERATIONS) == 12
    assert set(OPERATIONS) <= {(m, p) for _, m, p in PARSERS}


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_every_field_of_the_schema_is_read(method: str, path: str) -> None:
    answer = _answer(method, path)
    parsed = PARSERS[("registration.yml", method, path)](answer)
    assert parsed is not None
    if not attrs.has(type(parsed)):
        return  # a flag (check/available)
    data = unwrap(answer, "x")
    if isinstance(data, list):  # suggest: {"data": [...]}
        assert isinstance(parsed, ha.models.HprSuggestions) and parsed.hpr_ids == ("data-1",)
        return
    assert set(data) <= _wire_names(parsed), set(data) - _wire_names(parsed)
    for field in attrs.fields(type(parsed)):  # type: ignore[arg-type]
        value = getattr(parsed, field.name)
        assert value is not None and value != (), field.name  # every field found its value


def test_an_answer_that_says_success_false_does_not_fit() -> None:
    with pytest.raises(E.ResponseValidationError):
        unwrap({"data": None, "error": {"message": "no"}, "success": False}, "HPR info")
    assert unwrap({"txn_id": "t"}, "x") == {"txn_id": "t"}  # mobile/init's bare answer
