#!/usr/bin/env python3
"""Generate ``health_async/fhir/_r4.py``: the FHIR R4 structure tables the validator uses.

Input: HL7's FHIR R4 (4.0.1) StructureDefinitions, as published with the specification
(https://hl7.org/fhir/R4/definitions.json.zip): ``profiles-types.json`` (every data type) and one
``<resource>.profile.json`` per resource type (the same definitions ``profiles-resources.json`` bundles).
A public copy of the published R4 site, with those files at its root, is the repository
``fhir-ru/fhir-ru.github.io`` (commit 73deef6284d1692879ccfbac8390a4e965e6d215; every file used says
``"fhirVersion" : "4.0.1"``; its ``profiles-resources.json`` is too large for the mirror, hence the
per-resource files). The inputs are not kept in this repository.

Re-run (standard library only; writes the file and prints its size)::

    python tools/fhir_r4_structure.py --git-dir /work/.mirror/fhir-ru+fhir-ru.github.io/repo
    python tools/fhir_r4_structure.py --dir DIR   # DIR holds profiles-types.json and <resource>.profile.json

then ``ruff format health_async/fhir/_r4.py``. What it keeps, per resource type, data type and backbone
element (``Bundle.entry``): each JSON property -> (type, min, repeats, choice group); the required
elements and choice groups; per primitive type, its JSON kind and HL7's regex; per Reference element, the resource
types its ``targetProfile`` allows (left out where any resource is allowed); and every R4 resource type, from
``codesystem-resource-types.json`` (R4's ``http://hl7.org/fhir/resource-types``, the abstract Resource and
DomainResource left out).

One correction to the snapshots: R4's StructureDefinitions type ``Resource.id`` as ``System.String`` with
fhir-type ``string`` (an artefact of how R4 represents the types of ``id`` elements); R4 itself says a resource's
``id`` is of type ``id`` (``resource.html``; ``fhir.schema.json`` of the same commit: ``"$ref": "#/definitions/id"``),
so a resource's top-level ``id`` is typed ``id`` here. ``Element.id`` stays ``string`` (R4 says so too).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
from typing import Any

#: The resource types the seven NRCeS document profiles use (issue 37).
RESOURCES = (
    "Bundle Composition Patient Practitioner Organization Encounter Condition AllergyIntolerance Observation "
    "DiagnosticReport MedicationRequest MedicationStatement Medication Procedure Immunization "
    "ImmunizationRecommendation DocumentReference Binary ServiceRequest CarePlan Appointment FamilyMemberHistory "
    "Specimen"
).split()

_SYSTEM_KIND = {
    "http://hl7.org/fhirpath/System.Boolean": "boolean",
    "http://hl7.org/fhirpath/System.Integer": "integer",
    "http://hl7.org/fhirpath/System.Decimal": "number",
}
_FHIR_TYPE = "http://hl7.org/fhir/StructureDefinition/structuredefinition-fhir-type"
_REGEX = "http://hl7.org/fhir/StructureDefinition/regex"
_OUT = pathlib.Path(__file__).resolve().parents[1] / "health_async" / "fhir" / "_r4.py"


def _reader(args: argparse.Namespace) -> Any:
    def read(name: str) -> Any:
        if args.git_dir:
            out = subprocess.run(
                ["git", f"--git-dir={args.git_dir}", "show", f"{args.rev}:{name}"], capture_output=True, check=True
            ).stdout
            return json.loads(out)
        return json.loads((pathlib.Path(args.dir) / name).read_text(encoding="utf-8"))

    return read


def _type_code(t: dict[str, Any]) -> str:
    code: str = t["code"]
    if code.startswith("http://hl7.org/fhirpath/System."):
        for ext in t.get("extension", ()):
            if ext["url"] == _FHIR_TYPE:
                return str(ext["valueUrl"])
        return "string"
    return code


_PROFILE = "http://hl7.org/fhir/StructureDefinition/"


def _targets(e: dict[str, Any], leaf: str) -> dict[str, tuple[str, ...]]:
    """JSON name -> the resource types R4's ``targetProfile`` allows, for each Reference type of element ``e``."""
    out: dict[str, tuple[str, ...]] = {}
    for t in e["type"]:
        if t["code"] != "Reference":
            continue
        allowed = tuple(p[len(_PROFILE) :] for p in t.get("targetProfile", ()))
        if not allowed or "Resource" in allowed:
            continue  # any resource
        assert all(p.startswith(_PROFILE) for p in t["targetProfile"]), e["path"]
        out[leaf[:-3] + "Reference" if leaf.endswith("[x]") else leaf] = allowed
    return out


def _table(
    sd: dict[str, Any],
    name: str,
    types: dict[str, Any],
    wanted: set[str],
    targets: dict[str, dict[str, tuple[str, ...]]],
) -> None:
    """Add the elements of one StructureDefinition's snapshot to ``types`` (its backbones as ``Path.x``) and its
    Reference elements' allowed target types to ``targets``."""
    base = sd["type"]
    elements = sd["snapshot"]["element"]
    paths_with_children = {e["path"].rsplit(".", 1)[0] for e in elements if "." in e["path"]}
    types.setdefault(name, {})
    for e in elements:
        if ":" in e["id"] or "." not in e["path"]:
            continue
        parent, leaf = e["path"].rsplit(".", 1)
        owner = name + parent[len(base) :]
        table = types.setdefault(owner, {})
        many = e["max"] != "1"
        minimum = int(e["min"])
        if "contentReference" in e:
            ref = e["contentReference"].lstrip("#")
            table[leaf] = ((name + ref[len(base) :],), minimum, many)
            continue
        codes = [_type_code(t) for t in e["type"]]
        if sd["kind"] == "resource" and e["path"] == f"{base}.id":
            codes = ["id"]  # see the module docstring: R4 says a resource's id is of type id
        found = _targets(e, leaf)
        if found:
            targets.setdefault(owner, {}).update(found)
        if e["path"] in paths_with_children and codes in (["BackboneElement"], ["Element"]):
            codes = [name + e["path"][len(base) :]]
        else:
            wanted.update(codes)
        table[leaf] = (tuple(codes), minimum, many)


def generate(read: Any) -> str:
    types: dict[str, dict[str, tuple[tuple[str, ...], int, bool]]] = {}
    wanted: set[str] = {"Element"}  # the type of a primitive's extension in JSON (``_birthDate``)
    targets: dict[str, dict[str, tuple[str, ...]]] = {}
    for resource in RESOURCES:
        sd = read(f"{resource.lower()}.profile.json")
        assert sd["fhirVersion"] == "4.0.1", resource
        _table(sd, resource, types, wanted, targets)
    codes = read("codesystem-resource-types.json")
    assert codes["version"] == "4.0.1" and codes["url"] == "http://hl7.org/fhir/resource-types"
    abstract = {n for n in ("Resource", "DomainResource") if read(f"{n.lower()}.profile.json")["abstract"]}
    all_resources = sorted(c["code"] for c in codes["concept"] if c["code"] not in abstract)
    assert set(RESOURCES) <= set(all_resources)
    by_id = {e["resource"]["id"]: e["resource"] for e in read("profiles-types.json")["entry"]}
    primitives: dict[str, tuple[str, str | None]] = {}
    done: set[str] = set()
    while wanted - done:
        name = sorted(wanted - done)[0]
        done.add(name)
        sd = by_id.get(name)
        if sd is None:  # a resource (Resource in Bundle.entry.resource, contained) or an abstract base
            continue
        if sd["kind"] == "primitive-type":
            value = next(e for e in sd["snapshot"]["element"] if e["path"].endswith(".value"))
            t = value["type"][0]
            regex = next((x["valueString"] for x in t.get("extension", ()) if x["url"] == _REGEX), None)
            kind = _SYSTEM_KIND.get(t["code"], "string")
            # R4 types positiveInt's and unsignedInt's value as System.String; their base (integer) says the JSON kind
            if sd.get("baseDefinition", "").endswith("/integer"):
                kind = "integer"
            primitives[name] = (kind, regex)
        else:
            _table(sd, name, types, wanted, targets)
    lines = [
        '"""FHIR R4 (4.0.1) structure tables. GENERATED: do not edit by hand.',
        "",
        "Generated by ``python tools/fhir_r4_structure.py --git-dir <mirror of fhir-ru/fhir-ru.github.io>`` from HL7's",
        "published R4 StructureDefinitions (``profiles-types.json`` and ``<resource>.profile.json``; source and",
        "commit in the script's docstring).",
        "",
        "``ELEMENTS[type][json name] = (types, min, repeats, choice group)``: a choice ``value[x]`` is one entry per",
        "allowed type (``valueQuantity``, ...) with group ``value``; a backbone element's type is its path",
        "(``Bundle.entry``). ``REQUIRED[type]``: names (or choice groups) with min >= 1. ``PRIMITIVES[type] =",
        "(JSON kind, HL7 regex)``. ``RESOURCES``: the resource types described here; ``ALL_RESOURCES``: every R4",
        "resource type. ``TARGETS[type][json name]``: the resource types a Reference element may point at (R4's",
        "``targetProfile``; an element absent here may point at any resource).",
        '"""',
        "",
        "from typing import Final",
        "",
        "# ruff: noqa: E501",
        "# fmt: off",
        f"RESOURCES: Final = frozenset({sorted(RESOURCES)!r})",
        f"ALL_RESOURCES: Final = frozenset({all_resources!r})",
        "",
        "PRIMITIVES: Final[dict[str, tuple[str, str | None]]] = {",
    ]
    for name in sorted(primitives):
        lines.append(f"    {name!r}: {primitives[name]!r},")
    lines += ["}", "", "ELEMENTS: Final[dict[str, dict[str, tuple[tuple[str, ...], int, bool, str]]]] = {"]
    required: dict[str, list[str]] = {}
    for owner in sorted(types):
        lines.append(f"    {owner!r}: {{")
        for leaf, (codes, minimum, many) in types[owner].items():
            if leaf.endswith("[x]"):
                group = leaf[:-3]
                for code in codes:
                    lines.append(
                        f"        {group + code[0].upper() + code[1:]!r}: (({code!r},), {minimum}, {many}, {group!r}),"
                    )
            else:
                group = ""
                lines.append(f"        {leaf!r}: ({codes!r}, {minimum}, {many}, ''),")
            if minimum:
                required.setdefault(owner, []).append(group or leaf)
        lines.append("    },")
    lines += ["}", "", "REQUIRED: Final[dict[str, tuple[str, ...]]] = {"]
    for owner in sorted(required):
        lines.append(f"    {owner!r}: {tuple(required[owner])!r},")
    lines += ["}", "", "TARGETS: Final[dict[str, dict[str, tuple[str, ...]]]] = {"]
    for owner in sorted(targets):
        lines.append(f"    {owner!r}: {{")
        for leaf in sorted(targets[owner]):
            lines.append(f"        {leaf!r}: {targets[owner][leaf]!r},")
        lines.append("    },")
    lines += ["}", "# fmt: on", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--git-dir", help="a git directory holding the published R4 files at its root")
    src.add_argument("--dir", help="a directory holding profiles-types.json and <resource>.profile.json")
    parser.add_argument("--rev", default="73deef6284d1692879ccfbac8390a4e965e6d215", help="commit (with --git-dir)")
    parser.add_argument("--out", default=str(_OUT))
    args = parser.parse_args(argv)
    text = generate(_reader(args))
    pathlib.Path(args.out).write_text(text, encoding="utf-8")
    sys.stderr.write(f"wrote {args.out}: {len(text)} characters\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
