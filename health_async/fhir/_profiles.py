"""The NRCeS guide's profile rules, applied to a document: the tables ``_ig.py`` (generated from the guide's own
packages by ``tools/fhir_ig_profiles.py``) turned into one tree per profile, walked over the Composition and every
resource its references reach.

Five families of rules, each problem naming its rule and the profile element it comes from
(``StructureDefinition-OPConsultRecord|6.5.0#Composition.section:FollowUp.entry``):

* ``profile.cardinality``: the ``min``/``max`` of each element a profile constrains, counted in each present parent
  (an absent parent's children are not counted);
* ``profile.fixed``: a ``fixed[x]`` value (``Composition.type.text`` "Wellness Record", a section's code);
* ``profile.slice``: the slices of an element (``Composition.section`` by ``code.coding.code``, a single section's
  entries by ``type``): each slice's ``min``/``max``, and in a closed slicing an item no slice matches;
* ``profile.target``: a reference that resolves in the bundle to a resource of a type the element's
  ``targetProfile`` does not allow; a resource a reference allows is then checked against that profile (one of its
  type; several, as DiagnosticReportLab or DiagnosticReportImaging: the one its ``meta.profile`` names, else the one
  it meets best);
* ``profile.binding``: a ``required`` or ``extensible`` binding to one of the guide's own value sets: a coding of a
  code system the value set enumerates (the guide's code systems) whose code is not in the value set is an error; a
  ``required`` binding also needs one coding in the value set (in one of its systems, when the value set includes
  an external terminology it cannot enumerate).

Judgement calls: slices are recognised by ``value`` discriminators only (all the guide uses), and an ``openAtEnd``
slicing is taken as ``open`` (the guide's own 6.5.0 OP consult example puts an unmatched section before a matched
one); an item no slice of an open slicing matches is fine, as FHIR has it (the guide's 6.5.0 OP consult example's
follow-up section carries 2.0.1's code, 736271009, which no 6.5.0 slice names). Type restrictions
of choice elements, invariants and ``mustSupport`` are not checked.

Which version's rules (``choose``): the ``|version`` of the record profile URL when there is one (a version without
tables: the newest known version not newer than it, with a ``profile.version`` warning); otherwise the newest
version (6.5.0), unless the document meets an older version's rules (2.0.1) and not the newest's and uses no section
only the newest defines (such as OP consult's FollowUp 390906007): then the older. A version whose package lacks the
record profile (the 2.0.1 copy has no PrescriptionRecord) is not used for it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any, Final

from ._types import RecordType

__all__ = ["Finding", "check_document", "versions"]

#: ``(severity, path, rule, message, source)``: one problem, as ``Problem`` takes it.
Finding = tuple[str, str, str, str, str]

_SECTION_SLICING: Final = "Composition.section"
_KEYS: Final = frozenset({str, int, float, bool})

#: A path as the walk carries it: the root's text, then ``(parent, name)`` or ``(parent, index)`` pairs; rendered
#: (``Bundle.entry[0].resource.section[6]``) only for a finding.
Path = str | tuple[Any, str | int]


def _render(path: Path) -> str:
    parts: list[str] = []
    while type(path) is tuple:
        path, segment = path
        parts.append(f"[{segment}]" if type(segment) is int else f".{segment}")
    parts.append(str(path))
    return "".join(reversed(parts))


class _Node:
    """One element of a profile: its rules, its constrained children, its slicing and slices; ``finish`` then works
    out what the walk reads (``kids``, ``per_item``, ``if_absent``)."""

    __slots__ = (
        "binding",
        "candidates",
        "card",
        "children",
        "eid",
        "fixed",
        "if_absent",
        "kids",
        "only_fixed",
        "per_item",
        "slice_order",
        "slice_values",
        "slices",
        "slicing",
        "target_types",
        "targets",
    )

    def __init__(self, eid: str) -> None:
        self.eid = eid
        self.card: tuple[int, int] | None = None
        self.fixed: tuple[Any, ...] = ()
        self.targets: tuple[tuple[str, str], ...] = ()
        self.binding: tuple[str, str] | None = None
        self.children: dict[str, _Node] = {}
        self.slicing: tuple[tuple[str, ...], bool] | None = None
        self.slices: dict[str, _Node] = {}
        self.slice_values: dict[str, tuple[Any, ...]] = {}
        self.slice_order: dict[Any, tuple[int, str]] = {}
        self.kids: tuple[tuple[str, str | None, _Node], ...] = ()
        self.per_item = False
        self.only_fixed = False
        self.if_absent = False
        self.target_types: frozenset[str] = frozenset()
        self.candidates: dict[str, tuple[str, ...]] = {}

    def finish(self, profiles: Any) -> None:
        """Work out what the walk reads; ``profiles``: the names of the version's profiles (a target is checked
        against those of them its references allow)."""
        for node in (*self.children.values(), *self.slices.values()):
            node.finish(profiles)
        self.target_types = frozenset(t for t, _ in self.targets if t)
        for kind in self.target_types:
            found = tuple(name for t, name in self.targets if t == kind and name and name in profiles)
            if found:
                self.candidates[kind] = found
        self.kids = tuple(
            (name, name[:-3] if name.endswith("[x]") else None, child) for name, child in self.children.items()
        )
        self.per_item = bool(self.fixed or self.targets or self.binding or self.children)
        self.only_fixed = bool(self.fixed) and not (self.targets or self.binding or self.children)
        for position, (name, values) in enumerate(self.slice_values.items()):
            if None not in values:
                self.slice_order.setdefault(values, (position, name))
        self.if_absent = (self.card is not None and self.card[0] > 0) or any(
            s.card is not None and s.card[0] > 0 for s in self.slices.values()
        )


class _Profile:
    __slots__ = ("kind", "name", "root", "source", "version")

    def __init__(self, version: str, name: str, kind: str, root: _Node) -> None:
        self.version = version
        self.name = name
        self.kind = kind
        self.root = root
        self.source = f"StructureDefinition-{name}|{version}#"


def _node(root: _Node, eid: str) -> _Node:
    node = root
    prefix = root.eid
    for segment in eid.split(".")[1:]:
        name, _, slice_name = segment.partition(":")
        if name.endswith("[x]") and slice_name:  # a type slice of a choice: its own JSON name (valueQuantity)
            name, slice_name = slice_name, ""
        prefix = f"{prefix}.{name}"
        node = node.children.setdefault(name, _Node(prefix))
        if slice_name:
            prefix = f"{prefix}:{slice_name}"
            node = node.slices.setdefault(slice_name, _Node(prefix))
    return node


class _Tables:
    """The generated tables, loaded and compiled once (at the first validation that needs them)."""

    def __init__(self) -> None:
        from . import _ig  # the generated tables: loaded with the first validation, not at import

        self.versions: tuple[str, ...] = tuple(version for version, _ in _ig.PACKAGES)
        self.rows = _ig.PROFILES
        self.value_sets = {
            version: {
                name: (frozenset(codes), frozenset(enumerated), frozenset(systems), complete)
                for name, (codes, enumerated, systems, complete) in sets.items()
            }
            for version, sets in _ig.VALUE_SETS.items()
        }

    @functools.cache  # noqa: B019 - one instance for the process (see _tables)
    def profile(self, version: str, name: str) -> _Profile | None:
        found = self.rows.get(version, {}).get(name)
        if found is None:
            return None
        kind, elements, slicings = found
        root = _Node(kind)
        for eid, card, fixed, targets, binding in elements:
            node = _node(root, eid)
            node.card, node.fixed, node.targets, node.binding = card, fixed, targets, binding
        for eid, paths, closed, slices in slicings:
            node = _node(root, eid)
            node.slicing = (paths, closed)
            for slice_name, values in slices:
                node.slices.setdefault(slice_name, _Node(f"{eid}:{slice_name}"))
                node.slice_values[slice_name] = values
        root.finish(self.rows.get(version, {}))
        return _Profile(version, name, kind, root)

    @functools.cache  # noqa: B019
    def newest_only(self, version: str, name: str) -> frozenset[Any]:
        """The section slice values of ``name`` in ``version`` that no other version's ``name`` has."""
        mine = self._section_values(version, name)
        others: set[Any] = set()
        for other in self.versions:
            if other != version:
                others |= self._section_values(other, name)
        return frozenset(mine - others)

    def _section_values(self, version: str, name: str) -> set[Any]:
        found = self.rows.get(version, {}).get(name)
        if found is None:
            return set()
        return {
            values
            for eid, _, _, slices in found[2]
            if eid == _SECTION_SLICING
            for _, values in slices
            if None not in values
        }


@functools.cache
def _tables() -> _Tables:
    return _Tables()


def versions() -> tuple[str, ...]:
    """The guide versions the generated tables hold, newest first."""
    return _tables().versions


def _at(value: Any, path: str) -> list[Any]:
    """The values at a dotted path inside ``value`` (lists flattened)."""
    current = [value]
    for name in path.split(".") if path != "$this" else ():
        nxt: list[Any] = []
        for item in current:
            if type(item) is dict and name in item:
                got = item[name]
                nxt.extend(got if type(got) is list else [got])
        current = nxt
    return current


def _kind_name(kind: Any) -> str:
    """A resource type as a message may name it (a type name, never free text of the bundle)."""
    return kind if isinstance(kind, str) and kind.isalpha() and len(kind) <= 64 else "a resource of another type"


class _Run:
    """One document checked against one version: the findings, and the resources still to check."""

    def __init__(self, t: _Tables, version: str, entries: list[Any], index: dict[str, int]) -> None:
        self.t = t
        self.version = version
        self.entries = entries
        self.index = index
        self.value_sets = t.value_sets.get(version, {})
        self.found: list[Finding] = []
        self.queue: list[tuple[int, tuple[str, ...]]] = []
        self.done: set[tuple[int, tuple[str, ...]]] = set()

    def error(self, path: Path, rule: str, message: str, prof: _Profile, node: _Node) -> None:
        self.found.append(("error", _render(path), rule, message, prof.source + node.eid))

    # ------------------------------------------------------------------------------------------------ the walk

    def resource(self, prof: _Profile, obj: dict[str, Any], path: str) -> None:
        self.children(prof, prof.root, obj, path)
        while self.queue:
            i, candidates = self.queue.pop(0)
            if (i, candidates) in self.done:
                continue
            self.done.add((i, candidates))
            self.target_resource(i, candidates)

    def children(self, prof: _Profile, node: _Node, obj: dict[str, Any], path: Path) -> None:
        for name, stem, child in node.kids:
            if stem is not None:  # a choice: its one JSON name present (valueQuantity), if any
                name = next((k for k in obj if k.startswith(stem) and k[len(stem) : len(stem) + 1].isupper()), name)
            value = obj.get(name)
            if value is None:
                if child.if_absent:
                    if child.card is not None:
                        self.cardinality(prof, child, 0, (path, name), "profile.cardinality")
                    if child.slicing is not None:
                        self.sliced(prof, child, (), (path, name))
                continue
            many = type(value) is list
            card = child.card
            if card is not None:
                count = len(value) if many else 1
                if count < card[0] or (card[1] >= 0 and count > card[1]):
                    self.cardinality(prof, child, count, (path, name), "profile.cardinality")
            if child.only_fixed:
                fixed = child.fixed[0]
                if many:
                    for j, v in enumerate(value):
                        if v is not None and v != fixed:
                            self.each(prof, child, v, ((path, name), j))
                elif value != fixed:
                    self.each(prof, child, value, (path, name))
            elif child.per_item:
                if many:
                    for j, v in enumerate(value):
                        if v is not None:
                            self.each(prof, child, v, ((path, name), j))
                else:
                    self.each(prof, child, value, (path, name))
            if child.slicing is not None:
                where = (path, name)
                self.sliced(
                    prof, child, [(v, (where, j)) for j, v in enumerate(value)] if many else [(value, where)], where
                )

    def sliced(self, prof: _Profile, node: _Node, items: Any, where: Path) -> None:
        """The slices of ``node`` over its items: each slice's cardinality, what no slice matches, the slices'
        own rules on the items they match."""
        paths, closed = node.slicing or ((), False)
        groups: dict[str, list[tuple[Any, Path]]] = {name: [] for name in node.slices}
        for value, at in items:
            name = self.match(node, paths, value)
            if name is not None:
                groups[name].append((value, at))
            elif closed:
                self.error(
                    at,
                    "profile.slice",
                    f"{node.eid} is sliced by {' and '.join(paths)} (closed): this item matches none of its slices "
                    f"({', '.join(node.slices)})",
                    prof,
                    node,
                )
        for name, slice_node in node.slices.items():
            if slice_node.card is not None:
                self.cardinality(prof, slice_node, len(groups[name]), where, "profile.slice")
            if slice_node.per_item:
                for value, at in groups[name]:
                    self.each(prof, slice_node, value, at)

    def match(self, node: _Node, paths: tuple[str, ...], value: Any) -> str | None:
        """The first slice (in the profile's order) whose discriminating values ``value`` holds."""
        if len(paths) == 1:
            order = node.slice_order
            found = [order[(leaf,)] for leaf in _at(value, paths[0]) if type(leaf) in _KEYS and (leaf,) in order]
            return min(found)[1] if found else None
        for name, expected in node.slice_values.items():
            if None not in expected and all(
                want in _at(value, path) for path, want in zip(paths, expected, strict=True)
            ):
                return name
        return None

    def cardinality(self, prof: _Profile, node: _Node, count: int, where: Path, rule: str) -> None:
        low, high = node.card or (0, -1)
        if count < low:
            self.error(where, rule, f"{node.eid}: at least {low} expected, {count} found", prof, node)
        elif high >= 0 and count > high:
            self.error(where, rule, f"{node.eid}: at most {high} expected, {count} found", prof, node)

    def each(self, prof: _Profile, node: _Node, value: Any, path: Path) -> None:
        if node.fixed and value != node.fixed[0]:
            self.error(path, "profile.fixed", f"{node.eid} is fixed to {node.fixed[0]!r}", prof, node)
        if type(value) is not dict:
            if node.binding is not None and type(value) is str:
                self.binding(prof, node, [({"code": value}, path)], path)
            return
        if node.targets:
            self.reference(prof, node, value, path)
        if node.binding is not None:
            codings = value.get("coding")
            items: list[tuple[dict[str, Any], Path]]
            if "coding" not in value and ("system" in value or "code" in value):  # a Coding
                items = [(value, path)]
            elif type(codings) is list:
                items = [(c, ((path, "coding"), j)) for j, c in enumerate(codings) if type(c) is dict]
            else:
                items = []
            self.binding(prof, node, items, path)
        if node.kids:
            self.children(prof, node, value, path)

    # ------------------------------------------------------------------------------------------ the families

    def reference(self, prof: _Profile, node: _Node, value: dict[str, Any], path: Path) -> None:
        ref = value.get("reference")
        if type(ref) is not str:
            return
        i = self.index.get(ref)
        if i is None:
            i = self.resolve(ref)
            if i is None:  # not in the bundle: document.reference-resolved says so
                return
        kind = self.entries[i]["resource"].get("resourceType")
        if node.target_types and kind not in node.target_types:
            self.error(
                path,
                "profile.target",
                f"{node.eid} references {' or '.join(sorted(node.target_types))}, not {_kind_name(kind)}",
                prof,
                node,
            )
            return
        candidates = node.candidates.get(kind) if type(kind) is str else None
        if candidates:
            self.queue.append((i, candidates))

    def resolve(self, ref: str) -> int | None:
        if ref in self.index:
            return self.index[ref]
        if ref.startswith(("http:", "https:")) and ref.count("/") >= 2:
            return self.index.get("/".join(ref.split("/_history/", 1)[0].rsplit("/", 2)[-2:]))
        return None

    def target_resource(self, i: int, candidates: tuple[str, ...]) -> None:
        resource = self.entries[i]["resource"]
        meta = resource.get("meta")
        profiles = meta.get("profile") if type(meta) is dict else None
        declared = {
            p.split("|", 1)[0].rstrip("/").rsplit("/", 1)[-1]
            for p in (profiles if type(profiles) is list else ())
            if isinstance(p, str)
        }
        chosen = tuple(c for c in candidates if c in declared) or candidates
        path = f"Bundle.entry[{i}].resource"
        if len(chosen) == 1:
            prof = self.t.profile(self.version, chosen[0])
            if prof is not None:
                self.children(prof, prof.root, resource, path)
            return
        best: tuple[list[Finding], list[tuple[int, tuple[str, ...]]]] | None = None
        for name in chosen:
            prof = self.t.profile(self.version, name)
            if prof is None:
                continue
            start_found, start_queue = len(self.found), len(self.queue)
            self.children(prof, prof.root, resource, path)
            got = (self.found[start_found:], self.queue[start_queue:])
            del self.found[start_found:], self.queue[start_queue:]
            if best is None or _errors(got[0]) < _errors(best[0]):
                best = got
        if best is not None:
            self.found.extend(best[0])
            self.queue.extend(best[1])

    def binding(self, prof: _Profile, node: _Node, codings: list[tuple[dict[str, Any], Path]], path: Path) -> None:
        strength, name = node.binding or ("", "")
        value_set = self.value_sets.get(name)
        if value_set is None:
            return
        codes, enumerated, systems, complete = value_set
        for coding, where in codings:
            system = coding.get("system")
            if system in enumerated and (system, coding.get("code")) not in codes:
                self.error(
                    where,
                    "profile.binding",
                    f"{node.eid} is bound ({strength}) to the guide's value set {name}: this code of its code system "
                    "is not in it",
                    prof,
                    node,
                )
        if strength != "required" or not codings:
            return
        if complete:
            ok = any((c.get("system"), c.get("code")) in codes for c, _ in codings) or any(
                "system" not in c and any(code == c.get("code") for _, code in codes) for c, _ in codings
            )
        else:
            ok = any(c.get("system") in systems for c, _ in codings)
        if not ok:
            self.error(
                path,
                "profile.binding",
                f"{node.eid} is bound (required) to the guide's value set {name}: no coding is in it",
                prof,
                node,
            )


def _errors(found: list[Finding]) -> int:
    return sum(1 for f in found if f[0] == "error")


def _index(entries: list[Any]) -> dict[str, int]:
    """Every way an entry may be referenced inside the bundle -> its entry index."""
    out: dict[str, int] = {}
    for i, e in enumerate(entries):
        if type(e) is not dict or type(e.get("resource")) is not dict:
            continue
        res = e["resource"]
        url = e.get("fullUrl")
        if isinstance(url, str):
            out.setdefault(url, i)
        if isinstance(res.get("resourceType"), str) and isinstance(res.get("id"), str):
            out.setdefault(f"{res['resourceType']}/{res['id']}", i)
    return out


def _run(version: str, name: str, entries: list[Any], composition: int, index: dict[str, int]) -> list[Finding] | None:
    t = _tables()
    prof = t.profile(version, name)
    if prof is None:
        return None
    run = _Run(t, version, entries, index)
    run.resource(prof, entries[composition]["resource"], f"Bundle.entry[{composition}].resource")
    return run.found


def _sections(composition: dict[str, Any]) -> Iterator[Any]:
    sections = composition.get("section")
    for section in sections if type(sections) is list else ():
        if type(section) is dict:
            yield section


def _has_only(t: _Tables, version: str, name: str, composition: dict[str, Any]) -> bool:
    """Whether the Composition has a section only ``version``'s profile defines (by its discriminating value)."""
    only = t.newest_only(version, name)
    if not only:
        return False
    found = t.rows[version][name][2]
    paths = next((p for eid, p, _, _ in found if eid == _SECTION_SLICING), ())
    for section in _sections(composition):
        for values in only:
            if all(want in _at(section, path) for path, want in zip(paths, values, strict=True)):
                return True
    return False


def _version_of(declared: str, usable: list[str]) -> str:
    def key(version: str) -> tuple[int, ...]:
        return tuple(int(x) if x.isdigit() else 0 for x in version.split("."))

    older = [v for v in usable if key(v) <= key(declared)]
    return older[0] if older else usable[0]


def check_document(
    entries: list[Any],
    composition: int,
    record_type: RecordType,
    declared: str | None,
    index: dict[str, int] | None = None,
) -> tuple[str | None, list[Finding]]:
    """``(version whose rules were applied, findings)`` for the Composition at ``entries[composition]`` of this
    record type; ``declared`` is the ``|version`` of its profile URL, if any (see the module's docstring);
    ``index``: ``_index(entries)`` when the caller has it already (``validate`` works it out once for both
    reference checks)."""
    if index is None:
        index = _index(entries)
    t = _tables()
    name = record_type.value
    usable = [v for v in t.versions if name in t.rows.get(v, {})]
    if not usable:
        return None, []
    if declared is not None:
        version = declared if declared in usable else _version_of(declared, usable)
        found = _run(version, name, entries, composition, index) or []
        if version != declared:
            found.insert(
                0,
                (
                    "warning",
                    f"Bundle.entry[{composition}].resource.meta.profile",
                    "profile.version",
                    f"the guide's version named by the profile has no rules here for {name}: checked against "
                    f"{version}'s",
                    f"StructureDefinition-{name}|{version}",
                ),
            )
        return version, found
    newest = usable[0]
    found = _run(newest, name, entries, composition, index) or []
    if not _errors(found) or _has_only(t, newest, name, entries[composition]["resource"]):
        return newest, found
    for older in usable[1:]:
        other = _run(older, name, entries, composition, index) or []
        if not _errors(other):
            return older, other
    return newest, found
