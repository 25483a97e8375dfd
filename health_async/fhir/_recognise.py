"""Which record type a document is, and which version of the guide it names: one answer for :func:`validate`,
:func:`read` and the push guard (``record_type_of``).

The record type is the first found of:

1. a ``meta.profile`` of the (first) Composition, then of the Bundle, whose last path segment, without a
   ``|version``, is a :class:`RecordType` value (any letter case): ``.../StructureDefinition/OPConsultRecord`` or
   ``.../OPConsultRecord|6.5.0``;
2. the Composition's ``type.coding`` code (system SNOMED CT, or none) the guide's profiles name: the fixed code of
   each profile, and for DiagnosticReportRecord (which fixes none) the SNOMED CT concepts its ``Composition.type``
   value set lists (``_ig.TYPE_CODES``, generated from the guide's packages);
3. the fixed ``type.text`` of a profile that fixes no code (WellnessRecord "Wellness Record", InvoiceRecord
   "Invoice Record"), compared with letter case and runs of spaces folded; judgement call: the Composition's
   ``title`` is taken the same way (as :func:`read` always did: producers write the text there).

The version is the ``|version`` of the profile URL that gave the record type (``None`` without one, or when the
record type came from the type code or text).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Final

from ._types import RecordType

__all__ = ["recognise", "record_type_of"]

_BY_NAME: Final[Mapping[str, RecordType]] = {member.value.casefold(): member for member in RecordType}


@functools.cache
def _tables() -> tuple[dict[str, RecordType], dict[str, RecordType]]:
    from . import _ig  # the generated tables: loaded with the first recognition, not at import

    return (
        {code: RecordType(name) for code, name in _ig.TYPE_CODES.items()},
        {text: RecordType(name) for text, name in _ig.TYPE_TEXTS.items()},
    )


def recognise(bundle: Any) -> tuple[RecordType | None, str | None]:
    """``(record type, version named by its profile)`` of a decoded Bundle (any JSON value: ``(None, None)`` for
    what is not an object). Tolerant as :func:`read` is: a lone object where a list is expected counts as a list of
    one, a number where a code is expected as its text, and a Composition given alone as its own document."""
    if not isinstance(bundle, Mapping):
        return None, None
    composition: Mapping[str, Any] = bundle if bundle.get("resourceType") == "Composition" else {}
    if not composition:
        for entry in _objects(bundle.get("entry")):
            resource = entry.get("resource")
            if isinstance(resource, Mapping) and resource.get("resourceType") == "Composition":
                composition = resource
                break
    for holder in (composition, bundle):
        meta = holder.get("meta")
        profiles = meta.get("profile") if isinstance(meta, Mapping) else None
        for profile in profiles if isinstance(profiles, list) else [profiles]:
            if not isinstance(profile, str):
                continue
            url, bar, version = profile.partition("|")
            member = _BY_NAME.get(url.strip().rstrip("/").rsplit("/", 1)[-1].casefold())
            if member is not None:
                return member, (version.strip() or None) if bar else None
    codes, texts = _tables()
    concept = composition.get("type")
    concept = concept if isinstance(concept, Mapping) else {}
    for coding in _objects(concept.get("coding")):
        system, code = coding.get("system"), _text(coding.get("code"))
        if code in codes and (system is None or "snomed" in str(system).lower()):
            return codes[code], None
    for text in (concept.get("text"), composition.get("title")):
        if isinstance(text, str):
            member = texts.get(" ".join(text.split()).casefold())
            if member is not None:
                return member, None
    return None, None


def _objects(value: Any) -> list[Mapping[str, Any]]:
    if isinstance(value, Mapping):
        return [value]
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return ""


def record_type_of(bundle: Mapping[str, Any]) -> RecordType | None:
    """The record type a bundle declares (see the module's docstring), without reading the rest; ``None`` when it
    declares none this version knows."""
    return recognise(bundle)[0]
