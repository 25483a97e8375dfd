"""Wire declarations: a model field's wire name is declared once, beside the field, and parsing is derived from it.

A model is a frozen, slotted attrs class. A field without a declaration is read from the key of its own name; a
field that is spelled otherwise on the wire says so with :func:`wire`::

    @attrs.frozen
    class Patient:
        oid: str = wire(parse=non_empty)                    # required, read from "oid", never empty
        first_name: str | None = wire("fn", pii=True)       # read from "fn", left out of repr
        blood_group: str | None = wire("bg", "bloodgroup", pii=True)   # "bg", else the live spelling "bloodgroup"
        svc_id: str | None = wire("svc_id", "eka_id", one_key=True)    # one key, spelled two ways: the last wins
        title: str | None = wire("metadata.title")          # a dotted name reads a nested object

:func:`structure` builds a model from decoded JSON with a function generated once per class from those
declarations. The tolerant rules are written once per type, in :func:`rule_for`, not per model:

* ``str``: a string; an integer is taken as its decimal text (ids sent as numbers);
* ``int``: an integer, an integral float, or a string of digits (numbers sent as strings);
* ``float``: a number or a numeric string; ``bool``: a boolean or the string ``"true"``/``"false"``;
* ``datetime.date``: an ISO date (a longer timestamp is cut to its date); ``""`` is ``None``;
* an enum: its ``from_wire`` classmethod when it has one (unknown values become ``UNKNOWN``, never an error),
  else its members' values;
* ``tuple[X, ...]``: a JSON array (``null`` is ``()``); ``Mapping``: a JSON object; ``Any``: as sent;
* a nested model: its own generated function; ``X | None``: ``null`` is ``None``;
* a type whose wire form is not an object of its fields (a range sent as a JSON string, say) states its rule
  beside itself as a ``__wire_rule__`` static method.

A field may name its own rule (``parse=``) where its meaning needs one (a value kept as text, an id that must not
be empty). Unknown keys are ignored; a missing optional field takes its default; a value that does not fit raises
:class:`~health_async.errors.ResponseValidationError` naming the model and the wire field, never the value (values
can be personal data).

A model whose answer must never be lost to a side field, because it carries a transaction id or a token (the ABHA
step answers: an OTP already went out, an account may already exist), sets ``__wire_lenient__ = True``: there an
optional field whose value does not fit is read as not sent (``None``, ``()`` or ``UNKNOWN``), with a debug log
naming the model and the field; a required field, or one declared ``strict`` (the transaction id, the tokens
themselves), still fails.

:func:`fast_decoder` is the bulk path: msgspec decodes the response bytes straight into the attrs classes in C,
derived from the same declarations. It exists only for a tree of models whose wire names are their attribute
names, live spellings aside: a live spelling is an alias of the documented field's slot (judgement call, see
:func:`fast_decoder`). Whatever does not fit that strict decode as it is returns ``None`` and goes through
:func:`structure`, which tolerates more and names the field that does not fit.
"""

from __future__ import annotations

import datetime as dt
import enum
import functools
import inspect
import math
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Final, Self, TypeVar, cast

import attrs
import msgspec

from ._logging import logger
from .errors import ResponseValidationError

__all__ = [
    "WireEnum",
    "Invalid",
    "Rule",
    "as_text",
    "empty_is_none",
    "epoch_datetime",
    "fast_decoder",
    "instant",
    "iso_instant",
    "local",
    "non_empty",
    "rule_for",
    "structure",
    "structure_many",
    "wire",
]

T = TypeVar("T")


class WireEnum(enum.Enum):
    """Base of the enums read from the wire: a value this version does not know (or one that is not a string) is
    the ``UNKNOWN`` member every subclass defines, never an error. The enums' tolerant rule, written once."""

    @classmethod
    def from_wire(cls, value: object) -> Self:
        """The member for a wire value; ``UNKNOWN`` for anything else."""
        member = cls._value2member_map_.get(value) if isinstance(value, str) else None
        return cast(Self, member) if member is not None else cls["UNKNOWN"]


#: A rule turns one wire value into a field's value; ``label`` names the field in errors.
Rule = Callable[[Any, str], Any]

_META: Final = "health_async.wire"


class Invalid(ValueError):
    """A wire value does not fit its field; carries the field's wire name only (never the value)."""


class Missing(Invalid):
    """A required field is absent."""


@attrs.frozen
class Wire:
    """A field's wire declaration (kept in the attrs field's metadata)."""

    #: Dotted wire names, the documented one first, then live spellings; empty: the attribute's own name.
    names: tuple[str, ...] = ()
    #: The field's own rule, instead of its type's.
    parse: Rule | None = None
    #: Never read from the wire: the client fills it (the route an upload took, the id that was asked for).
    local: bool = False
    #: What a lenient model's answer carries (a txn id, a token): a value that does not fit fails it all the same.
    strict: bool = False
    #: The names are spellings of one key, not fallbacks: the last of them in the object wins (see :func:`wire`).
    one_key: bool = False


def wire(
    *names: str,
    parse: Rule | None = None,
    pii: bool = False,
    default: Any = attrs.NOTHING,
    factory: Callable[[], Any] | None = None,
    repr: bool = True,
    eq: bool = True,
    hash: bool | None = None,
    alias: str | None = None,
    strict: bool = False,
    one_key: bool = False,
) -> Any:
    """An attrs field with its wire declaration.

    ``names``: the wire name (dotted for a nested object) and then any live spellings, tried in order (the first
    that is present and not ``null`` wins); none: the attribute's own name. ``parse``: the field's own rule.
    ``pii``: personal data, left out of ``repr``. ``strict``: in a lenient model (see the module's documentation),
    this field is what the answer carries, and a value that does not fit fails the answer. The other arguments are
    attrs' own.

    ``one_key``: the names are not fallbacks but spellings of one key of one object (the live service renamed
    it: ``svc_id`` / ``eka_id``). A body carrying more than one of them is read as JSON reads a repeated key: the
    last one in the object wins, ``null`` included. That is what msgspec does with the aliases of the fast decode
    (:func:`fast_decoder`), so a model decoded that way needs no scan of the body for them, and both paths give
    the same model. Judgement call: such a body is not seen in practice; the rule is the one a repeated key has
    in every JSON reader, and it costs the fast path nothing.
    """
    if factory is not None:
        default = attrs.Factory(factory)
    if one_key and any("." in name for name in names):
        raise TypeError("one_key: the spellings of one key are plain names, not dotted paths")
    return attrs.field(
        default=default,
        repr=repr and not pii,
        eq=eq,
        hash=hash,
        alias=alias,
        metadata={_META: Wire(names=names, parse=parse, strict=strict, one_key=one_key)},
    )


def local(*, default: Any = None, repr: bool = True, eq: bool = True, hash: bool | None = None) -> Any:
    """An attrs field the client fills: never read from a response."""
    return attrs.field(default=default, repr=repr, eq=eq, hash=hash, metadata={_META: Wire(local=True)})


# ----------------------------------------------------------------------------- the rules, once per type


def _str(value: Any, label: str) -> str:
    if type(value) is str:
        return value
    if type(value) is int:  # ids sent as numbers by some producers
        return str(value)
    raise Invalid(label)


#: An integer sent as text: an optional minus and at most 4,300 digits (Python's int-to-str limit).
_DIGITS: Final = re.compile(r"-?[0-9]{1,4300}")


def _int(value: Any, label: str) -> int:
    kind = type(value)
    if kind is int:
        return typing.cast(int, value)
    if kind is float and value.is_integer():
        return int(value)
    if kind is str and _DIGITS.fullmatch(value):  # "--1" or 5,000 digits: does not fit, never a ValueError
        return int(value)
    raise Invalid(label)


def _float(value: Any, label: str) -> float:
    kind = type(value)
    if kind is float:
        return typing.cast(float, value)
    if kind is int:
        try:
            return float(value)
        except OverflowError:  # 10**400: valid JSON, no float
            raise Invalid(label) from None
    if kind is str:
        try:
            number = float(value)
        except ValueError:
            pass
        else:
            if math.isfinite(number):
                return number
    raise Invalid(label)


def _bool(value: Any, label: str) -> bool:
    if type(value) is bool:
        return value is True
    if type(value) is str:
        lowered = value.strip().lower()
        if lowered in ("true", "false"):
            return lowered == "true"
    raise Invalid(label)


def _date(value: Any, label: str) -> dt.date:
    if type(value) is str:
        try:
            return dt.date.fromisoformat(value[:10])
        except ValueError:
            pass
    raise Invalid(label)


def _any(value: Any, _: str) -> Any:
    return value


def _mapping(value: Any, label: str) -> dict[str, Any]:
    if type(value) is not dict:
        raise Invalid(label)
    return dict(value)


def _optional(rule: Rule, none_values: tuple[object, ...]) -> Rule:
    def optional(value: Any, label: str) -> Any:
        if value is None:
            return None
        if none_values and type(value) is str and value in none_values:
            return None
        return rule(value, label)

    if not none_values:
        _INNER[optional] = rule  # the generated structurers inline "None if null" and call this directly
    return optional


_INNER: Final[dict[Rule, Rule]] = {}


def _tuple_of(rule: Rule) -> Rule:
    def many(value: Any, label: str) -> tuple[Any, ...]:
        if value is None:
            return ()
        if type(value) is not list:
            raise Invalid(label)
        return tuple([rule(item, label) for item in value])

    return many


def _enum(cls: type[enum.Enum]) -> Rule:
    from_wire = getattr(cls, "from_wire", None)
    if from_wire is not None:
        return lambda value, _: from_wire(value)
    members = {member.value: member for member in cls}
    unknown = members.get("unknown", getattr(cls, "UNKNOWN", None))

    def by_value(value: Any, label: str) -> enum.Enum:
        member = members.get(value) if isinstance(value, str | int) else None
        if member is None:
            if unknown is None:
                raise Invalid(label)
            return unknown
        return member

    return by_value


_PLAIN: Final[dict[object, Rule]] = {
    str: _str,
    int: _int,
    float: _float,
    bool: _bool,
    dt.date: _date,
    Any: _any,
    object: _any,
}


@functools.cache
def rule_for(tp: Any) -> Rule:
    """The tolerant rule of a field type (see the module's documentation)."""
    plain = _PLAIN.get(tp)
    if plain is not None:
        return plain
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Union or origin is types.UnionType:
        rest = tuple(a for a in args if a is not type(None))
        inner = rule_for(rest[0]) if len(rest) == 1 else _first_fit(tuple(rule_for(a) for a in rest))
        # an empty string stands for "not said" where the field is a date or a flag
        return _optional(inner, ("",) if rest in ((dt.date,), (bool,)) else ())
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return _tuple_of(rule_for(args[0]))
    if origin in (dict, Mapping, typing.Mapping) or tp in (dict, Mapping):
        return _mapping
    if origin is typing.Literal:
        allowed = frozenset(args)
        return lambda value, label: value if _hashable(value) and value in allowed else _fail(label)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum(tp)
    own = getattr(tp, "__wire_rule__", None)
    if own is not None:  # a type whose wire form is not an object of fields states its rule beside itself
        return typing.cast(Rule, own)
    if isinstance(tp, type) and attrs.has(tp):
        return _structurer(tp)
    raise TypeError(f"no wire rule for {tp!r}")


def _fail(label: str) -> Any:
    raise Invalid(label)


def _hashable(value: Any) -> bool:
    """A JSON value that can be looked up in a set: not a list or an object."""
    return value.__class__ is not list and value.__class__ is not dict


def _first_fit(rules: tuple[Rule, ...]) -> Rule:
    def first(value: Any, label: str) -> Any:
        for rule in rules:
            try:
                return rule(value, label)
            except Invalid:
                continue
        raise Invalid(label)

    return first


# ----------------------------------------------------------------------------- field rules models name


def as_text(value: Any, label: str) -> str | None:
    """A value kept as text, as a report prints it: a string as it is, a number as its text."""
    kind = type(value)
    if value is None:
        return None
    if kind is str:
        return typing.cast(str, value)
    if kind is int:
        return str(value)
    if kind is float:
        if not math.isfinite(value):
            raise Invalid(label)
        return repr(value)
    raise Invalid(label)


def iso_instant(text: str | None) -> dt.datetime | None:
    """ISO 8601 text (``"2024-10-07T13:53:52Z"``, ``"...+05:30"``) as an aware datetime, UTC when it names no zone;
    ``None`` when absent or not ISO 8601. For a model's property over a time kept as sent."""
    if not text:
        return None
    try:
        when = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


#: An epoch number above this is taken as milliseconds (as some services send), at or below it as seconds: the
#: library's one rule for epochs (also :func:`instant`'s). Seconds above it would be after the
#: year 5138.
MILLISECONDS_ABOVE: Final = 100_000_000_000

_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def epoch_datetime(epoch: object) -> dt.datetime | None:
    """An epoch number as an aware UTC datetime: seconds, or milliseconds above :data:`MILLISECONDS_ABOVE`
    (negative numbers are seconds before 1970). ``None`` when absent, not a number (``bool`` included, or not
    finite), or out of ``datetime``'s range (years 1 to 9999): the tolerant reading of a value a service sent, so a
    property built on it never raises. The same on every platform (no ``fromtimestamp``, whose range is the C
    library's)."""
    if isinstance(epoch, bool) or not isinstance(epoch, int | float):
        return None
    try:
        if epoch > MILLISECONDS_ABOVE:
            return _EPOCH + dt.timedelta(milliseconds=epoch)
        return _EPOCH + dt.timedelta(seconds=epoch)
    except (OverflowError, ValueError):  # out of range; a float's nan or inf
        return None


def instant(value: Any, label: str) -> dt.datetime | None:
    """The rule of a time field (``wire(parse=instant)``): ISO 8601 text (see :func:`iso_instant`) or epoch
    seconds (milliseconds recognised) as an aware datetime; ``None`` and ``""`` are none; anything else (a negative
    or infinite number, text that is not ISO 8601) does not fit."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        when = iso_instant(value)
        if when is None:
            raise Invalid(label)
        return when
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        when = epoch_datetime(value)
        if when is not None:
            return when
    raise Invalid(label)


def non_empty(value: Any, label: str) -> str:
    """A string (or a number's text) that must not be empty: ids."""
    text = _str(value, label)
    if not text:
        raise Invalid(label)
    return text


def empty_is_none(value: Any, label: str) -> str | None:
    """An optional string where ``""`` means none (paging tokens, ids the service blanks)."""
    return None if value is None else (_str(value, label) or None)


# ----------------------------------------------------------------------------- the generated structurers

_ABSENT: Final = object()


def _reader(path: tuple[str, ...], label: str) -> Callable[[dict[str, Any]], Any]:
    """Reads a dotted wire name; ``_ABSENT`` when the key (or an object on the way) is absent or ``null``."""
    if len(path) == 1:
        key = path[0]
        return lambda data: data.get(key, _ABSENT)

    def nested(data: dict[str, Any]) -> Any:
        node: Any = data
        for depth, key in enumerate(path):
            if node is None:
                return _ABSENT
            if type(node) is not dict:
                raise Invalid(".".join(path[:depth]) or label)
            node = node.get(key, _ABSENT)
            if node is _ABSENT:
                return _ABSENT
        return node

    return nested


def _declaration(field: attrs.Attribute[Any]) -> Wire:
    declared = field.metadata.get(_META)
    return declared if isinstance(declared, Wire) else Wire()


def _reader_of(names: tuple[str, ...], label: str, one_key: bool) -> Callable[[dict[str, Any]], Any] | str:
    """A plain key (read inline by the generated code), or a function for dotted names and live spellings."""
    if len(names) == 1 and "." not in names[0]:
        return names[0]
    if one_key:
        return _last_spelling(names)
    readers = [_reader(tuple(name.split(".")), label) for name in names]
    if len(readers) == 1:
        return readers[0]

    def read(data: dict[str, Any]) -> Any:
        # the first spelling that is present and not null; null if one is present only as null
        found: Any = _ABSENT
        for reader in readers:
            value = reader(data)
            if value is not _ABSENT:
                if value is not None:
                    return value
                found = None
        return found

    return read


def _last_spelling(names: tuple[str, ...]) -> Callable[[dict[str, Any]], Any]:
    """Reads the spellings of one key (``wire(..., one_key=True)``): the one present, and when more than one is,
    the last of them in the object (as a repeated key reads); ``_ABSENT`` when none is."""
    spellings = frozenset(names)

    def read(data: dict[str, Any]) -> Any:
        present = [name for name in names if name in data]
        if not present:
            return _ABSENT
        if len(present) > 1:
            return next(data[key] for key in reversed(data) if key in spellings)
        return data[present[0]]

    return read


def _structurer(cls: type[T]) -> Callable[[Any, str], T]:
    """The parsing function of an attrs model, generated once per class from its fields' declarations (as cattrs
    generates its own: straight-line code, one ``dict.get`` and one rule call per field)."""
    made: Callable[..., T] | None = _STRUCTURERS.get(cls)
    if made is not None:
        return made
    slot: list[Callable[..., T]] = []

    def structure_lazy(data: Any, label: str, given: Mapping[str, Any] | None = None) -> T:
        return slot[0](data, label, given)  # a model that contains itself sees this until it is built

    _STRUCTURERS[cls] = structure_lazy
    hints = typing.get_type_hints(cls)
    namespace: dict[str, Any] = {"A": _ABSENT, "Invalid": Invalid, "Missing": Missing, "cls": cls, "dropped": _dropped}
    lenient = bool(getattr(cls, "__wire_lenient__", False))
    lines = [
        "def structure_model(data, label, given=None):",
        f"    if data.__class__ is not dict: raise Invalid(label or {cls.__name__!r})",
        "    get = data.get",
    ]
    # positional arguments in __init__'s order (a dict of keywords per object costs more than the rest)
    args: list[str] = []
    init_names: list[str] = []
    for i, field in enumerate(attrs.fields(typing.cast(Any, cls))):
        if not field.init:
            continue
        declared = _declaration(field)
        init_names.append(field.alias or field.name)
        default = f"d{i}"
        if isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
            namespace[f"f{i}"] = field.default.factory
            default = f"f{i}()"
        else:
            namespace[default] = field.default
        args.append(f"a{i}")
        if declared.local:
            lines.append(f"    a{i} = {default}")
            continue
        names = declared.names or (field.name,)
        label = names[0]
        reader = _reader_of(names, label, declared.one_key)
        rule = declared.parse or rule_for(hints[field.name])
        inner = _INNER.get(rule)
        namespace[f"r{i}"] = inner or rule
        if isinstance(reader, str):
            lines.append(f"    v = get({reader!r}, A)")
        elif lenient and not declared.strict and field.default is not attrs.NOTHING:
            # a nested name whose parent has another shape does not fit either: read as not sent
            namespace[f"read{i}"] = reader
            lines.append(f"    try: v = read{i}(data)")
            lines.append(f"    except Invalid: dropped({cls.__name__!r}, {label!r}); v = A")
        else:
            namespace[f"read{i}"] = reader
            lines.append(f"    v = read{i}(data)")
        # a value already of the field's exact type is taken as it is, inline; the rule converts the rest
        exact = _EXACT.get(inner or rule)
        value = f"r{i}(v, {label!r})"
        if exact is not None:
            value = f"(v if v.__class__ is {exact} else {value})"
        if inner is not None:
            value = f"None if v is None else {value}"
        if field.default is attrs.NOTHING:
            lines.append(f"    if v is A: raise Missing({label!r})")
            lines.append(f"    a{i} = {value}")
        elif lenient and not declared.strict:
            lines.append(f"    if v is A: a{i} = {default}")
            lines.append("    else:")
            lines.append(f"        try: a{i} = {value}")
            lines.append(f"        except Invalid: dropped({cls.__name__!r}, {label!r}); a{i} = {default}")
        else:
            lines.append(f"    a{i} = {default} if v is A else {value}")
    namespace["init_names"] = tuple(init_names)
    lines.append(f"    if given is None: return cls({', '.join(args)})")
    lines.append(f"    return cls(**{{**dict(zip(init_names, ({', '.join(args)},))), **given}})")
    exec(compile("\n".join(lines), f"<health_async wire: {cls.__qualname__}>", "exec"), namespace)
    structure_model: Callable[..., T] = namespace["structure_model"]
    slot.append(structure_model)
    _STRUCTURERS[cls] = structure_model
    return structure_model


def _dropped(model: str, label: str) -> None:
    logger.debug("%s: field %s does not fit and is read as not sent", model, label)


_EXACT: Final[dict[Rule, str]] = {_str: "str", _int: "int", _float: "float", _bool: "bool"}
_STRUCTURERS: Final[dict[type, Callable[[Any, str], Any]]] = {}


def _error(model: str, exc: Exception) -> ResponseValidationError:
    # Name the field where known, never the value (values can be personal data).
    if isinstance(exc, Missing) and str(exc):
        return ResponseValidationError(f"the response does not fit {model}: field {exc} is missing")
    if isinstance(exc, Invalid) and str(exc):
        return ResponseValidationError(f"the response does not fit {model}: field {exc} has the wrong shape")
    return ResponseValidationError(f"the response does not fit {model}")


def structure(data: Any, cls: type[T], **given: Any) -> T:
    """Parse ``data`` (decoded JSON) as the model ``cls``; :class:`ResponseValidationError` if it does not fit.

    ``given``: values of the client's own (``local``) fields, such as the id that was asked for.
    """
    if type(data) is not dict:
        raise ResponseValidationError(f"the response does not fit {cls.__name__}: expected a JSON object")
    try:
        return _structurer(cls)(data, "", given or None)  # type: ignore[call-arg]
    except Exception as exc:
        raise _error(cls.__name__, exc) from exc


def structure_many(data: Any, cls: type[T], label: str) -> tuple[T, ...]:
    """Parse a JSON array of ``cls`` (``null`` is empty); errors name ``label`` or the field within."""
    try:
        return typing.cast("tuple[T, ...]", _tuple_of(_structurer(cls))(data, label))
    except Exception as exc:
        raise _error(cls.__name__, exc) from exc


# ----------------------------------------------------------------------------- the fast path

_FAST_DECODE_ERRORS: Final = (msgspec.ValidationError, msgspec.DecodeError, RecursionError, UnicodeDecodeError)


def fast_decoder(cls: type[T]) -> Callable[[bytes | memoryview], T | None]:
    """msgspec's decoder of ``cls`` from response bytes, or ``None`` from it when the body does not fit as it is.

    Derived from the declarations: every field of the tree must be read from its own name, but for live spellings
    of one key (``wire("svc_id", "eka_id", one_key=True)``); a field with its own rule, a nested wire name, a list
    of fallbacks or a local field cannot be decoded this way, and building the decoder fails (a model change that
    breaks the fast path shows at import).
    A body none of whose keys is a field decodes as the model of defaults: that is what an encrypted envelope or
    an error object gives, and it returns ``None`` too (the generic path tells them apart).

    Judgement call, the live spellings: msgspec has no aliases, so each live spelling becomes an attribute of its
    model that *is* the documented field's slot (``ReportItem.eka_id`` is the member descriptor of ``svc_id``),
    and msgspec is shown those extra names as fields while the decoder is built (its view of the class is cached
    in the decoder). msgspec then sets the one slot from either key, in C, white space and all. The alias is not
    a field: ``attrs.fields``, ``asdict``, ``evolve``, ``repr``, equality, pickling and msgspec's encoding never
    see it; reading ``item.eka_id`` gives ``item.svc_id``. A body that carries both spellings of one field is read
    as a repeated key: msgspec keeps the last one in the object, as the tolerant path does for ``one_key`` names,
    so the fast path needs no scan of the body for them. Known limit (found by fuzzing): a body that also repeats
    one spelling itself (``{"dt": "b", "document_type": "a", "dt": "c"}``) may read differently on the two paths,
    for a decoded dict keeps a repeated key at its first place; no producer sends that.
    """
    aliases: dict[type, dict[str, str]] = {}
    owners: dict[str, type] = {}
    seen: set[type] = set()

    def walk(model: type) -> None:
        if model in seen:
            return
        seen.add(model)
        hints = typing.get_type_hints(model)
        for field in attrs.fields(model):
            declared = _declaration(field)
            if declared.parse is not None or declared.local or not field.init:
                raise TypeError(f"{model.__name__}.{field.name}: no fast decode for a field with its own rule")
            names = declared.names or (field.name,)
            if names[0] != field.name or any("." in name for name in names):
                raise TypeError(f"{model.__name__}.{field.name}: the fast decode needs the field's own name")
            if len(names) > 1 and not declared.one_key:
                raise TypeError(f"{model.__name__}.{field.name}: fallback names are not aliases (one_key=True)")
            for name in names:
                if owners.setdefault(name, model) is not model:
                    raise TypeError(f"{name}: a wire name of two models cannot be aliased alike")
            for live in names[1:]:
                aliases.setdefault(model, {})[live] = field.name
            for inner in _models_in(hints[field.name]):
                walk(inner)

    walk(cls)
    decode = _decoder_with_aliases(cls, aliases)
    errors = _FAST_DECODE_ERRORS
    nothing = _defaults_of(cls)

    def fast(raw: bytes | memoryview) -> T | None:
        try:
            value = decode(raw)
        except errors:
            return None
        return None if value == nothing else value

    return fast


def _defaults_of(cls: type[T]) -> T | None:
    """The model of defaults (``None`` when a field is required: then no body decodes to it)."""
    try:
        return cls()
    except TypeError:
        return None


def _decoder_with_aliases(cls: type[T], aliases: Mapping[type, Mapping[str, str]]) -> Callable[[bytes | memoryview], T]:
    """msgspec's decoder of ``cls``, shown each model's live spellings as fields that alias the documented one's
    slot (see :func:`fast_decoder`). The extra fields exist only while the decoder is built; the aliases stay."""
    saved: list[tuple[type, Any, Any]] = []
    try:
        for model, names in aliases.items():
            fields = attrs.fields_dict(model)
            before = inspect.get_annotations(model)
            own = dict(before)
            hints = typing.get_type_hints(model)
            for live, name in names.items():
                slot = next((k.__dict__[name] for k in model.__mro__ if name in k.__dict__), None)
                if not isinstance(slot, types.MemberDescriptorType):
                    raise TypeError(f"{model.__name__}.{name}: the fast decode needs a slotted model")
                present = getattr(model, live, None)
                if present is not None and present is not slot:
                    raise TypeError(f"{model.__name__}.{live}: a live spelling cannot shadow an attribute")
                type.__setattr__(model, live, slot)
                own[live] = hints[name]
            extra = tuple(fields[name].evolve(name=live) for live, name in names.items())
            saved.append((model, model.__dict__["__attrs_attrs__"], before))
            type.__setattr__(model, "__attrs_attrs__", (*model.__dict__["__attrs_attrs__"], *extra))
            type.__setattr__(model, "__annotations__", own)
            if "__msgspec_cache__" in model.__dict__:  # an earlier view without the aliases
                type.__delattr__(model, "__msgspec_cache__")
        return msgspec.json.Decoder(cls).decode
    finally:
        for model, fields_before, annotations_before in saved:
            type.__setattr__(model, "__attrs_attrs__", fields_before)
            type.__setattr__(model, "__annotations__", annotations_before)


def _models_in(tp: Any) -> list[type]:
    if isinstance(tp, type) and attrs.has(tp):
        return [tp]
    return [model for arg in typing.get_args(tp) for model in _models_in(arg)]
