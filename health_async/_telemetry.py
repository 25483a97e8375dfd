"""OpenTelemetry traces and metrics that carry no id, address or number: the only module importing ``opentelemetry``.

Everything here is a no-op without the ``otel`` extra (``opentelemetry-api``): :func:`resolve` then returns
``None`` and nothing imports the package. With it, a :class:`Telemetry` asks the *global* tracer and meter
providers (``trace.get_tracer_provider()``, ``metrics.get_meter_provider()``) on first use and on every call
until the application has configured an SDK: while the global provider is still the API's own (its proxy or
no-op provider, a class of the ``opentelemetry`` API package), :meth:`Telemetry.live` is false and the session
builds no span and records nothing, which keeps a client without an SDK within a couple of microseconds of one
without telemetry. Once a real provider is found it is kept (OpenTelemetry sets a global provider once).

What is recorded is only what this module writes: operation names (the ``operation=`` the resources pass), HTTP
methods, the service's host and port, route *templates* (``/mr/api/v1/docs/{id}``, never a path), status codes,
error class names, event kinds, outcomes and refusal reasons (names chosen here), counts and durations. Never an
id, an ABHA address or number, an Aadhaar or mobile number, an OTP, a token, a key, a file name, a body, a query
string or a full URL (``url.full`` is never set). ``tests/core/test_telemetry.py`` walks every span, event,
attribute and data point for sentinel values of each.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final

from ._version import __version__
from .errors import InvalidArgumentType, InvalidRequest

if TYPE_CHECKING:
    from yarl import URL

__all__ = ["Call", "Telemetry", "available", "bulk_span", "resolve", "span", "template_of", "webhook_delivery"]

#: The instrumentation scope: the library's name (and version, given with it).
SCOPE: Final = "health_async"

#: Bucket boundaries of the HTTP client conventions for ``http.client.request.duration`` (seconds).
_DURATION_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
#: Waits last longer: a Retry-After pause is seconds to minutes.
_WAIT_BUCKETS: Final = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)

_available: bool | None = None
#: Whether the current task is a bulk run's worker (set by :meth:`bulk_span.workers`; see :class:`Call`).
_in_bulk: ContextVar[bool] = ContextVar("health_async_in_bulk", default=False)


class _api:
    """The trace API's names the hot path uses, looked up once (:func:`_load_trace`), not imported per call."""

    CLIENT: Any = None
    INTERNAL: Any = None
    ERROR: Any = None
    set_span_in_context: Any = None


def _load_trace() -> None:
    from opentelemetry import trace

    _api.CLIENT, _api.INTERNAL = trace.SpanKind.CLIENT, trace.SpanKind.INTERNAL
    _api.ERROR = trace.StatusCode.ERROR
    _api.set_span_in_context = trace.set_span_in_context


_static: frozenset[str] | None = None


def template_of(route: str | None, path: str) -> str | None:
    """The ``url.template`` of a call: its route template when given, else its path only when that is one of the
    service's fixed paths (``_routes``: no parameter in it); anything else may hold an id and is never recorded."""
    if route is not None:
        return route
    global _static
    if _static is None:
        from . import _routes

        _static = frozenset(
            value
            for name, value in vars(_routes).items()
            if name.startswith("PATH") and isinstance(value, str) and "{" not in value
        )
    return path if path in _static else None


def available() -> bool:
    """Whether ``opentelemetry-api`` can be imported (found without importing it)."""
    global _available
    if _available is None:
        try:
            _available = importlib.util.find_spec("opentelemetry.trace") is not None
        except (ImportError, ValueError):
            _available = False
    return _available


def _global_providers() -> tuple[Any, Any]:
    """The global tracer and meter providers (the tests patch this to hand in an SDK's, never setting globals)."""
    from opentelemetry import metrics, trace

    return trace.get_tracer_provider(), metrics.get_meter_provider()


_api_global_providers: Final = _global_providers
#: The API's modules holding the global providers, once a Telemetry was made (see :func:`_unset`).
_trace_api: Any = None
_metrics_api: Any = None


def _load_api() -> None:
    """Import the API's modules once, and have the providers named by environment variables loaded now (the
    API loads them on the first ``get_*_provider()``): from then on :meth:`Telemetry.live` reads the globals."""
    global _trace_api, _metrics_api
    if _trace_api is not None:
        return
    from opentelemetry import trace
    from opentelemetry.metrics import _internal as metrics_internal

    _global_providers()
    if hasattr(trace, "_TRACER_PROVIDER") and hasattr(metrics_internal, "_METER_PROVIDER"):
        _trace_api, _metrics_api = trace, metrics_internal
    else:  # pragma: no cover - another API version: ask the getters every time (slower, still right)
        _trace_api = _metrics_api = False


def _unset() -> bool:
    """Whether neither global provider is set yet (nothing would be recorded): two attribute reads, the no-SDK
    path's whole cost. Reads the API's own globals (private names, checked at :func:`_load_api`), because its
    getters cost a microsecond a call: an application without an SDK must not pay that per request."""
    return (
        _global_providers is _api_global_providers
        and _trace_api is not False
        and _trace_api._TRACER_PROVIDER is None
        and _metrics_api._METER_PROVIDER is None
    )


def _is_api_default(provider: object) -> bool:
    """Whether ``provider`` is one of the API's own (proxy or no-op): nothing would be recorded."""
    module = type(provider).__module__
    return module.startswith(("opentelemetry.trace", "opentelemetry.metrics"))


def resolve(telemetry: bool | None) -> Telemetry | None:
    """A client's :class:`Telemetry` for its ``telemetry=`` option (see ``HealthClient``), or ``None`` (off)."""
    if telemetry is None:
        return Telemetry() if available() else None
    if telemetry is False:
        return None
    if telemetry is True:
        if not available():
            raise InvalidRequest(
                "telemetry=True needs OpenTelemetry's API: pip install 'health_async[otel]' (or telemetry=None: on "
                "when it is installed)"
            )
        return Telemetry()
    raise InvalidArgumentType(f"telemetry must be True, False or None, not {type(telemetry).__name__}")


class Telemetry:
    """One client's instruments, found lazily on the global providers (:func:`_global_providers`)."""

    __slots__ = (
        "_retries",
        "_waits",
        "bulk_items",
        "duration",
        "metering",
        "tracer",
        "tracing",
        "webhooks",
    )

    def __init__(self) -> None:
        _load_api()
        self.tracer: Any = None
        self.tracing = False
        self.metering = False
        self.duration: Any = None
        self._retries: Any = None
        self._waits: Any = None
        self.webhooks: Any = None
        self.bulk_items: Any = None

    def live(self) -> bool:
        """Whether anything would be recorded: an SDK (or any real provider) is configured. Cheap once it is."""
        if self.tracing and self.metering:
            return True
        if _unset():
            return self.tracing or self.metering
        return self._resolve()

    def _resolve(self) -> bool:
        tracer_provider, meter_provider = _global_providers()
        if not self.tracing and not _is_api_default(tracer_provider):
            _load_trace()
            self.tracer = tracer_provider.get_tracer(SCOPE, __version__)
            self.tracing = True
        if not self.metering and not _is_api_default(meter_provider):
            meter = meter_provider.get_meter(SCOPE, __version__)
            self.duration = meter.create_histogram(
                "http.client.request.duration",
                unit="s",
                description="Duration of HTTP client requests (one per attempt).",
                explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
            )
            self._retries = meter.create_counter(
                "health_async.client.retries", unit="{retry}", description="Attempts sent again after a failure."
            )
            self._waits = meter.create_histogram(
                "health_async.client.wait.duration",
                unit="s",
                description="Time a call waited before sending: connection slot, rate limit, Retry-After pause.",
                explicit_bucket_boundaries_advisory=_WAIT_BUCKETS,
            )
            self.webhooks = meter.create_counter(
                "health_async.webhook.deliveries",
                unit="{delivery}",
                description="Webhook deliveries received, by event kind and outcome.",
            )
            self.bulk_items = meter.create_counter(
                "health_async.bulk.items",
                unit="{document}",
                description="Documents described or uploaded by a bulk helper or an ingest job, by outcome.",
            )
            self.metering = True
        return self.tracing or self.metering

    def call(self, operation: str) -> Call:
        """Start recording one operation (its INTERNAL span, current from now in this task's context)."""
        return Call(self, operation)


class Call:
    """One operation of the session: its span (when tracing), its attempts' CLIENT spans, its waits and retries.

    The spans are built when the operation ends, from what was noted meanwhile (each attempt's clock readings and
    attributes, each event's time), with explicit start and end times: nothing is made current while the call runs,
    and the SDK is asked for nothing until then. What a trace shows is the same as spans built live: the operation
    (INTERNAL) from its start to its end, one CLIENT child per attempt, the events at the times they happened.

    Judgement call, inside a bulk run only (``describe_many``, ``upload_many``, an ingest job's calls: see
    :class:`bulk_span`): an operation that succeeded at its first attempt without waiting is ONE span, its CLIENT
    span, carrying ``health_async.operation`` too, from the operation's start to its end, child of the run. A span
    costs the Python SDK some 10-20 us, a sixth of a describe's CPU; a bulk run of a million documents need not
    record two million spans to say that each took one attempt. An item that waited, was retried or failed keeps
    its operation span with its CLIENT children, as outside a bulk run.

    Because no span is current during the call, a span made by other instrumentation while it runs (the generic
    aiohttp instrumentation's, say) is a child of the caller's span, not of the operation's.
    """

    __slots__ = ("_attempts", "_begun", "_bulk", "_events", "_route", "_sends", "_started", "operation", "telemetry")

    def __init__(self, telemetry: Telemetry, operation: str) -> None:
        self.telemetry = telemetry
        self.operation = operation
        self._sends = 0
        self._begun = 0.0
        self._route: _Route | None = None
        #: (start ns, end ns, attributes, failed) of each attempt (tracing only)
        self._attempts: list[tuple[int, int, dict[str, Any], bool]] = []
        #: (name, attributes, time ns) of each event (tracing only)
        self._events: list[tuple[str, dict[str, Any], int]] | None = None
        if telemetry.tracing:
            self._started = time.time_ns()
            self._bulk = _in_bulk.get()
        else:
            self._started = 0
            self._bulk = False

    @property
    def span(self) -> None:
        """Always ``None``: the spans are built when the operation ends (kept for code that tested it)."""
        return None

    def end(self, error: BaseException | None) -> None:
        """End the operation: ``error`` (the library's error, or a cancellation) marks its span failed."""
        telemetry = self.telemetry
        if not telemetry.tracing:
            return
        tracer = telemetry.tracer
        ended = time.time_ns()
        attempts = self._attempts
        if (
            self._bulk
            and error is None
            and self._events is None
            and len(attempts) == 1
            and not attempts[0][3]
            and self._route is not None
        ):
            attrs = attempts[0][2]
            tracer.start_span(
                self._route.name,
                kind=_api.CLIENT,
                attributes=self._route.merged(attrs.get("http.response.status_code"), self.operation),
                start_time=self._started,
            ).end(ended)
            return
        span = tracer.start_span(
            self.operation,
            kind=_api.INTERNAL,
            attributes={"health_async.operation": self.operation},
            start_time=self._started,
        )
        if self._events is not None:
            for name, attrs, at in self._events:
                span.add_event(name, attrs, at)
        if attempts:
            assert self._route is not None
            parent = _api.set_span_in_context(span)
            name = self._route.name
            for begun, finished, attrs, failed in attempts:
                child = tracer.start_span(name, parent, kind=_api.CLIENT, attributes=attrs, start_time=begun)
                if failed:
                    child.set_status(_api.ERROR)
                child.end(finished)
            span.set_attribute("health_async.attempts", self._sends)
        if error is not None:
            span.set_attribute("error.type", _error_type(error))
            span.set_status(_api.ERROR)
        span.end(ended)

    def begin_attempt(self, method: str, url: URL, template: str | None) -> None:
        """An attempt is being sent now: its clock started (its CLIENT span is built at :meth:`end`)."""
        route = self._route
        if route is None:
            self._route = route = _route(method, url.host or "", url.port or 0, template)
        self._begun = time.monotonic()

    def end_attempt(self, status: int | None, error: BaseException | None = None) -> None:
        """The attempt's answer came (``status``) or it failed (``error``): its duration recorded, its span noted.
        An error status's ``error.type`` is the status code (the HTTP conventions); a failure's, the error's class.
        """
        elapsed = time.monotonic() - self._begun
        route = self._route
        if route is None:  # never begun: the plain way failed before sending (nothing to record)
            return
        failed = error is not None or (status is not None and status >= 400)
        if failed or self._sends:
            attrs = dict(route.attrs)
            if status is not None:
                attrs["http.response.status_code"] = status
            if failed:
                attrs["error.type"] = _error_type(error) if error is not None else str(status)
            if self._sends:
                attrs["http.request.resend_count"] = self._sends
        else:
            attrs = route.answered(status)
        self._sends += 1
        telemetry = self.telemetry
        if telemetry.metering:
            telemetry.duration.record(elapsed, attrs)
        if telemetry.tracing:
            ended = time.time_ns()
            self._attempts.append((ended - int(elapsed * 1e9), ended, attrs, failed))

    def _event(self, name: str, attrs: dict[str, Any]) -> None:
        if self._events is None:
            self._events = []
        self._events.append((name, attrs, time.time_ns()))

    def waited(self, reason: str, seconds: float) -> None:
        """A wait before sending (``reason``: ``connection_slot``, ``rate_limit``, ``shared_limit``,
        ``retry_after``): an event on the operation's span, a data point of the wait histogram."""
        telemetry = self.telemetry
        if telemetry.tracing:
            self._event(
                "health_async.wait", {"health_async.wait.reason": reason, "health_async.wait.duration": seconds}
            )
        if telemetry.metering:
            attrs = {"health_async.operation": self.operation, "health_async.wait.reason": reason}
            telemetry._waits.record(seconds, attrs)

    def retrying(self, error: BaseException | None, delay: float, attempt: int) -> None:
        """Attempt ``attempt`` failed with ``error`` and another follows in ``delay`` seconds."""
        kind = _error_type(error) if error is not None else "unknown"
        telemetry = self.telemetry
        if telemetry.tracing:
            self._event(
                "health_async.retry",
                {"health_async.retry.attempt": attempt, "health_async.retry.delay": delay, "error.type": kind},
            )
        if telemetry.metering:
            telemetry._retries.add(1, {"health_async.operation": self.operation, "error.type": kind})


class _Route:
    """What every attempt to one route shares: its span name and its attributes, built once per client process
    (the SDK copies the attributes it is given, so one dict serves every span and data point)."""

    __slots__ = ("_answered", "_merged", "attrs", "name")

    def __init__(self, method: str, host: str, port: int, template: str | None) -> None:
        self.name = method + " " + template if template is not None else method
        attrs: dict[str, Any] = {"http.request.method": method, "server.address": host, "server.port": port}
        if template is not None:
            attrs["url.template"] = template
        self.attrs = attrs
        self._answered: dict[int | None, dict[str, Any]] = {}
        self._merged: dict[tuple[int | None, str], dict[str, Any]] = {}

    def answered(self, status: int | None) -> dict[str, Any]:
        """The attributes of a first attempt answered ``status`` (a success: no ``error.type``)."""
        attrs = self._answered.get(status)
        if attrs is None:
            attrs = dict(self.attrs)
            if status is not None:
                attrs["http.response.status_code"] = status
            if len(self._answered) < _MAX_CACHED:
                self._answered[status] = attrs
        return attrs

    def merged(self, status: int | None, operation: str) -> dict[str, Any]:
        """The attributes of an operation's one span (see :class:`Call`): its successful first attempt's, answered
        ``status``, and the operation's name."""
        key = (status, operation)
        found = self._merged.get(key)
        if found is None:
            found = {**self.answered(status), "health_async.operation": operation}
            if len(self._merged) < _MAX_CACHED:
                self._merged[key] = found
        return found


#: Bounds of the per-route caches (routes are the library's own, status codes the service's: both few).
_MAX_CACHED: Final = 64
_routes_seen: dict[tuple[str, str, int, str | None], _Route] = {}


def _route(method: str, host: str, port: int, template: str | None) -> _Route:
    key = (method, host, port, template)
    route = _routes_seen.get(key)
    if route is None:
        route = _Route(method, host, port, template)
        if len(_routes_seen) < 4 * _MAX_CACHED:
            _routes_seen[key] = route
    return route


def _error_type(error: BaseException) -> str:
    """An error's class name, as the user sees it: a private subclass is named by its first public base."""
    for cls in type(error).__mro__:
        if not cls.__name__.startswith("_"):
            return cls.__name__
    return "Exception"  # pragma: no cover - object is public


_default: Telemetry | None = None


def default() -> Telemetry | None:
    """The telemetry of what has no client of its own (the records webhook receiver): on when the API is there."""
    global _default
    if _default is None and available():
        _default = Telemetry()
    return _default


@contextmanager
def span(telemetry: Telemetry | None, name: str, attributes: dict[str, Any]) -> Iterator[Any]:
    """An INTERNAL span around a block (made current in it), or nothing: yields the span or ``None``. The block's
    exception marks it failed (its class name only: ``record_exception`` would copy the message)."""
    if telemetry is None or not telemetry.live() or not telemetry.tracing:
        yield None
        return
    from opentelemetry import trace

    with telemetry.tracer.start_as_current_span(
        name, kind=trace.SpanKind.INTERNAL, attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as current:
        try:
            yield current
        except BaseException as exc:
            current.set_attribute("error.type", _error_type(exc))
            current.set_status(trace.StatusCode.ERROR)
            raise


class bulk_span:
    """A bulk helper's run: one span (not current: the run is a generator, consumed in its caller's context; its
    workers are started inside :meth:`workers`), its items counted (``items``, ``ok``, ``failed``)."""

    __slots__ = ("_telemetry", "failed", "name", "ok", "span")

    def __init__(self, telemetry: Telemetry | None, name: str) -> None:
        self._telemetry = telemetry if telemetry is not None and telemetry.live() else None
        self.name = name
        self.ok = self.failed = 0
        self.span: Any = None
        if self._telemetry is not None and self._telemetry.tracing:
            from opentelemetry import trace

            self.span = self._telemetry.tracer.start_span(
                name, kind=trace.SpanKind.INTERNAL, attributes={"health_async.operation": name}
            )

    @property
    def on(self) -> bool:
        return self._telemetry is not None

    @contextmanager
    def workers(self) -> Iterator[None]:
        """The span current while the workers are created (tasks copy the context): their calls are its children."""
        if self.span is None:
            yield
            return
        from opentelemetry import context, trace

        token = context.attach(trace.set_span_in_context(self.span))
        bulk = _in_bulk.set(True)
        try:
            yield
        finally:
            _in_bulk.reset(bulk)
            context.detach(token)

    def end(self, error: BaseException | None) -> None:
        telemetry = self._telemetry
        if telemetry is None:
            return
        if telemetry.metering:
            base = {"health_async.operation": self.name}
            if self.ok:
                telemetry.bulk_items.add(self.ok, {**base, "health_async.outcome": "ok"})
            if self.failed:
                telemetry.bulk_items.add(self.failed, {**base, "health_async.outcome": "failed"})
        span = self.span
        if span is not None:
            from opentelemetry.trace import StatusCode

            span.set_attribute("health_async.bulk.items", self.ok + self.failed)
            span.set_attribute("health_async.bulk.ok", self.ok)
            span.set_attribute("health_async.bulk.failed", self.failed)
            if error is not None:
                span.set_attribute("error.type", _error_type(error))
                span.set_status(StatusCode.ERROR)
            span.end()


class webhook_delivery:
    """One webhook delivery as its receiver answers it: a SERVER span with the event kind and the outcome, and the
    deliveries counter. ``kind`` is set once the event verified (a documented kind's name, else ``unknown``)."""

    __slots__ = ("_telemetry", "_token", "kind", "receiver", "span")

    def __init__(self, receiver: str) -> None:
        telemetry = default()
        self._telemetry = telemetry if telemetry is not None and telemetry.live() else None
        self.receiver = receiver
        self.kind: str | None = None
        self.span: Any = None
        self._token: Any = None
        if self._telemetry is not None and self._telemetry.tracing:
            from opentelemetry import context, trace

            self.span = self._telemetry.tracer.start_span(
                f"webhook {receiver}",
                kind=trace.SpanKind.SERVER,
                attributes={"health_async.webhook.receiver": receiver, "http.request.method": "POST"},
            )
            self._token = context.attach(trace.set_span_in_context(self.span))

    def end(self, status: int | None, outcome: str, reason: str | None) -> None:
        """The answer given: its status, the outcome (``accepted``, ``duplicate``, ``in_progress``, ``refused``,
        ``failed``) and a refusal's or failure's reason (a name chosen by the library, never a value)."""
        telemetry = self._telemetry
        if telemetry is None:
            return
        attrs: dict[str, Any] = {
            "health_async.webhook.receiver": self.receiver,
            "health_async.webhook.outcome": outcome,
        }
        if self.kind is not None:
            attrs["health_async.webhook.event"] = self.kind
        if reason is not None:
            attrs["health_async.webhook.reason"] = reason
        if telemetry.metering:
            telemetry.webhooks.add(1, attrs)
        span = self.span
        if span is not None:
            from opentelemetry import context
            from opentelemetry.trace import StatusCode

            try:
                span.set_attributes(attrs)
                if status is not None:
                    span.set_attribute("http.response.status_code", status)
                if outcome == "failed" or (status is not None and status >= 500 and outcome != "in_progress"):
                    span.set_status(StatusCode.ERROR)
                span.end()
            finally:
                context.detach(self._token)
