"""Every example answer in the vendor's OpenAPI files goes through the model of its operation.

The files rarely give a whole answer; mostly each property of a 2XX response schema carries its own ``example``.
:func:`example_answers` builds whole answers from those (``$ref`` resolved, ``allOf`` merged, one answer per
``oneOf``/``anyOf`` branch, a schema- or content-level example taken as it is), and :data:`PARSERS` says how the
client reads each operation's answer (the same entry points its resources use). A new operation the client calls
without a row here fails :func:`test_every_operation_the_client_calls_has_a_row`.
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest
import yaml

import health_async as ha
from health_async import _routes
from health_async._auth import _token_fields
from health_async._wire import structure, structure_many
from health_async.models.abdm._consents import parse_pin_exists
from health_async.models.abha._registration import parse_exists, parse_suggestions
from health_async.models.patients._patients import structure_patients
from health_async.models.records._cases import PresignedBatch
from health_async.models.records._documents import decode_document, structure_document
from health_async.models.registries._answer import unwrap
from health_async.models.registries._hpr import parse_hpr_available, parse_hpr_suggestions
from health_async.resources.abdm._discover import _providers_of

#: Copies of the vendor's OpenAPI files (shared/spec/vendor), kept in the repository so that CI runs this test
#: on a clean clone rather than skipping it; refresh them with the vendor's when those change.
VENDOR = Path(__file__).resolve().parent / "data" / "vendor"
FILES = ("records.yaml", "patient_directory.yml", "registration.yml", "authorization.yml")


def _document(data: Any) -> object:
    tolerant = structure_document(data)
    fast = decode_document(orjson.dumps(data))
    assert fast is None or fast == tolerant  # the fast path, when it takes the body, agrees with the tolerant one
    return tolerant


def _result(data: Any) -> object:
    result = structure(data, ha.ProcessingResult, document_id="d")
    _ = result.tests  # parsed on first access
    return result


def _model(cls: type) -> Callable[[Any], object]:
    return lambda data: structure(data, cls)


def _not_read(_: Any) -> object:
    return None


def _registry(cls: type) -> Callable[[Any], object]:
    """A registry answer (``{data, error, success}``, or bare as ``hpr/aadhaar/mobile/init``'s), read as
    ``client.hpr`` / ``client.hfr`` read it."""
    return lambda data: structure(unwrap(data, cls.__name__), cls)


#: (file, METHOD, path) -> how the client reads that answer. ``_not_read``: the client does not read the body of
#: that answer (a PATCH or DELETE acknowledged by its status).
PARSERS: dict[tuple[str, str, str], Callable[[Any], object]] = {
    ("records.yaml", "GET", "/mr/api/v1/docs"): _model(ha.DocumentPage),
    ("records.yaml", "POST", "/mr/api/v1/docs"): _model(PresignedBatch),
    ("records.yaml", "GET", "/mr/api/v1/docs/{id}"): _document,
    ("records.yaml", "PATCH", "/mr/api/v1/docs/{id}"): _not_read,
    ("records.yaml", "DELETE", "/mr/api/v1/docs/{id}"): _not_read,
    ("records.yaml", "POST", "/mr/api/v2/docs"): _model(ha.UploadResult),
    ("records.yaml", "GET", "/mr/api/v1/docs/{document_id}/result"): _result,
    ("records.yaml", "GET", "/mr/api/v1/cases"): _model(ha.CasePage),
    ("records.yaml", "POST", "/mr/api/v1/cases"): lambda data: data.get("id") if isinstance(data, dict) else None,
    ("records.yaml", "PATCH", "/mr/api/v1/cases/{id}"): _not_read,
    ("records.yaml", "DELETE", "/mr/api/v1/cases/{id}"): _not_read,
    ("patient_directory.yml", "POST", "/profiles/v1/patient/"): _model(ha.PatientCreated),
    ("patient_directory.yml", "GET", "/profiles/v1/patient/minified/"): _model(ha.PatientPage),
    ("patient_directory.yml", "GET", "/profiles/v1/patient/search"): lambda d: structure_patients(d, "search"),
    ("patient_directory.yml", "GET", "/profiles/v1/patient/{oid}"): _model(ha.Patient),
    ("patient_directory.yml", "PATCH", "/profiles/v1/patient/{oid}"): _not_read,
    ("patient_directory.yml", "DELETE", "/profiles/v1/patient/{oid}"): _not_read,
    ("patient_directory.yml", "GET", "/profiles/v1/patient/by-mobile/"): lambda d: structure_patients(d, "by-mobile"),
    ("patient_directory.yml", "GET", "/profiles/v1/patient/{username}/username/?flatten=true"): (
        lambda d: structure_patients(d, "by-username")
    ),
    ("patient_directory.yml", "GET", "/profiles/v1/emr-user/{oid}"): _model(ha.Profile),
    ("registration.yml", "POST", "/abdm/v1/care-contexts/link"): _not_read,
    ("registration.yml", "GET", "/abdm/v1/care-contexts/linked"): lambda d: structure_many(
        d.get("care_contexts") if isinstance(d, dict) else d, ha.models.LinkedCareContext, "care_contexts"
    ),
    ("registration.yml", "POST", "/abdm/v1/care-contexts/sms/notify"): _not_read,
    ("registration.yml", "POST", "/abdm/v1/hip/care-context/data/on-fetch"): _not_read,
    ("patient_directory.yml", "PATCH", "/profiles/v1/emr-user/{oid}"): _not_read,
    ("registration.yml", "POST", "/abdm/na/v1/registration/aadhaar/init"): _model(ha.AadhaarInit),
    ("registration.yml", "POST", "/abdm/na/v1/registration/aadhaar/resend"): _model(ha.OtpSent),
    ("registration.yml", "POST", "/abdm/na/v1/registration/aadhaar/verify"): _model(ha.AbhaStep),
    ("registration.yml", "POST", "/abdm/na/v1/registration/aadhaar/mobile/verify"): _model(ha.AbhaStep),
    ("registration.yml", "POST", "/abdm/na/v1/registration/aadhaar/mobile/resend"): _model(ha.OtpSent),
    ("registration.yml", "POST", "/abdm/na/v1/registration/aadhaar/create-phr"): _model(ha.AbhaStep),
    ("registration.yml", "POST", "/abdm/na/v1/registration/aadhaar/auto-login"): _model(ha.AbhaStep),
    ("registration.yml", "POST", "/abdm/na/v1/registration/mobile/init"): _model(ha.OtpSent),
    ("registration.yml", "POST", "/abdm/na/v1/registration/mobile/resend"): _model(ha.OtpSent),
    ("registration.yml", "POST", "/abdm/na/v1/registration/mobile/verify"): _model(ha.AbhaStep),
    ("registration.yml", "POST", "/abdm/na/v1/registration/mobile/create-phr"): _model(ha.AbhaStep),
    ("registration.yml", "POST", "/abdm/na/v1/registration/phr/check"): parse_exists,
    ("registration.yml", "GET", "/abdm/na/v1/registration/suggest"): parse_suggestions,
    ("registration.yml", "POST", "/abdm/na/v1/profile/login/methods"): _model(ha.LoginMethods),
    ("registration.yml", "POST", "/abdm/na/v1/profile/login/init"): _model(ha.OtpSent),
    ("registration.yml", "POST", "/abdm/na/v1/profile/login/verify"): _model(ha.AbhaStep),
    ("registration.yml", "POST", "/abdm/na/v1/profile/login/phr"): _model(ha.AbhaStep),
    ("registration.yml", "GET", "/abdm/v1/profile"): _model(ha.models.AbhaProfile),
    ("registration.yml", "PATCH", "/abdm/v1/profile"): _not_read,
    ("registration.yml", "DELETE", "/abdm/v1/profile"): _not_read,
    ("registration.yml", "GET", "/abdm/v1/profile/asset/card"): _not_read,  # streamed to a file, not parsed
    ("registration.yml", "GET", "/abdm/v1/profile/asset/qr"): _not_read,  # streamed to a file, not parsed
    ("registration.yml", "POST", "/abdm/v1/profile/search"): _model(ha.models.AbhaSearchResult),
    ("registration.yml", "GET", "/abdm/v1/registration/pincode/{pincode}"): _model(ha.models.PincodeDetails),
    ("registration.yml", "POST", "/abdm/v1/profile/kyc/init"): _model(ha.OtpSent),
    ("registration.yml", "POST", "/abdm/v1/profile/kyc/resend"): _model(ha.OtpSent),
    ("registration.yml", "POST", "/abdm/v1/profile/kyc/verify"): _model(ha.models.KycResult),
    ("registration.yml", "POST", "/abdm/v1/session/init"): _model(ha.OtpSent),
    ("registration.yml", "POST", "/abdm/v1/session/verify"): _model(ha.models.AbhaSessionToken),
    ("registration.yml", "GET", "/abdm/v1/session/status"): _model(ha.models.SessionStatus),
    ("registration.yml", "POST", "/abdm/v2/profile/share"): _model(ha.models.ShareToken),
    ("registration.yml", "GET", "/abdm/v2/profile/share/{request_id}"): _model(ha.models.ShareToken),
    ("registration.yml", "POST", "/abdm/v1/hip/patient/profile/on-share"): _not_read,
    ("registration.yml", "POST", "/abdm/v1/care-contexts/on-discover"): _not_read,  # 204
    ("registration.yml", "POST", "/abdm/v1/care-contexts/discover/link/on-init"): _not_read,  # 204
    ("registration.yml", "POST", "/abdm/v1/care-contexts/discover/link/on-confirm"): _not_read,  # 204
    ("registration.yml", "POST", "/abdm/v1/hip/onboard"): _model(ha.models.FacilityOnboarded),
    ("registration.yml", "GET", "/abdm/v1/care-contexts/providers"): lambda data: structure_many(
        data.get("providers") or [], ha.models.CareContextProvider, "providers"
    ),
    ("registration.yml", "GET", "/abdm/v1/providers"): _providers_of,
    ("registration.yml", "GET", "/abdm/v1/provider/{hip_id}"): _model(ha.models.Provider),
    ("registration.yml", "POST", "/abdm/v1/care-contexts/discover"): _model(ha.models.Discovery),
    ("registration.yml", "POST", "/abdm/v1/care-contexts/discover/link/init"): _model(ha.models.LinkOtpSent),
    ("registration.yml", "POST", "/abdm/v1/care-contexts/discover/link/confirm"): _model(ha.models.LinkConfirmed),
    ("registration.yml", "GET", "/abdm/v1/requests"): _model(ha.models.PatientRequests),
    ("registration.yml", "GET", "/abdm/v1/request"): _model(ha.models.RequestDetails),
    ("registration.yml", "PATCH", "/abdm/v1/hiu/keyset"): _not_read,
    ("registration.yml", "POST", "/abdm/v1/hiu/care-context/data/on-push"): _not_read,
    ("registration.yml", "POST", "/abdm/v1/consents/create"): _model(ha.models.ConsentCreated),
    ("registration.yml", "POST", "/abdm/v1/consents/list"): lambda d: structure_many(
        d.get("consents") if isinstance(d, dict) else d, ha.models.Consent, "consents"
    ),
    ("registration.yml", "POST", "/abdm/v1/consents/details"): lambda d: structure(
        d, ha.models.ConsentDetails, consent_id="c"
    ),
    ("registration.yml", "POST", "/abdm/v1/consents/approve"): _not_read,
    ("registration.yml", "POST", "/abdm/v1/consents/deny"): _not_read,
    ("registration.yml", "POST", "/abdm/v1/consents/revoke"): _not_read,
    ("registration.yml", "GET", "/abdm/v1/consents/auto-approval"): _model(ha.models.AutoApprovalPolicy),
    ("registration.yml", "PATCH", "/abdm/v1/consents/auto-approval"): _model(ha.models.AutoApprovalPolicy),
    ("registration.yml", "GET", "/abdm/v1/consents/pin/exists"): parse_pin_exists,
    ("registration.yml", "POST", "/abdm/v1/consents/pin/set"): _not_read,
    ("registration.yml", "POST", "/abdm/v1/consents/pin/verify"): _not_read,
    ("registration.yml", "POST", "/abdm/v1/consents/pin/change"): _not_read,
    ("registration.yml", "POST", "/abdm/v1/consents/pin/forgot/init"): _model(ha.models.PinOtpSent),
    ("registration.yml", "POST", "/abdm/v1/consents/pin/forgot/verify"): _not_read,
    ("registration.yml", "POST", "/abdm/v1/consents/pin/reset"): _not_read,
    ("registration.yml", "POST", "/abdm/nhpr/v1/hpr/aadhaar/init"): _registry(ha.models.HprOtpSent),
    ("registration.yml", "POST", "/abdm/nhpr/v1/hpr/aadhaar/verify"): _registry(ha.models.HprStep),
    ("registration.yml", "POST", "/abdm/nhpr/v1/hpr/aadhaar/demo/verify"): _registry(ha.models.HprMobileCheck),
    ("registration.yml", "POST", "/abdm/nhpr/v1/hpr/aadhaar/mobile/init"): _registry(ha.models.HprOtpSent),
    ("registration.yml", "POST", "/abdm/nhpr/v1/hpr/aadhaar/mobile/verify"): _registry(ha.models.HprStep),
    ("registration.yml", "POST", "/abdm/nhpr/v1/hpr/aadhaar/check/exist"): _registry(ha.models.HprProfile),
    ("registration.yml", "POST", "/abdm/nhpr/v1/hpr/aadhaar/check/available"): parse_hpr_available,
    ("registration.yml", "POST", "/abdm/nhpr/v1/hpr/aadhaar/suggest"): parse_hpr_suggestions,
    ("registration.yml", "POST", "/abdm/nhpr/v1/hpr/aadhaar/create"): _registry(ha.models.HprAccount),
    ("registration.yml", "GET", "/abdm/nhpr/v1/hfr/search/{hfrId}"): _registry(ha.models.Facility),
    ("registration.yml", "POST", "/abdm/nhpr/v1/hfr/onboard"): _registry(ha.models.HfrOnboarded),
    ("registration.yml", "POST", "/abdm/nhpr/v1/hfr/link"): _registry(ha.models.HfrLinked),
    ("authorization.yml", "POST", "/connect-auth/v1/account/login"): lambda d: _token_fields(d, "login"),
    ("authorization.yml", "POST", "/connect-auth/v1/account/refresh-token"): lambda d: _token_fields(d, "refresh"),
}


# ----------------------------------------------------------------------------------- example answers


def _load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((VENDOR / name).read_text(encoding="utf-8"))
    return loaded


def _resolve(spec: dict[str, Any], schema: Any, seen: frozenset[str] = frozenset()) -> Any:
    while isinstance(schema, dict) and "$ref" in schema:
        ref = schema["$ref"]
        if ref in seen:  # a schema that contains itself: stop there
            return {}
        seen = seen | {ref}
        node: Any = spec
        for part in ref.lstrip("#/").split("/"):
            node = node[part]
        schema = node
    return schema


def _examples(spec: dict[str, Any], schema: Any, seen: frozenset[str] = frozenset()) -> list[Any]:
    """Example values of ``schema``: its own example(s) when it has them, else built from its parts; ``[]`` when
    nothing in it carries an example."""
    if isinstance(schema, dict) and "$ref" in schema:
        ref = schema["$ref"]
        if ref in seen:
            return []
        return _examples(spec, _resolve(spec, schema), seen | {ref})
    if not isinstance(schema, dict):
        return []
    if "example" in schema:
        return [schema["example"]]
    if isinstance(schema.get("examples"), list) and schema["examples"]:
        return list(schema["examples"])
    for key in ("oneOf", "anyOf"):
        if isinstance(schema.get(key), list):
            return [value for branch in schema[key] for value in _examples(spec, branch, seen)]
    if isinstance(schema.get("allOf"), list):
        merged: list[Any] = [{}]
        for part in schema["allOf"]:
            values = _examples(spec, part, seen)
            if values:
                merged = [
                    {**m, **v} if isinstance(m, dict) and isinstance(v, dict) else v for m in merged for v in values
                ]
        return [] if merged == [{}] else merged
    properties = schema.get("properties")
    if isinstance(properties, dict):
        per_key = {key: _examples(spec, sub, seen) for key, sub in properties.items()}
        per_key = {key: values for key, values in per_key.items() if values}
        if not per_key:
            return []
        keys = list(per_key)
        # every combination would explode; one answer per position, the first example of the others
        width = max(len(values) for values in per_key.values())
        return [{key: per_key[key][min(i, len(per_key[key]) - 1)] for key in keys} for i in range(width)]
    items = schema.get("items")
    if schema.get("type") == "array" or items is not None:
        return [[value] for value in _examples(spec, items, seen)]
    return []


def example_answers() -> Iterator[tuple[str, str, str, Any]]:
    """``(file, METHOD, path, example answer)`` for every JSON 2XX answer with an example in the vendor's files."""
    for name in FILES:
        spec = _load(name)
        for path, operations in spec.get("paths", {}).items():
            for method, operation in operations.items():
                if not isinstance(operation, dict):
                    continue
                for status, response in (operation.get("responses") or {}).items():
                    if not str(status).startswith("2"):
                        continue
                    content = (_resolve(spec, response) or {}).get("content") or {}
                    media = content.get("application/json")
                    if not isinstance(media, dict):
                        continue
                    given = [media["example"]] if "example" in media else []
                    given += [e.get("value") for e in (media.get("examples") or {}).values() if isinstance(e, dict)]
                    for answer in given or _examples(spec, media.get("schema")):
                        yield name, method.upper(), path, copy.deepcopy(answer)


def _called_routes() -> set[str]:
    """The paths of :mod:`health_async._routes` that some module of the package uses: a path declared ahead of the
    code that calls it (the rooms of a coming issue) needs no row until that code lands."""
    package = Path(ha.__file__).resolve().parent
    sources = "\n".join(path.read_text(encoding="utf-8") for path in package.rglob("*.py") if path.name != "_routes.py")
    return {
        value.rstrip("/")
        for name, value in vars(_routes).items()
        if name.startswith("PATH_") and re.search(rf"\b{name}\b", sources)
    }


CALLED = _called_routes()


def _implemented(path: str) -> bool:
    plain = path.split("?")[0].replace("{document_id}", "{id}").rstrip("/")
    return plain in CALLED


EXAMPLES = [row for row in example_answers() if _implemented(row[2])] if VENDOR.is_dir() else []


def test_every_operation_the_client_calls_has_a_row() -> None:
    calls = set()
    for name in FILES:
        for path, operations in _load(name).get("paths", {}).items():
            for method, operation in operations.items():
                if isinstance(operation, dict) and _implemented(path):
                    if any(str(status).startswith("2") for status in operation.get("responses") or {}):
                        calls.add((name, method.upper(), path))
    assert calls - set(PARSERS) == set()
    assert len(EXAMPLES) >= 25  # the files carry examples for most of them (26 answers when written)


def _wire_values(model: object) -> Iterator[tuple[str, object]]:
    for field in attrs.fields(type(model)):  # type: ignore[arg-type]
        declared = field.metadata.get("health_async.wire")
        names = getattr(declared, "names", ()) or (field.name,)
        if getattr(declared, "local", False) or not field.init:
            continue
        yield names[0], getattr(model, field.name)


@pytest.mark.parametrize(
    ("name", "method", "path", "answer"),
    EXAMPLES,
    ids=[f"{m} {p} #{i}" for i, (_, m, p, _) in enumerate(EXAMPLES)],
)
def test_the_example_answer_fits_its_model(name: str, method: str, path: str, answer: Any) -> None:
    parsed = PARSERS[(name, method, path)](answer)
    if not attrs.has(type(parsed)) or not isinstance(answer, dict):
        return
    # a top-level value the example gives for a field the model reads from that key is the value the model holds
    for wire_name, value in _wire_values(parsed):
        if "." in wire_name or wire_name not in answer:
            continue
        sent = answer[wire_name]
        if isinstance(sent, str) and value is not None and not isinstance(value, str | int | bool):
            continue  # an enum or a date read from its text
        if isinstance(sent, str | int | float | bool) and not isinstance(sent, bool) and isinstance(value, str):
            assert value == str(sent) or value == sent, wire_name
        elif isinstance(sent, bool) and isinstance(value, bool):
            assert value is sent, wire_name


def test_the_examples_cover_each_kind_of_answer() -> None:
    operations = {(m, p) for _, m, p, _ in EXAMPLES}
    assert ("POST", "/abdm/na/v1/registration/aadhaar/verify") in operations
    assert ("GET", "/mr/api/v1/docs/{id}") in operations
    assert ("GET", "/profiles/v1/patient/minified/") in operations
    assert len(set(itertools.chain.from_iterable(operations))) > 10
