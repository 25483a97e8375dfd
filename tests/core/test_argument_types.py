"""A wrong argument type is ``InvalidRequest`` (a ``ValueError``) on every public call, before anything is sent.

The walk below goes through every public method of every resource: a new method joins it by itself, and fails it
if it is not checked. Hand-written cases after it pin what users actually pass by mistake.
"""

from __future__ import annotations

import datetime as dt
import functools
import inspect
import typing
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Mapping
from typing import Any

import pytest
from aiohttp import web

import health_async as ha
from health_async._checks import plan_of
from health_async.errors import InvalidRequest

from ..conftest import FAST_RETRY, Serve


def _namespaces(cls: type, prefix: str = "") -> list[str]:
    """The resource namespaces under ``cls`` (its cached properties), nested ones (``abdm.consents``) included."""
    found = []
    for name, attr in inspect.getmembers(cls):
        if isinstance(attr, functools.cached_property) and not name.startswith("_"):
            found.append(f"{prefix}{name}")
            returned = inspect.signature(attr.func).return_annotation
            inner = getattr(ha.resources, returned, None) if isinstance(returned, str) else returned
            if isinstance(inner, type):
                found += _namespaces(inner, f"{prefix}{name}.")
    return found


#: Every resource namespace of the client, nested ones included, found (a new one joins the walk by itself).
RESOURCES = tuple(_namespaces(ha.HealthClient))


def _resolve(client: ha.HealthClient, resource: str) -> Any:
    target: Any = client
    for part in resource.split("."):
        target = getattr(target, part)
    return target


def _resource_class(resource: str) -> type:
    """The class behind ``client.<resource>`` (a client made without a network, never opened)."""
    client = ha.HealthClient(base_url="http://127.0.0.1:9", client_id="c", token="t")
    return type(_resolve(client, resource))


METHODS = [
    (r, n, f)
    for r in RESOURCES
    for n, f in inspect.getmembers(_resource_class(r), inspect.isfunction)
    if not n.startswith("_")
]


def _sample(kinds: tuple[type, ...] | None) -> Any:
    """A value of the right type (not necessarily a valid one: the type check runs first)."""
    if kinds is None:
        return "x"
    kind = kinds[0]
    for plain, value in ((str, "x"), (bool, False), (int, 1), (float, 1.0), (dt.datetime, dt.datetime(2024, 1, 2))):
        if kind is plain:
            return value
    if kind is dt.date:
        return dt.date(2024, 1, 2)
    if kind in (Iterable, AsyncIterable, Mapping) or kind is dict:
        return {}
    if kind is type(None):
        return None
    if kind is typing.cast(type, Callable):
        return print
    return object.__new__(kind)


WRONG: tuple[Any, ...] = (None, 12345, "12345", 1.5, True, object())


def _is(value: Any, kinds: tuple[type, ...]) -> bool:
    if isinstance(value, bool) and bool not in kinds:
        return False
    return isinstance(value, kinds)


def test_every_public_method_checks_its_argument_types() -> None:
    assert {"documents", "abha", "profiles", "patients", "cases", "abdm", "abdm.consents"} <= set(RESOURCES)
    assert len(METHODS) > 40
    unchecked = [f"{r}.{n}" for r, n, f in METHODS if not getattr(f, "__health_checked__", False)]
    assert unchecked == []
    for _, _, func in METHODS:
        plan_of(func)  # every annotation has a runtime check


@pytest.fixture
async def counting(serve: Serve) -> AsyncIterator[tuple[ha.HealthClient, list[str]]]:
    seen: list[str] = []

    async def anything(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.json_response({}, status=500)

    url = await serve({("*", "/{tail:.*}"): anything})
    async with ha.HealthClient(base_url=url, client_id="c", token="t", user_id="u", retry=FAST_RETRY) as client:
        yield client, seen


async def _call(client: ha.HealthClient, resource: str, name: str, kwargs: dict[str, Any]) -> None:
    result = getattr(_resolve(client, resource), name)(**kwargs)
    if inspect.isawaitable(result):
        await result
    elif isinstance(result, AsyncIterator):
        await result.__anext__()


@pytest.mark.parametrize(("resource", "name", "func"), METHODS, ids=[f"{r}.{n}" for r, n, _ in METHODS])
async def test_a_wrong_type_is_invalid_request_naming_the_parameter_and_nothing_is_sent(
    counting: tuple[ha.HealthClient, list[str]], resource: str, name: str, func: Callable[..., Any]
) -> None:
    client, seen = counting
    plan = plan_of(func)
    required = {
        p.name: _sample(plan.by_name[p.name][0])
        for p in list(inspect.signature(func).parameters.values())[1:]
        if p.default is p.empty and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    }
    tried = 0
    for param, (kinds, _) in plan.by_name.items():
        for value in WRONG:
            if kinds is None or _is(value, kinds):
                continue
            with pytest.raises(InvalidRequest) as info:
                await _call(client, resource, name, {**required, param: value})
            assert str(info.value).startswith(f"{param} must be "), (param, value)
            assert "12345" not in str(info.value)  # the type is named, never the value
            tried += 1
    assert tried > 0 or not plan.by_name
    assert seen == []


# --------------------------------------------------------------------------- what users pass by mistake


MISTAKES: list[tuple[str, str, dict[str, Any]]] = [
    ("documents", "describe", {"document_id": None}),
    ("documents", "describe", {"document_id": 1234}),
    ("documents", "delete", {"document_id": 1234}),
    ("documents", "upload", {"file": None}),
    ("documents", "upload", {"file": b"%PDF-", "tasks": 5}),
    ("documents", "list", {"updated_after": "2024-01-01"}),
    ("documents", "describe_many", {"ids": ["a"], "concurrency": "8"}),
    ("abha", "aadhaar_init", {"aadhaar_number": 234123412346}),
    ("abha", "mobile_init", {"mobile": 9876543210}),
    ("abha", "login_verify", {"txn_id": "t", "otp": 123456}),
    ("abha", "address_exists", {"abha_address": None}),
    ("patients", "get", {"oid": 7}),
    ("patients", "search", {"prefix": "ab", "limit": "10"}),
    ("patients", "list", {"page_size": 2.5}),
    ("profiles", "get", {"oid": None}),
    ("cases", "create", {"display_name": 5, "occurred_at": dt.date(2024, 1, 2)}),
    ("cases", "create", {"display_name": "Visit", "occurred_at": "2024-01-02"}),
]


@pytest.mark.parametrize(("resource", "name", "kwargs"), MISTAKES, ids=[f"{r}.{n}" for r, n, _ in MISTAKES])
async def test_common_mistakes_are_value_errors_before_sending(
    counting: tuple[ha.HealthClient, list[str]], resource: str, name: str, kwargs: dict[str, Any]
) -> None:
    client, seen = counting
    with pytest.raises(ValueError, match="must be"):
        await _call(client, resource, name, kwargs)
    assert seen == []


def test_the_error_is_also_a_type_error_for_code_that_caught_one() -> None:
    assert issubclass(ha.InvalidArgumentType, ha.InvalidRequest)
    assert issubclass(ha.InvalidArgumentType, ValueError)
    assert issubclass(ha.InvalidArgumentType, TypeError)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"token": "t", "retry": 3},
        {"token": "t", "session": "http"},
        {"token": "t", "limiter": object()},
        {"token_provider": "secret-token"},
    ],
    ids=["retry", "session", "limiter", "token_provider"],
)
def test_the_client_refuses_a_wrong_type_the_same_way(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ha.InvalidRequest, match=r"must|takes") as info:
        ha.HealthClient(base_url="http://127.0.0.1:9", client_id="c", **kwargs)
    assert "secret-token" not in str(info.value)
