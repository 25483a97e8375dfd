"""Argument types checked from the annotations, at the call: the one place where a wrong type becomes
:class:`~health_async.errors.InvalidRequest`.

Every public method of a resource wears :func:`checked`. Before the method runs (so before anything is sent), each
argument the caller passed is checked against the method's own annotation: ``None`` where the annotation does
not allow it, an ``int`` for a ``str`` id, a ``str`` for a count, a ``bool`` for a number... raise
``InvalidRequest("<name> must be a str, not int")``, naming the parameter and the type, never the value (it may
be an Aadhaar number or a token). What a value must look like beyond its type (an OTP's six digits, a path
segment's characters) stays with each method, next to the rule it follows.

Judgement calls:

* Only what the caller passed is checked: defaults are the library's own.
* An unknown keyword stays Python's ``TypeError`` (a programming error mypy already reports), not
  ``InvalidRequest``.
* Containers are checked as containers (``Iterable``, ``Mapping``, ``Callable``); their items are checked by the
  method, which names the item.
* An async generator method becomes a plain function that checks, then returns the generator: the error comes
  at the call, not at the first ``async for`` step.
* Annotations are resolved at the first call (some name types imported only for type checkers); the plan is
  cached on the wrapper. :func:`plan_of` resolves it eagerly, for the test that walks every method.
"""

from __future__ import annotations

import abc
import datetime as dt
import enum
import functools
import inspect
import os
import types
import typing
from collections.abc import AsyncIterable, Callable, Iterable, Mapping, Sequence
from typing import IO, Any, Final, TypeVar, cast

from .errors import InvalidArgumentType

__all__ = ["checked", "plan_of"]

F = TypeVar("F", bound=Callable[..., Any])

#: A check: (the types an argument may have, what the message calls them). ``None`` types: anything goes.
Check = tuple["tuple[type, ...] | None", str]

_ANY: Final[Check] = (None, "anything")
_ABC_NAMES: Final = {
    Iterable: "an iterable",
    AsyncIterable: "an async iterable",
    Mapping: "a mapping",
    Sequence: "a sequence",
}


class _Readable(abc.ABC):  # noqa: B024 - an ABC only for its __subclasshook__
    """Stands for ``IO``/``BinaryIO`` in a check: any object with a ``read`` method."""

    @classmethod
    def __subclasshook__(cls, other: type) -> bool:
        return callable(getattr(other, "read", None)) or NotImplemented


def _types_of(annotation: Any) -> tuple[list[type], list[str]] | None:
    """The runtime types an annotation allows, with their names; ``None`` when anything goes."""
    if annotation is Any or annotation is object:
        return None
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        kinds: list[type] = []
        names: list[str] = []
        for arg in typing.get_args(annotation):
            got = _types_of(arg)
            if got is None:
                return None
            kinds += got[0]
            names += got[1]
        return kinds, names
    if origin is typing.Literal:
        values = typing.get_args(annotation)
        literal_types = sorted({type(v) for v in values}, key=lambda t: t.__name__)
        return list(literal_types), [_name(t) for t in literal_types]
    if annotation is None or annotation is type(None):
        return [type(None)], ["None"]
    base = origin if origin is not None else annotation
    if base in _ABC_NAMES:
        return [base], [_ABC_NAMES[base]]
    if base is Callable:
        return [cast(type, Callable)], ["a callable"]
    if base in (IO, typing.BinaryIO, typing.TextIO):
        return [_Readable], ["a binary file object"]
    if base is os.PathLike:
        return [os.PathLike], ["a path"]
    if isinstance(base, type):
        if typing.is_typeddict(base):
            return [dict], ["a dict"]
        return [base], [_name(base)]
    raise TypeError(f"no runtime check for the annotation {annotation!r}")  # a library bug: the test finds it


def _name(kind: type) -> str:
    if kind is type(None):
        return "None"
    if kind is dt.date:
        return "a datetime.date"
    if kind is dt.datetime:
        return "a datetime.datetime"
    if issubclass(kind, enum.Enum):
        return kind.__name__
    return _NAMES.get(kind, kind.__name__)


_NAMES: Final[dict[type, str]] = {str: "a str", int: "an int", float: "a float", bool: "a bool", bytes: "bytes"}


def _check_of(annotation: Any) -> Check:
    got = _types_of(annotation)
    if got is None:
        return _ANY
    kinds, names = got
    if float in kinds and int not in kinds:
        kinds.append(int)  # an int is a float (PEP 484's numeric tower)
    unique = list(dict.fromkeys(names))
    said = unique[0] if len(unique) == 1 else ", ".join(unique[:-1]) + " or " + unique[-1]
    return tuple(dict.fromkeys(kinds)), said


class _Plan:
    """The checks of one function: by position (after ``self``) and by keyword."""

    __slots__ = ("by_name", "positional")

    def __init__(self, func: Callable[..., Any]) -> None:
        hints = typing.get_type_hints(func)
        positional: list[tuple[str, Check]] = []
        by_name: dict[str, Check] = {}
        for param in list(inspect.signature(func).parameters.values())[1:]:
            annotation = hints.get(param.name, Any)
            if param.kind is param.VAR_KEYWORD:
                unpacked = typing.get_args(annotation)
                if typing.get_origin(annotation) is typing.Unpack and unpacked:
                    for key, value in typing.get_type_hints(unpacked[0]).items():
                        by_name[key] = _check_of(value)
                continue
            if param.kind is param.VAR_POSITIONAL:
                continue
            check = _check_of(annotation)
            if param.kind is not param.KEYWORD_ONLY:
                positional.append((param.name, check))
            by_name[param.name] = check
        self.positional: tuple[tuple[str, Check], ...] = tuple(positional)
        self.by_name = by_name

    def check(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        for (name, check), value in zip(self.positional, args[1:], strict=False):
            _one(name, check, value)
        by_name = self.by_name
        for name, value in kwargs.items():
            found = by_name.get(name)
            if found is not None:
                _one(name, found, value)


def _one(name: str, check: Check, value: Any) -> None:
    kinds, said = check
    if kinds is None or (isinstance(value, kinds) and ((value is not True and value is not False) or bool in kinds)):
        return
    raise InvalidArgumentType(f"{name} must be {said}, not {_name(type(value))}")


def plan_of(func: Callable[..., Any]) -> _Plan:
    """The checks :func:`checked` applies to ``func`` (resolved now; raises ``TypeError`` for an annotation that
    has no runtime check)."""
    plan = getattr(func, "__health_checks__", None)
    if plan is None:
        plan = _Plan(inspect.unwrap(func))
        func.__health_checks__ = plan  # type: ignore[attr-defined]
    return cast(_Plan, plan)


def checked(func: F) -> F:
    """Check the types of the arguments a caller passes to ``func`` against its annotations (see the module)."""
    plan: list[_Plan] = []

    def check(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if not plan:
            plan.append(plan_of(wrapper))
        plan[0].check(args, kwargs)

    wrapper: Callable[..., Any]
    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            check(args, kwargs)
            return await func(*args, **kwargs)

    else:

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            check(args, kwargs)
            return func(*args, **kwargs)

    wrapper.__health_checked__ = True  # type: ignore[attr-defined]
    return cast(F, wrapper)
