"""``validate(bundle)``: an ABDM document Bundle checked offline against FHIR R4 and the NRCeS guide.

Three layers of checks, each problem naming its rule:

* ``structure.*``: FHIR R4 structure of every resource (tables generated from HL7's definitions, ``_r4.py``):
  resource types (one R4 does not have is an error; an R4 type without a table here, a warning), unknown
  elements, cardinality, required elements, choice types, JSON value types, primitive formats (R4's regexes, plus
  what they leave out: calendar days of ``date``/``dateTime``/``instant``, base64's padding, the 32-bit ranges of
  ``integer``/``positiveInt``/``unsignedInt``, a finite ``decimal``; a resource's ``id`` is an R4 ``id``) and
  reference targets (``structure.reference-target``: R4's ``targetProfile`` of each Reference element, checked
  where the reference resolves exactly to an entry (``fullUrl`` or ``Type/id``) or a contained resource; an
  external or unresolved reference is not checked).
* ``r4.*``: R4's invariants, named by their key: ``ele-1`` (no empty object, array or string; an element with
  nothing but an ``id`` is empty), ``bdl-1``, ``bdl-2``, ``bdl-3``, ``bdl-4``, ``bdl-5``, ``bdl-7``, ``bdl-8``,
  ``bdl-9``, ``bdl-10``, ``bdl-11``, ``bdl-12`` (Bundle), ``dom-2``, ``dom-3``, ``dom-4``, ``dom-5`` (contained
  resources) and ``ref-1`` (a local ``#id`` reference names a contained resource). Not checked: ``dom-6`` (a
  narrative: R4's own severity is a warning, a best practice, and neither the builders nor ABDM make one; every
  resource would warn), ``ext-1``, ``ele``/``dom`` rules beyond these, and every other FHIRPath invariant of the
  resources and data types (``obs-6``, ``per-1``, ``qty-3``, ...).
* ``document.*``: FHIR's document rules beyond R4's invariants (Bundle type ``document``, every entry a
  ``fullUrl``, unique even across versions, every reference resolved inside the bundle, the Composition's subject
  a Patient of the bundle).
* ``profile.*``: the NRCeS guide's profile rules, generated from the guide's own packages (``_ig.py``, interpreted
  by ``_profiles.py``): cardinality, fixed values, slices, reference targets and bindings of the record profile and
  of every profile its references reach, in the guide's version the document names (or is recognised as).

Messages carry paths, rules and expected types, never a value of the bundle (health data).
"""

from __future__ import annotations

import calendar
import functools
import json
import math
import re
from collections.abc import Iterator
from typing import Any, Final, Literal

import attrs

from .._json import loads as fast_loads
from . import _profiles
from ._read import is_blank, without_bom
from ._recognise import recognise
from ._types import RecordType

__all__ = ["Problem", "ValidationReport", "validate"]

Severity = Literal["error", "warning"]


@attrs.frozen
class Problem:
    """One finding: ``severity`` (``"error"`` or ``"warning"``), ``path`` (FHIRPath-like, e.g.
    ``Bundle.entry[2].resource.subject``), ``rule`` (e.g. ``structure.required``, ``document.reference-resolved``,
    ``profile.target``), ``message`` (what is expected; never a value of the bundle) and, for a rule of the guide's
    profiles, ``source``: the profile, its version and the element the rule comes from
    (``StructureDefinition-OPConsultRecord|6.5.0#Composition.section:FollowUp.entry``; ``""`` for other rules)."""

    severity: Severity
    path: str
    rule: str
    message: str
    source: str = ""


@attrs.frozen
class ValidationReport:
    """What :func:`validate` found: ``ok`` when no problem is an error; ``record_type`` when the document says
    which of the eight profiles it is (found as :func:`~health_async.fhir.read` finds it); ``problems`` in the order
    found; ``ig_version``: the version of the NRCeS guide whose profile rules were applied (``"6.5.0"`` or
    ``"2.0.1"``; how it is chosen: :func:`validate`), ``None`` when none were (no record type, or no Composition)."""

    record_type: RecordType | None
    problems: tuple[Problem, ...]
    ig_version: str | None = None

    @property
    def ok(self) -> bool:
        """True when there is no error (warnings allowed)."""
        return not any(p.severity == "error" for p in self.problems)

    @property
    def errors(self) -> tuple[Problem, ...]:
        """The problems of severity ``error``."""
        return tuple(p for p in self.problems if p.severity == "error")

    @property
    def warnings(self) -> tuple[Problem, ...]:
        """The problems of severity ``warning``."""
        return tuple(p for p in self.problems if p.severity == "warning")


class _Tables:
    """The R4 structure tables as the walk reads them, worked out once, at the first :func:`validate` (not when the
    package is imported: ``import health_async`` imports this module, and most processes never validate)."""

    __slots__ = ("all_resources", "elements", "fast", "groups", "primitives", "regex", "required", "resources")

    def __init__(self) -> None:
        from . import _r4  # the generated tables: loaded with the first validation

        self.elements = _r4.ELEMENTS
        self.primitives = _r4.PRIMITIVES
        self.required = _r4.REQUIRED
        self.resources = _r4.RESOURCES
        self.all_resources = _r4.ALL_RESOURCES
        regex = {name: re.compile(rx) for name, (kind, rx) in self.primitives.items() if rx and kind == "string"}
        #: HL7's R4 regex for base64Binary backtracks badly on a large attachment: ``_base64_problem`` checks the
        #: same thing (and RFC 4648's padding, which the regex leaves out) in linear time.
        del regex["base64Binary"]
        self.regex = regex
        self.groups = {
            owner: {
                group: tuple(n for n, spec in table.items() if spec[3] == group)
                for group in {s[3] for s in table.values()}
            }
            for owner, table in self.elements.items()
        }
        #: Each element of each type as the walk needs it, worked out once: (first type, its primitive JSON kind or
        #: None, repeats, choice group, the resource types a Reference may point at: ``()`` for any, ``None`` for
        #: no Reference, how its value is checked (``_COMPLEX``, ``_RESOURCE``, ``_MATCH``: a non-empty string
        #: R4's regex takes is valid, no more to check; ``_DATE``: the same when its day is at most 28, so surely in
        #: its month; ``_BOOLEAN``: a JSON boolean; otherwise, and for what fails these quick checks,
        #: ``_primitive_problem``, which names the problem), that regex or None).
        self.fast = {
            owner: {name: self._spec(owner, name, spec, _r4.TARGETS) for name, spec in table.items()}
            for owner, table in self.elements.items()
        }

    def _spec(self, owner: str, name: str, spec: Any, targets: Any) -> _Spec:
        child = spec[0][0]
        kind = self.primitives[child][0] if child in self.primitives else None
        rx = self.regex.get(child)
        if kind is None:
            mode = _RESOURCE if child == "Resource" else _COMPLEX
        elif kind == "string" and rx is not None:
            mode = _DATE if child in _DATES else _MATCH
        elif kind == "boolean":
            mode = _BOOLEAN
        else:
            mode = _FULL
        allowed = frozenset(targets.get(owner, {}).get(name, ())) if child == "Reference" else None
        return (child, kind, spec[2], spec[3], allowed, mode, rx)


#: How the walk checks an element's value (``_Tables.fast``).
_COMPLEX: Final = 0
_RESOURCE: Final = 1
_MATCH: Final = 2
_DATE: Final = 3
_BOOLEAN: Final = 4
_FULL: Final = 5

_Spec = tuple[str, str | None, bool, str, frozenset[str] | None, int, re.Pattern[str] | None]

#: A path as the walk carries it: the root's text, then ``(parent, name)`` or ``(parent, index)`` pairs; spelt out
#: (``Bundle.entry[0].resource.subject``) only for a problem (``_render``).
Path = str | tuple[Any, str | int]


def _render(path: Path) -> str:
    if type(path) is str:
        return path
    parts: list[str] = []
    while type(path) is tuple:
        path, segment = path
        parts.append(f"[{segment}]" if type(segment) is int else f".{segment}")
    parts.append(str(path))
    return "".join(reversed(parts))


@functools.cache
def _tables() -> _Tables:
    return _Tables()


class _Walk:
    """One validation run: the problems found and the references seen (for the document rules): each as (path of
    the Reference, its ``reference``, the resource types it may point at, empty for any).

    Paths are carried lazily (``Path``) and spelt out only for a problem: most values have none."""

    __slots__ = ("problems", "references", "t")

    def __init__(self) -> None:
        self.t = _tables()
        self.problems: list[Problem] = []
        self.references: list[tuple[Path, str, frozenset[str]]] = []

    def error(self, path: Path, rule: str, message: str) -> None:
        self.problems.append(Problem("error", _render(path), rule, message))

    def warning(self, path: Path, rule: str, message: str) -> None:
        self.problems.append(Problem("warning", _render(path), rule, message))

    def resource(self, obj: Any, path: Path) -> None:
        if not isinstance(obj, dict):
            self.error(path, "structure.type", "expected a resource (a JSON object)")
            return
        kind = obj.get("resourceType")
        if not isinstance(kind, str):
            self.error(path, "structure.resource-type", "a resource needs resourceType")
            return
        if kind not in self.t.resources:
            if kind in self.t.all_resources:
                self.warning(
                    path, "structure.unchecked-type", f"resource type {kind} is not described here; not checked"
                )
            else:
                self.error(path, "structure.unknown-resource-type", "not a resource type of FHIR R4")
            for where in _non_finite(obj, _render(path)):  # not a number in any type: an error where nothing is checked
                self.error(where, "structure.format", _NOT_FINITE)
            return
        first = len(self.references)
        self.complex(obj, kind, path)
        if _is_contained(path):
            return  # its local references are its container's (R4's %rootResource), checked there
        contained = obj.get("contained")
        if type(contained) is list and contained:
            self.contained(obj, contained, path, first)
        elif first < len(self.references):
            for at, ref, _ in self.references[first:]:
                if ref[:1] == "#" and ref != "#":
                    self.error((at, "reference"), "r4.ref-1", "a local reference names a contained resource")

    def contained(self, obj: dict[str, Any], contained: list[Any], path: Path, first: int) -> None:
        """R4's rules of contained resources (``dom-2``..``dom-5``) and local references (``ref-1``); their
        structure was walked with the resource's."""
        local: dict[str, str] = {}
        text = _render(path)
        for j, res in enumerate(contained):
            if type(res) is not dict:
                continue
            where = f"{text}.contained[{j}]"
            if "contained" in res:
                self.error(f"{where}.contained", "r4.dom-2", "a contained resource contains no resources")
            meta = res.get("meta")
            if type(meta) is dict:
                if "versionId" in meta or "lastUpdated" in meta:
                    self.error(
                        f"{where}.meta", "r4.dom-4", "a contained resource has no meta.versionId or meta.lastUpdated"
                    )
                if "security" in meta:
                    self.error(f"{where}.meta.security", "r4.dom-5", "a contained resource has no security label")
            rid = res.get("id")
            if isinstance(rid, str) and isinstance(res.get("resourceType"), str):
                local["#" + rid] = res["resourceType"]
        for at, ref, allowed in self.references[first:]:
            if ref[:1] != "#" or ref == "#":
                continue
            if ref not in local:
                self.error((at, "reference"), "r4.ref-1", "a local reference names a contained resource")
            elif allowed and local[ref] not in allowed:
                self.error(at, "structure.reference-target", _target_message(local[ref], allowed))
        pointed = set(_local_pointers(obj))
        for j, res in enumerate(contained):
            if type(res) is not dict:
                continue
            rid = res.get("id")
            if not (isinstance(rid, str) and "#" + rid in pointed) and "#" not in set(_local_pointers(res)):
                self.error(
                    f"{text}.contained[{j}]",
                    "r4.dom-3",
                    "a contained resource is referred to from elsewhere in the resource, or refers to it ('#')",
                )

    def complex(self, obj: dict[str, Any], type_name: str, path: Path) -> None:
        """The elements of ``obj``, of R4 type ``type_name``: the cheapest checks first, a value's own walk inline
        (no call per primitive that R4's regex takes), a path spelt out only for a problem."""
        t = self.t
        if len(obj) < 2 and (not obj or "id" in obj) and type_name not in t.resources:
            self.error(path, "r4.ele-1", _ELE_1)
        fast = t.fast[type_name]
        groups: set[str] | None = None
        for key, value in obj.items():
            spec = fast.get(key)
            if spec is None:
                self.unknown(key, value, type_name, path)
                continue
            child, kind, many, group, targets, mode, rx = spec
            if group:
                if groups is None:
                    groups = set()
                if group in groups:
                    self.error((path, key), "structure.choice", f"{group}[x] holds more than one type")
                groups.add(group)
            if many:
                if type(value) is not list:
                    self.error((path, key), "structure.cardinality", f"{key} repeats: expected an array")
                    continue
                if not value:
                    self.error((path, key), "r4.ele-1", "an array is not empty: " + _ELE_1)
                    continue
                where = (path, key)
                if mode == _COMPLEX:
                    for i, item in enumerate(value):
                        if type(item) is dict:
                            self.complex(item, child, (where, i))
                            if targets is not None:
                                ref = item.get("reference")
                                if type(ref) is str:
                                    self.references.append(((where, i), ref, targets))
                        else:
                            self.error((where, i), "structure.type", f"expected an object of type {child}")
                elif mode == _MATCH:
                    for i, item in enumerate(value):
                        if type(item) is not str or not item or rx.fullmatch(item) is None:  # type: ignore[union-attr]
                            self.primitive(item, child, kind, (where, i))  # type: ignore[arg-type]
                elif mode == _DATE:
                    for i, item in enumerate(value):
                        if type(item) is not str or rx.fullmatch(item) is None or item[8:10] > "28":  # type: ignore[union-attr]
                            self.primitive(item, child, kind, (where, i))  # type: ignore[arg-type]
                elif mode == _BOOLEAN:
                    for i, item in enumerate(value):
                        if type(item) is not bool:
                            self.primitive(item, child, kind, (where, i))  # type: ignore[arg-type]
                elif mode == _RESOURCE:
                    for i, item in enumerate(value):
                        self.resource(item, (where, i))
                else:
                    for i, item in enumerate(value):
                        self.primitive(item, child, kind, (where, i))  # type: ignore[arg-type]
            elif type(value) is list:
                self.error((path, key), "structure.cardinality", f"{key} is 0..1: expected a single value")
            elif mode == _MATCH:
                if type(value) is not str or not value or rx.fullmatch(value) is None:  # type: ignore[union-attr]
                    self.primitive(value, child, kind, (path, key))  # type: ignore[arg-type]
            elif mode == _COMPLEX:
                if type(value) is dict:
                    self.complex(value, child, (path, key))
                    if targets is not None:
                        ref = value.get("reference")
                        if type(ref) is str:
                            self.references.append(((path, key), ref, targets))
                else:
                    self.error((path, key), "structure.type", f"expected an object of type {child}")
            elif mode == _DATE:
                if type(value) is not str or rx.fullmatch(value) is None or value[8:10] > "28":  # type: ignore[union-attr]
                    self.primitive(value, child, kind, (path, key))  # type: ignore[arg-type]
            elif mode == _BOOLEAN:
                if type(value) is not bool:
                    self.primitive(value, child, kind, (path, key))  # type: ignore[arg-type]
            elif mode == _RESOURCE:
                self.resource(value, (path, key))
            else:
                self.primitive(value, child, kind, (path, key))  # type: ignore[arg-type]
        required = t.required.get(type_name)
        if required:
            self.required(obj, type_name, required, path)

    def unknown(self, key: str, value: Any, type_name: str, path: Path) -> None:
        """A key with no element of its own: ``resourceType``, a primitive's extension (``_birthDate``) or an
        unknown element."""
        t = self.t
        if key == "resourceType" and type_name in t.resources:
            return
        table = t.elements[type_name]
        if key[:1] == "_" and key[1:] in table and table[key[1:]][0][0] in t.primitives:
            self.primitive_extension(value, (path, key), table[key[1:]][2])
            return
        self.error((path, key), "structure.unknown-element", f"not an element of {type_name}")

    def required(self, obj: dict[str, Any], type_name: str, required: tuple[str, ...], path: Path) -> None:
        for name in required:
            if name in obj or f"_{name}" in obj:
                continue
            members = self.t.groups[type_name].get(name)
            if members and any(m in obj for m in members):
                continue
            label = f"{name}[x]" if members else name
            self.error((path, label), "structure.required", f"{type_name}.{label} is required (min 1)")

    def primitive(self, value: Any, type_name: str, kind: str, path: Path) -> None:
        found = _primitive_problem(value, type_name, kind, self.t.regex)
        if found is not None:
            self.error(path, *found)

    def primitive_extension(self, value: Any, path: Path, many: bool) -> None:
        items = value if many and type(value) is list else [value]
        for i, item in enumerate(items):
            if item is None and many:
                continue
            where = (path, i) if many else path
            if type(item) is not dict:
                self.error(where, "structure.type", "expected an object (Element)")
            elif not item or (len(item) == 1 and "id" in item):
                self.error(where, "r4.ele-1", _ELE_1)
            else:
                self.complex(item, "Element", where)


def _is_contained(path: Path) -> bool:
    """Whether a resource's path is a contained resource's (``...contained[j]``)."""
    if isinstance(path, str):
        return path.rpartition(".")[2][:10] == "contained["
    parent, segment = path
    return type(segment) is int and type(parent) is tuple and parent[1] == "contained"


def _primitive_problem(
    value: Any, type_name: str, kind: str, regexes: dict[str, re.Pattern[str]]
) -> tuple[str, str] | None:
    """``(rule, message)`` when ``value`` is not a valid ``type_name`` (of JSON ``kind``), else ``None``."""
    tv = type(value)
    if kind == "string":
        if tv is not str:
            return "structure.type", f"expected a JSON string ({type_name})"
        if not value:
            return "r4.ele-1", "an empty string is no value: " + _ELE_1
        rx = regexes.get(type_name)
        if rx is not None:
            if rx.fullmatch(value) is None:
                return "structure.format", f"not a valid {type_name}"
            if type_name in _DATES and len(value) >= 10 and value[8:10] > "28" and not _calendar_day(value):
                return "structure.format", f"not a valid {type_name}: no such day in the calendar"
        elif type_name == "base64Binary" and not _is_base64(value):
            return "structure.format", _BASE64
    elif kind == "boolean":
        if tv is not bool:
            return "structure.type", "expected a JSON boolean"
    elif kind == "integer":
        if tv is not int:
            return "structure.type", f"expected a JSON integer ({type_name})"
        low = 1 if type_name == "positiveInt" else 0 if type_name == "unsignedInt" else _INT_MIN
        if not low <= value <= _INT_MAX:
            return "structure.format", f"not a valid {type_name}: {_RANGES[type_name]}"
    elif tv is not int and tv is not float:
        return "structure.type", f"expected a JSON number ({type_name})"
    elif tv is float and not math.isfinite(value):
        return "structure.format", f"not a valid {type_name}: {_NOT_FINITE}"
    return None


_ELE_1: Final = "an element has a value or children (R4's ele-1)"
_DATES: Final = frozenset({"date", "dateTime", "instant"})
_INT_MIN: Final = -(2**31)
_INT_MAX: Final = 2**31 - 1
_RANGES: Final = {
    "integer": "a 32-bit integer, -2147483648 to 2147483647",
    "positiveInt": "1 to 2147483647",
    "unsignedInt": "0 to 2147483647",
}
_BASE64: Final = (
    "not a valid base64Binary: base64 (RFC 4648) in groups of four characters, '=' padding only at the end, "
    "whitespace only between groups"
)


def _calendar_day(value: str) -> bool:
    """Whether the day of a ``date``/``dateTime``/``instant`` (already matching R4's regex) is in its month: R4's
    regex allows 2024-02-30 and 2023-02-29, R4's types (XML schema's) do not."""
    year, month, day = int(value[:4]), int(value[5:7]), int(value[8:10])
    return day <= calendar.monthrange(year, month)[1]


def _is_base64(value: str) -> bool:
    """R4's base64Binary, in linear time and without decoding (a 400 kB attachment: about 0.15 ms): R4's regex
    (groups of four base64 characters, whitespace between groups) and RFC 4648's padding (at most two ``=``, at
    the end)."""
    try:
        data = value.encode("ascii")
    except UnicodeEncodeError:
        return False
    rest = data.translate(None, _BASE64_ALPHABET)  # what is not a base64 character
    if rest.strip(b"="):
        if rest.strip(b"= \t\n\r"):
            return False
        runs = data.split()  # R4: whitespace between groups of four, never inside one
        return all(len(run) % 4 == 0 for run in runs) and _is_base64(b"".join(runs).decode("ascii"))
    return 0 < len(data) and len(data) % 4 == 0 and len(rest) <= 2 and data.endswith(rest)


_BASE64_ALPHABET: Final = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _local_pointers(value: Any) -> Iterator[str]:
    """Every string starting with ``#`` inside ``value``: the local references (``reference``, canonical, uri and
    url values) R4's dom-3 looks for."""
    if type(value) is str:
        if value[:1] == "#":
            yield value
    elif type(value) is dict:
        for item in value.values():
            yield from _local_pointers(item)
    elif type(value) is list:
        for item in value:
            yield from _local_pointers(item)


def _target_message(kind: str, allowed: frozenset[str]) -> str:
    return f"points at a {kind}; R4 allows {' or '.join(sorted(allowed))} here"


_NOT_FINITE: Final = "a number is finite (NaN, Infinity and numbers beyond a double's range, such as 1e400, are not)"


def _non_finite(value: Any, path: str) -> Iterator[str]:
    """The paths of every NaN or infinity inside ``value`` (a resource no table describes)."""
    if type(value) is float and not math.isfinite(value):
        yield path
    elif type(value) is dict:
        for key, item in value.items():
            yield from _non_finite(item, f"{path}.{key}")
    elif type(value) is list:
        for i, item in enumerate(value):
            yield from _non_finite(item, f"{path}[{i}]")


def _load(bundle: Any) -> tuple[Any, Problem | None]:
    """The decoded bundle, or the one problem that stops the validation (not JSON, not a Bundle).

    Text is decoded by msgspec (the library's JSON, about twice as fast as :mod:`json` on a large document); what it
    refuses (not JSON, but also ``NaN``, ``1e400`` and lone surrogates, which Python's ``json`` takes and the walk
    then reports) is decoded again by :mod:`json`, as before, and any problem named as before."""
    if isinstance(bundle, (bytes, bytearray, memoryview, str)):
        data = without_bom(bundle)
        if not is_blank(data):
            try:
                bundle = fast_loads(data)
            except ValueError:  # JSONDecodeError: decoded below, as before
                pass
            else:
                return _bundle(bundle)
    if isinstance(bundle, (bytes, bytearray, memoryview)):
        data = without_bom(bundle)
        try:
            bundle = data.decode("utf-8") if isinstance(data, bytes) else data
        except UnicodeDecodeError:
            return None, Problem("error", "Bundle", "json.invalid", "not UTF-8 JSON text")
    elif isinstance(bundle, str):
        bundle = without_bom(bundle)
    if isinstance(bundle, str):
        if is_blank(bundle):
            return None, Problem("error", "Bundle", "json.invalid", "empty: there is no JSON text")
        try:
            bundle = json.loads(bundle)
        except RecursionError:
            return None, Problem("error", "Bundle", "json.invalid", "not JSON text: nested too deeply")
        except ValueError:
            return None, Problem("error", "Bundle", "json.invalid", "not JSON text")
    return _bundle(bundle)


def _bundle(bundle: Any) -> tuple[Any, Problem | None]:
    if not isinstance(bundle, dict):
        return None, Problem("error", "Bundle", "document.bundle", "not a JSON object: expected a Bundle resource")
    if bundle.get("resourceType") != "Bundle":
        return None, Problem("error", "Bundle", "document.bundle", "expected a JSON object with resourceType Bundle")
    return bundle, None


def validate(bundle: dict[str, Any] | str | bytes) -> ValidationReport:
    """Check an ABDM document Bundle offline: FHIR R4 structure, FHIR's document rules and the NRCeS profile of its
    Composition. Accepts the parsed JSON (a dict), JSON text or bytes; never raises on any input (what is not
    JSON is a report with one ``json.invalid`` error, whose message says whether the input is empty, nothing but
    whitespace included, or not JSON; a JSON value that is not an object is one ``document.bundle`` error).

    A leading byte order mark (``b"\\xef\\xbb\\xbf"`` in bytes, ``"\\ufeff"`` in text) is skipped, as
    :func:`~health_async.fhir.read` and ``health-async fhir`` skip it: it is no part of the JSON.

    A FHIR decimal is finite: ``NaN``, ``Infinity`` and a number beyond a double's range (``1e400`` in JSON text,
    which decodes to an infinity) are ``structure.format`` errors at their path, in a dict (``float("nan")``) as
    in JSON text (which Python's ``json`` decodes them from, although they are not JSON). Judgement call: in a
    resource of a type the validator does not check (a warning), such a number is still an error at its path.

    Judgement call: an R4 resource type outside the 23 the seven profiles use (e.g. Media, PractitionerRole) is a
    warning (``structure.unchecked-type``), not an error: FHIR allows it, this validator just has no table for it.
    A resource type R4 does not have (``Observatoin``) is an error (``structure.unknown-resource-type``).
    Judgement call: terminology is not checked (no value set is bound), except the codes the guide fixes.
    """
    try:
        return _validate(bundle)
    except Exception:  # the promise is "never raises": a bug here is a report, not a crash
        return ValidationReport(None, (Problem("error", "Bundle", "internal", "the validator failed on this input"),))


def _validate(raw: Any) -> ValidationReport:
    bundle, problem = _load(raw)
    if problem is not None:
        return ValidationReport(None, (problem,))
    walk = _Walk()
    walk.complex(bundle, "Bundle", "Bundle")
    entries = bundle.get("entry") if type(bundle.get("entry")) is list else []
    resources: list[tuple[int, dict[str, Any]]] = [
        (i, e["resource"]) for i, e in enumerate(entries) if type(e) is dict and type(e.get("resource")) is dict
    ]
    targets, index = _targets(entries)
    _document_rules(bundle, entries, walk, targets)
    record_type, ig_version = _profile_rules(bundle, entries, resources, walk, index)
    return ValidationReport(record_type, tuple(walk.problems), ig_version)


def _targets(entries: list[Any]) -> tuple[dict[str, tuple[int, str]], dict[str, int]]:
    """Every way an entry may be referenced inside the bundle, worked out once for both reference checks: -> (entry
    index, resource type) for R4's (the last entry of a ``fullUrl`` or ``Type/id``, of a resource with a type), and
    -> entry index for the guide's (the first, ``_profiles._index``'s)."""
    out: dict[str, tuple[int, str]] = {}
    index: dict[str, int] = {}
    for i, e in enumerate(entries):
        if type(e) is not dict or type(e.get("resource")) is not dict:
            continue
        res = e["resource"]
        kind = res.get("resourceType")
        url = e.get("fullUrl")
        if isinstance(url, str):
            index.setdefault(url, i)
        if not isinstance(kind, str):
            continue
        if isinstance(url, str):
            out[url] = (i, kind)
        if isinstance(res.get("id"), str):
            name = f"{kind}/{res['id']}"
            out[name] = (i, kind)
            index.setdefault(name, i)
    return out, index


_SEARCH_OR_HISTORY: Final = frozenset({"searchset", "history"})
_WITH_REQUEST: Final = frozenset({"batch", "transaction", "history"})
_WITH_RESPONSE: Final = frozenset({"batch-response", "transaction-response", "history"})


def _document_rules(
    bundle: dict[str, Any], entries: list[Any], walk: _Walk, targets: dict[str, tuple[int, str]]
) -> None:
    """R4's Bundle invariants (``bdl-*``), FHIR's document rules and the references' targets.

    Judgement call: ``validate`` checks a document, so the invariants R4 states for a document (``bdl-9``,
    ``bdl-10``, ``bdl-11``) are checked whatever ``type`` says (a type other than ``document`` is its own error,
    ``document.type``); the others follow the bundle's type as R4 states them.
    """
    kind = bundle.get("type")
    if kind != "document":
        walk.error("Bundle.type", "document.type", "a document Bundle has type 'document'")
    if "total" in bundle and kind not in _SEARCH_OR_HISTORY:
        walk.error("Bundle.total", "r4.bdl-1", "total only when a search or history")
    ident = bundle.get("identifier")
    if type(ident) is not dict or "system" not in ident or "value" not in ident:
        walk.error("Bundle.identifier", "r4.bdl-9", "a document has an identifier with a system and a value")
    if "timestamp" not in bundle:
        walk.error("Bundle.timestamp", "r4.bdl-10", "a document has a timestamp (its date)")
    if not entries:
        walk.error("Bundle.entry", "r4.bdl-11", "a document has a Composition as its first resource")
        return
    first = entries[0].get("resource") if type(entries[0]) is dict else None
    if type(first) is not dict or first.get("resourceType") != "Composition":
        walk.error("Bundle.entry[0].resource", "r4.bdl-11", "a document has a Composition as its first resource")
    if kind == "message" and (type(first) is not dict or first.get("resourceType") != "MessageHeader"):
        walk.error("Bundle.entry[0].resource", "r4.bdl-12", "a message has a MessageHeader as its first resource")
    with_request = kind in _WITH_REQUEST
    with_response = kind in _WITH_RESPONSE
    seen: dict[tuple[str, Any], int] = {}
    urls: dict[str, int] = {}
    for i, e in enumerate(entries):
        if type(e) is not dict:
            continue
        where = f"Bundle.entry[{i}]"
        if "search" in e and kind != "searchset":
            walk.error(f"{where}.search", "r4.bdl-2", "entry.search only when a search")
        if ("request" in e) is not with_request:
            walk.error(
                f"{where}.request",
                "r4.bdl-3",
                "entry.request is mandatory for batch, transaction and history, otherwise prohibited",
            )
        if ("response" in e) is not with_response:
            walk.error(
                f"{where}.response",
                "r4.bdl-4",
                "entry.response is mandatory for batch-response, transaction-response and history, otherwise "
                "prohibited",
            )
        if "resource" not in e and "request" not in e and "response" not in e:
            walk.error(f"{where}.resource", "r4.bdl-5", "an entry has a resource (unless a request or response)")
        url = e.get("fullUrl")
        if not isinstance(url, str):
            walk.error(f"{where}.fullUrl", "document.full-url", "every entry of a document has a fullUrl")
            continue
        if "/_history/" in url:
            walk.error(f"{where}.fullUrl", "r4.bdl-8", "a fullUrl is not a version specific reference")
        res = e.get("resource")
        meta = res.get("meta") if type(res) is dict else None
        version = meta.get("versionId") if type(meta) is dict else None
        key = (url, version if isinstance(version, str) else None)
        if key in seen:
            if kind != "history":
                walk.error(
                    f"{where}.fullUrl",
                    "r4.bdl-7",
                    f"same fullUrl and meta.versionId as Bundle.entry[{seen[key]}]: a fullUrl is unique in a bundle",
                )
        elif url in urls:
            walk.error(
                f"{where}.fullUrl",
                "document.full-url-unique",
                f"same fullUrl as Bundle.entry[{urls[url]}]: a document's references resolve by fullUrl, so even "
                "two versions of a resource make them ambiguous",
            )
        seen.setdefault(key, i)
        urls.setdefault(url, i)
    for path, ref, allowed in walk.references:
        if ref[:1] == "#":
            continue  # a contained resource: checked with its container (r4.ref-1)
        target = targets.get(ref)
        if target is None:
            if ref.startswith(("http:", "https:")) and "/".join(ref.rsplit("/", 2)[-2:]) in targets:
                continue  # resolved leniently (an absolute URL ending in an entry's Type/id): its target not checked
            walk.error((path, "reference"), "document.reference-resolved", "the reference resolves to no entry")
        elif allowed and target[1] not in allowed and target[1] in walk.t.all_resources:
            # (a resource of no R4 type is its own error: its references are not blamed for it)
            walk.error(path, "structure.reference-target", _target_message(target[1], allowed))
    if type(first) is dict and first.get("resourceType") == "Composition":
        subject = first.get("subject")
        subject_ref: Any = subject.get("reference") if type(subject) is dict else None
        ref = subject_ref if isinstance(subject_ref, str) else ""
        if not ref:
            walk.error(
                "Bundle.entry[0].resource.subject",
                "document.subject",
                "the Composition's subject is a reference to the bundle's Patient",
            )
        elif ref in targets and targets[ref][1] != "Patient":
            walk.error(
                "Bundle.entry[0].resource.subject",
                "document.subject",
                f"the Composition's subject is a {targets[ref][1]}, expected the bundle's Patient",
            )


def _profile_rules(
    bundle: dict[str, Any],
    entries: list[Any],
    resources: list[tuple[int, dict[str, Any]]],
    walk: _Walk,
    index: dict[str, int],
) -> tuple[RecordType | None, str | None]:
    """The record type (as ``read`` finds it) and the guide's version whose profile rules were applied to the first
    Composition and every resource its references reach (``_profiles.py``)."""
    record_type, declared = recognise(bundle)
    composition = next((i for i, res in resources if res.get("resourceType") == "Composition"), None)
    if record_type is None or composition is None:
        return record_type, None
    version, found = _profiles.check_document(entries, composition, record_type, declared, index)
    walk.problems.extend(Problem(*f) for f in found)  # type: ignore[arg-type]
    return record_type, version
