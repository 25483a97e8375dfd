#!/usr/bin/env python3
"""Generate ``health_async/fhir/_ig.py``: the NRCeS guide's profile rules, read from the guide's own FHIR packages.

Input: one or more extracted ``ndhm.in`` packages ("FHIR Implementation Guide for ABDM", NRCeS, licence CC0-1.0),
each a directory holding ``package.json``, ``StructureDefinition-*.json`` (with snapshots), ``ValueSet-*.json`` and
``CodeSystem-*.json``. The packages are inputs only: they are neither kept in this repository nor read at run time.
Where the packages used come from (``PROVENANCE`` below; another package needs ``--provenance VERSION=TEXT``):

- 6.5.0: repository ``theperiperi/patient-ly-pragyan-hackathon-2026``, commit
  8a3e7e631b775cf59a0d7898fde614b9f0c65e39, path ``abdm-local-dev-kit/fhir-profiles/npm/package/``;
- 2.0.1: repository ``umeshramya/gcp-nrces-fhir``, commit 044c22becf8be30974d27f802a7e75e440777262, path
  ``package/`` (this copy has no PrescriptionRecord: 2.0.1 has no rules of its own for it, see ``_profiles.py``).

Re-run (standard library only; the output is the same for the same packages, whatever their order)::

    python tools/fhir_ig_profiles.py /work/ig/ndhm.in-6.5.0 /work/ig/ndhm.in-2.0.1 -o health_async/fhir/_ig.py

What it keeps, per package version: the eight record profiles (Composition profiles: ``RECORD_PROFILES``) and every
profile of the guide their references reach (``targetProfile``, followed transitively); for each, from its
differential (what the profile constrains): the cardinality of each element that states a ``min`` or ``max``, each
``fixed[x]`` value, the slicings (discriminator paths, closed or open) and each slice's discriminating value(s), the
reference targets (the resource type and the guide's profile of each ``targetProfile``), and the ``required`` and
``extensible`` bindings to the guide's own value sets. The value sets are expanded from the guide's code systems
where they enumerate them (a whole code system included, or a list of its concepts); a value set that includes an
external terminology keeps its system only (a binding to it checks the system, not the code).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import Any

GUIDE = "https://nrces.in/ndhm/fhir/r4/"
PROFILE_BASE = GUIDE + "StructureDefinition/"
HL7_BASE = "http://hl7.org/fhir/StructureDefinition/"
RECORD_PROFILES = (
    "OPConsultRecord",
    "PrescriptionRecord",
    "DiagnosticReportRecord",
    "DischargeSummaryRecord",
    "ImmunizationRecord",
    "WellnessRecord",
    "HealthDocumentRecord",
    "InvoiceRecord",
)
#: Judgement call: the guide's health-claim exchange profiles (its HCX bundles: claims, coverage, tasks,
#: communications) are reachable from the documents' profiles only through a CarePlan activity or a ChargeItem;
#: they are not the documents' content and are not followed.
NOT_FOLLOWED = frozenset(
    "Claim ClaimResponse Coverage CoverageEligibilityRequest CoverageEligibilityResponse InsurancePlan PaymentNotice "
    "PaymentReconciliation Task Communication CommunicationRequest".split()
)
PROVENANCE = {
    "6.5.0": (
        "theperiperi/patient-ly-pragyan-hackathon-2026 commit 8a3e7e631b775cf59a0d7898fde614b9f0c65e39 "
        "path abdm-local-dev-kit/fhir-profiles/npm/package/"
    ),
    "2.0.1": "umeshramya/gcp-nrces-fhir commit 044c22becf8be30974d27f802a7e75e440777262 path package/",
}
_OUT = pathlib.Path(__file__).resolve().parents[1] / "health_async" / "fhir" / "_ig.py"


def _load(directory: pathlib.Path, prefix: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(directory.glob(f"{prefix}-*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        out[data["url"]] = data
    return out


def _max(value: str) -> int:
    return -1 if value == "*" else int(value)


def _target(url: str, sds: dict[str, dict[str, Any]]) -> tuple[str, str]:
    """``(resource type, guide profile name or "")`` of a ``targetProfile``."""
    url = url.split("|", 1)[0]
    if url.startswith(PROFILE_BASE):
        name = url[len(PROFILE_BASE) :]
        sd = sds.get(url)
        return (sd["type"] if sd is not None else "", name)
    if url.startswith(HL7_BASE):
        return (url[len(HL7_BASE) :], "")
    return ("", "")


def _fixed(element: dict[str, Any]) -> tuple[bool, Any]:
    for key, value in element.items():
        if key.startswith("pattern"):
            raise SystemExit(f"{element['id']}: pattern[x] is not supported by this generator (add it first)")
        if key.startswith("fixed"):
            return True, value
    return False, None


def _profile(sd: dict[str, Any], sds: dict[str, dict[str, Any]]) -> tuple[str, tuple[Any, ...], tuple[Any, ...]]:
    """``(resource type, elements, slicings)`` of one StructureDefinition (see ``_ig.py``'s docstring)."""
    snapshot = {e["id"]: e for e in sd["snapshot"]["element"]}
    diff = {e["id"]: e for e in sd["differential"]["element"]}
    elements: list[Any] = []
    slicings: list[Any] = []
    for eid, e in diff.items():
        if "." not in eid:
            continue
        snap = snapshot.get(eid, {})
        card: tuple[int, int] | None = None
        if "min" in e or "max" in e:
            card = (int(e.get("min", snap.get("min", 0))), _max(str(e.get("max", snap.get("max", "*")))))
        has_fixed, fixed = _fixed(e)
        targets = tuple(sorted({_target(url, sds) for t in e.get("type", ()) for url in t.get("targetProfile", ())}))
        binding = None
        b = e.get("binding")
        if b and b.get("strength") in ("required", "extensible") and b.get("valueSet", "").startswith(GUIDE):
            binding = (b["strength"], b["valueSet"].split("|", 1)[0].rsplit("/", 1)[-1])
        if card is not None or has_fixed or targets or binding is not None:
            elements.append((eid, card, (fixed,) if has_fixed else (), targets, binding))
        s = e.get("slicing")
        if s:
            paths = tuple(d["path"] for d in s.get("discriminator", ()) if d["type"] == "value")
            if len(paths) != len(s.get("discriminator", ())):
                raise SystemExit(f"{eid}: only value discriminators are supported by this generator")
            slices = []
            for sid, se in diff.items():
                if sid.startswith(eid + ":") and "." not in sid[len(eid) + 1 :]:
                    slices.append((se["sliceName"], tuple(_slice_value(sid, se, p, diff, snapshot) for p in paths)))
            slicings.append((eid, paths, s.get("rules") == "closed", tuple(slices)))
    return sd["type"], tuple(elements), tuple(slicings)


def _slice_value(
    sid: str, se: dict[str, Any], path: str, diff: dict[str, dict[str, Any]], snapshot: dict[str, dict[str, Any]]
) -> Any:
    """The value a slice is recognised by at discriminator ``path`` (``None`` when the profile fixes none)."""
    if path == "url":  # an extension's slice: its url is the profile of its type
        for t in se.get("type", ()):
            for url in t.get("profile", ()):
                return url
    for table in (diff, snapshot):
        e = table.get(sid if path == "$this" else f"{sid}.{path}")
        if e is not None:
            has_fixed, fixed = _fixed(e)
            if has_fixed:
                return fixed
    return None


def _value_sets(
    vss: dict[str, dict[str, Any]], css: dict[str, dict[str, Any]], wanted: set[str]
) -> dict[str, tuple[Any, ...]]:
    """``name -> (enumerated (system, code) pairs, systems enumerated whole, every system, complete)``."""
    out: dict[str, tuple[Any, ...]] = {}
    by_name = {url.rsplit("/", 1)[-1]: vs for url, vs in vss.items()}
    for name in sorted(wanted):
        vs = by_name.get(name)
        if vs is None:
            continue
        codes: set[tuple[str, str]] = set()
        enumerated: set[str] = set()
        systems: set[str] = set()
        complete = not vs.get("compose", {}).get("exclude")
        for inc in vs.get("compose", {}).get("include", ()):
            system = inc.get("system")
            if system is None or inc.get("valueSet"):
                complete = False
                continue
            systems.add(system)
            if inc.get("filter"):
                complete = False
            elif inc.get("concept"):
                codes.update((system, c["code"]) for c in inc["concept"])
                if system.startswith(GUIDE):
                    enumerated.add(system)
            elif system in css and css[system].get("content") == "complete":
                codes.update((system, code) for code in _concepts(css[system].get("concept", ())))
                enumerated.add(system)
            else:
                complete = False
        out[name] = (tuple(sorted(codes)), tuple(sorted(enumerated)), tuple(sorted(systems)), complete)
    return out


def _concepts(concepts: Any) -> list[str]:
    out: list[str] = []
    for c in concepts:
        out.append(c["code"])
        out.extend(_concepts(c.get("concept", ())))
    return out


def _type_codes(sds: dict[str, dict[str, Any]], vss: dict[str, dict[str, Any]]) -> dict[str, tuple[str, ...]]:
    """``record profile -> the Composition.type codes that name it``: its fixed SNOMED CT code, else the SNOMED CT
    concepts its ``Composition.type`` binding (any strength) lists (DiagnosticReportRecord fixes none)."""
    out: dict[str, tuple[str, ...]] = {}
    for name in RECORD_PROFILES:
        sd = sds.get(PROFILE_BASE + name)
        if sd is None:
            continue
        diff = {e["id"]: e for e in sd["differential"]["element"]}
        fixed = diff.get("Composition.type.coding.code", {}).get("fixedCode")
        if fixed is not None:
            out[name] = (fixed,)
            continue
        binding = diff.get("Composition.type", {}).get("binding", {}).get("valueSet", "").split("|", 1)[0]
        vs = vss.get(binding, {})
        out[name] = tuple(
            sorted(
                c["code"]
                for inc in vs.get("compose", {}).get("include", ())
                if inc.get("system") == "http://snomed.info/sct"
                for c in inc.get("concept", ())
            )
        )
    return out


def package(directory: pathlib.Path) -> tuple[str, str, dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``(version, date, profiles, value sets, type codes)`` of one extracted package."""
    meta = json.loads((directory / "package.json").read_text(encoding="utf-8"))
    if meta["name"] != "ndhm.in":
        raise SystemExit(f"{directory}: not the ndhm.in package")
    sds = _load(directory, "StructureDefinition")
    vss = _load(directory, "ValueSet")
    css = _load(directory, "CodeSystem")
    todo = [PROFILE_BASE + name for name in RECORD_PROFILES]
    profiles: dict[str, Any] = {}
    while todo:
        url = todo.pop()
        name = url[len(PROFILE_BASE) :]
        if name in profiles or url not in sds or sds[url]["type"] in NOT_FOLLOWED:
            continue
        profiles[name] = _profile(sds[url], sds)
        for _, _, _, targets, _ in profiles[name][1]:
            todo.extend(PROFILE_BASE + target for _, target in targets if target)
    wanted = {binding[1] for p in profiles.values() for *_, binding in p[1] if binding is not None}
    value_sets = _value_sets(vss, css, wanted)
    return meta["version"], str(meta.get("date", "")), profiles, value_sets, _type_codes(sds, vss)


def generate(directories: list[pathlib.Path], provenance: dict[str, str]) -> str:
    packages = sorted((package(d) for d in directories), key=lambda p: tuple(int(x) for x in p[0].split(".")))
    packages.reverse()  # newest first
    lines = [
        '"""The NRCeS guide\'s profile rules, per version of its package. GENERATED: do not edit by hand.',
        "",
        "Generated by ``python tools/fhir_ig_profiles.py PACKAGE_DIR... -o health_async/fhir/_ig.py`` from the guide's",
        'FHIR packages ``ndhm.in`` ("FHIR Implementation Guide for ABDM", NRCeS, licence CC0-1.0):',
        "",
    ]
    for version, date, *_ in packages:
        lines.append(f"- {version} (package date {date}): {provenance.get(version, 'provenance not recorded')}")
    lines += [
        "",
        "``PACKAGES``: ``(version, package date)``, newest first.",
        "``PROFILES[version][name] = (resource type, elements, slicings)``. ``elements``: ``(element id, (min, max)",
        "or None, (fixed value,) or (), targets, binding)``; max -1 is unbounded; a target is ``(resource type, guide",
        "profile name or '')``; a binding ``(strength, value set name)``. ``slicings``: ``(element id, discriminator",
        "paths, closed, ((slice name, values), ...))``.",
        "``VALUE_SETS[version][name] = ((system, code) pairs, systems enumerated whole, every system, complete)``.",
        "``TYPE_CODES``: a SNOMED CT code of ``Composition.type`` -> the record profile it names (every version);",
        "``TYPE_TEXTS``: the fixed ``Composition.type.text`` (folded case and spaces) of a profile that fixes no code.",
        '"""',
        "",
        "from typing import Any, Final",
        "",
        "# ruff: noqa: E501",
        "# fmt: off",
        f"PACKAGES: Final = {tuple((v, d) for v, d, *_ in packages)!r}",
        "",
        "PROFILES: Final[dict[str, dict[str, tuple[str, tuple[Any, ...], tuple[Any, ...]]]]] = {",
    ]
    for version, _, profiles, *_ in packages:
        lines.append(f"    {version!r}: {{")
        for name in sorted(profiles):
            kind, elements, slicings = profiles[name]
            lines.append(f"        {name!r}: ({kind!r}, (")
            lines.extend(f"            {row!r}," for row in elements)
            lines.append("        ), (")
            lines.extend(f"            {row!r}," for row in slicings)
            lines.append("        )),")
        lines.append("    },")
    lines += ["}", "", "VALUE_SETS: Final[dict[str, dict[str, tuple[Any, ...]]]] = {"]
    for version, _, _, value_sets, _ in packages:
        lines.append(f"    {version!r}: {{")
        lines.extend(f"        {name!r}: {value_sets[name]!r}," for name in sorted(value_sets))
        lines.append("    },")
    codes: dict[str, str] = {}
    texts: dict[str, str] = {}
    for version, _, profiles, _, type_codes in packages:
        for name, names in type_codes.items():
            for code in names:
                if codes.setdefault(code, name) != name:
                    raise SystemExit(f"{version}: Composition.type {code} names {codes[code]} and {name}")
            if not names and name in profiles:
                text = next(
                    (row[2][0] for row in profiles[name][1] if row[0] == "Composition.type.text" and row[2]), None
                )
                if text is not None:
                    texts[" ".join(text.split()).casefold()] = name
    lines += ["}", "", "TYPE_CODES: Final[dict[str, str]] = {"]
    lines.extend(f"    {code!r}: {codes[code]!r}," for code in sorted(codes))
    lines += ["}", "", "TYPE_TEXTS: Final[dict[str, str]] = {"]
    lines.extend(f"    {text!r}: {texts[text]!r}," for text in sorted(texts))
    lines += ["}", "# fmt: on", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("packages", nargs="+", type=pathlib.Path, help="extracted ndhm.in package directories")
    parser.add_argument("-o", "--out", type=pathlib.Path, default=_OUT)
    parser.add_argument("--provenance", action="append", default=[], help="VERSION=TEXT (where a package comes from)")
    args = parser.parse_args(argv)
    provenance = dict(PROVENANCE)
    for item in args.provenance:
        version, _, text = item.partition("=")
        provenance[version] = text
    text = generate(args.packages, provenance)
    args.out.write_text(text, encoding="utf-8")
    sys.stderr.write(f"wrote {args.out}: {len(text)} characters\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
