"""Parsing hooks of the case models and of the presigned batch answer, registered on the one converter of
:mod:`health_async._convert`.

Same rules as there: unknown keys are ignored, a missing optional field is ``None``, anything that does not fit
raises :class:`~health_async.errors.ResponseValidationError` naming the model and the field, never the value (a
presigned form's URL and fields are credentials; a case's name is health data).

Importing this module registers the hooks; :mod:`health_async.resources.cases` and
:mod:`health_async.resources._presigned` import it.
"""

from __future__ import annotations

from typing import Any

from ._convert import _dict, _int, _Invalid, _list, _str, _validation_error, converter
from .models._records import Case, CasePage, PresignedEntry, PresignedForm

__all__ = ["structure_presigned"]


def _case(data: Any, _: Any = None) -> Case:
    d = _dict(data, "cases[]")
    get = d.get
    case_id = _str(get("id"), "id")
    if not case_id:
        raise _Invalid("id")
    item = get("item")
    item = {} if item is None else _dict(item, "item")
    meta = item.get("partner_meta")
    return Case(
        case_id=case_id,
        status=_str(get("status"), "status"),
        updated_at=_int(get("updated_at"), "updated_at"),
        display_name=_str(item.get("display_name"), "display_name"),
        case_type=_str(item.get("type"), "type"),
        hi_type=_str(item.get("hi_type"), "hi_type"),
        partner_meta=None if meta is None else dict(_dict(meta, "partner_meta")),
        created_at=_int(item.get("created_at"), "created_at"),
        occurred_at=_int(item.get("occurred_at"), "occurred_at"),
    )


def _case_page(data: Any, _: Any = None) -> CasePage:
    d = _dict(data, "case list")
    return CasePage(
        items=tuple(map(_case, _list(d.get("cases"), "cases"))),
        next_token=_str(d.get("next_token"), "next_token") or None,
    )


def _form(data: Any) -> PresignedForm:
    d = _dict(data, "forms[]")
    url = d.get("url")
    if type(url) is not str or not url.startswith(("https://", "http://")):
        raise _Invalid("forms[].url")
    fields = d.get("fields")
    fields = {} if fields is None else _dict(fields, "forms[].fields")
    if not all(type(v) is str for v in fields.values()):
        raise _Invalid("forms[].fields")
    return PresignedForm(url=url, fields=dict(fields))


def _entry(data: Any, _: Any = None) -> PresignedEntry:
    d = _dict(data, "batch_response[]")
    details = d.get("error_details")
    code = message = None
    if details is not None:
        details = _dict(details, "error_details")
        code = _str(details.get("code"), "error_details.code")
        message = _str(details.get("message"), "error_details.message")
        if code is None and message is None:
            code = "UNKNOWN"  # an error_details object without detail is still a refusal
    return PresignedEntry(
        document_id=_str(d.get("document_id"), "document_id") or None,
        forms=tuple(map(_form, _list(d.get("forms"), "forms"))),
        error_code=code,
        error_message=message,
    )


def structure_presigned(data: Any) -> tuple[PresignedEntry, ...]:
    """The entries of a presigned batch answer (``{"batch_response": [...]}``), in request order."""
    try:
        return tuple(map(_entry, _list(_dict(data, "body").get("batch_response"), "batch_response")))
    except Exception as exc:
        raise _validation_error("UploadResponse", exc) from exc


for _cls, _hook in ((Case, _case), (CasePage, _case_page), (PresignedEntry, _entry)):
    converter.register_structure_hook(_cls, _hook)
