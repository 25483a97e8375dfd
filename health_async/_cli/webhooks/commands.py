"""``health-async webhooks ...``: a local webhook receiver for development (``serve``), and the subscriptions that
tell the service where to send its webhooks (``subscribe``, ``list``, ``unsubscribe``).

::

    health-async webhooks serve --secret S [--host 127.0.0.1] [--port 8080] [--path /webhooks]
                                [--forward URL] [--show-data] [--record-links JOURNAL]
                                [--discover-from PATIENTS.json [connection flags]]
    health-async webhooks subscribe URL --event EVENT [--event EVENT ...] [--allow-unknown-event]
                                    [--show-secret] [--json]
    health-async webhooks list [--json] [--show-secret]
    health-async webhooks unsubscribe ID [--json]

Serves ``POST PATH`` with the library's own handler, :func:`health_async.webhooks.aiohttp_handler`, so a webhook
is checked exactly as an application using the library checks it (signature, timestamp, size, replays) and a
refused one is answered as it answers it (400 ``webhook refused``, 413, 405, a replay 200 without running; the
reason is logged by the library at WARNING, which reaches stderr). Each verified event is printed as one JSON line
on stdout: ``event``, ``kind``, ``service``, ``event_time``, ``signed_at``, the parsing ``status`` and
``document_id`` when the event has them, and for ``abha.link_care_context`` the link's ``link_status``,
``care_context_id`` and ``link_error``. The event's ``data`` (names, ABHA addresses, FHIR data: personal data) is
printed only with ``--show-data``.

``--forward URL`` POSTs each verified webhook, the same raw body with the same ``Eka-Webhook-Signature`` header,
to URL (your application, e.g. ``http://127.0.0.1:8000/webhooks``; plain ``http://`` only to a loopback host), and
adds the outcome to the event's line: ``"forward": {"status": 200}`` or ``"forward": {"error": {...}}``. A failed
forward never stops the server. Judgement call: the sender is answered 200 whatever the forward did: the relay
took the webhook; the forward's outcome is for the developer to read, and mirroring a 500 would make the service
deliver again to a relay that already showed the event.

``--record-links JOURNAL`` records each ``abha.link_care_context`` outcome against the journal of an
``ingest link`` job (:class:`health_async.ingest.LinkRecorder`), so that ``ingest status`` shows linked /
errored / waiting and the next run settles links of unknown outcome by it; the line gets ``"recorded": true``
when the care context is the job's. A webhook that cannot be recorded (the journal missing or unwritable) is
answered 500, so the service delivers it again.

``--discover-from PATIENTS.json`` answers a patient's own search (a PHR app looking for their records at your
facility: the ``abha.care_context_discover``, ``..._link_init`` and ``..._link_confirm`` webhooks) with
:func:`health_async.webhooks.abdm_handler` and the callbacks of :class:`DiscoverFromFile`, so the flow can be tried
locally before your own ``on_discover`` exists. The file is ``{"patients": [...]}``, each patient ``{"reference",
"name", "mobile", "abha_address", "gender", "year_of_birth", "care_contexts": [{"care_context_id", "display",
"hi_type"}]}`` (a mobile or an ABHA address required; gender and year of birth optional), checked by the library's
rules before the server starts (exit 2 naming the field, never its value). A discovery finds a patient by the same
ABHA address, or by the same mobile and name (and gender and year of birth where the file gives them): exactly one,
else no match (ABDM's rule: never guess). A care context linked during the run is not offered again. The answers
are calls to the service, so this needs the connection flags or ``HEALTH_ASYNC_*`` (exit 2 without credentials).
Each step adds a JSON line to stdout, after its event's: ``{"linking": "discover", "hip_id", "searched": {...},
"matches", "reference", "offered"}``, ``{"linking": "otp_sent", "hip_id", "mobile", "care_contexts"}`` and
``{"linking": "linked", "hip_id", "reference", "abha_address", "care_contexts"}``: the mobile (``XXXXXX5678``), the
ABHA address (``me***@sbx``) and the name (``M*** K***``) masked; the care context ids and your patient reference
are your own ids, shown. Judgement call, the OTP: this is a development server, so the OTP is printed to **stderr**
(``webhooks: DEVELOPMENT ONLY: the linking OTP for XXXXXX5678 is 123456 ...``), never stdout, for the developer to
type into the PHR app; a hospital's ``on_link_otp`` texts it and never prints it. A refused step (a wrong OTP,
``OTP_MISMATCH``) is logged by the library at INFO: ``HEALTH_ASYNC_LOG=info`` shows it on stderr.

The secret comes from ``--secret`` or ``HEALTH_ASYNC_WEBHOOK_SECRET`` (prefer the environment: a flag shows in the
process list); it is never printed. Runs until Ctrl-C or SIGTERM, then stops listening, lets the webhooks in flight
finish (a few seconds at most) and exits 130 (Ctrl-C) or 143 (SIGTERM), as ``fake-server`` and ``ingest`` report
an interruption. Exit 2: no secret, a bad option, or the address cannot be bound (one line on stderr).

``serve`` needs no account. :func:`serve` is the server itself, stopped by an :class:`asyncio.Event` and reporting
its URL when listening (``--port 0`` picks a free port): tests run it in-process.

**Subscriptions** (``client.webhook_subscriptions``; the rules are the library's, see
:mod:`health_async.resources.webhooks.subscriptions`):

* ``subscribe URL --event EVENT ...`` (``--event`` repeatable, or comma-separated) registers URL for the events:
  https, or plain http only to a loopback host; each event a documented name (``--allow-unknown-event`` lets a
  newer one through). Prints ``webhook subscription ID created: URL (EVENTS)`` (``--json``: ``{"id", "url",
  "events", "status"}``). The signing key is :data:`ENV_WEBHOOK_SECRET` when set (the secret ``serve`` verifies
  with, so the two agree; 16 to 256 printable ASCII characters, else exit 2), else a new random one. It is a
  secret: printed only with ``--show-secret`` (a ``signing key: ...`` line, or ``"signing_key"`` in the JSON);
  otherwise stderr says where it is (the environment variable, or ``webhooks list --show-secret``: the service's
  listing returns it).
* ``list`` prints a table of id, url, events, signed (whether the service holds a signing key) and created_at
  (``--json``: one object per subscription); ``--show-secret`` adds each signing key.
* ``unsubscribe ID`` deletes one (``webhook subscription ID deleted``; ``--json``: ``{"id", "deleted": true}``).

``subscribe`` and ``unsubscribe`` are sent once, never retried once they may have reached the service: when the
outcome is unknown the command says so with a hint (check ``webhooks list`` first) and exits 1. Exit status: 0
done; 1 the service refused or failed (an unknown id to ``unsubscribe`` included), or the outcome is unknown; 2
bad usage: a rule of the library broken (nothing sent: one line on stderr), no credentials.

How the subscription commands get their client (judgement call): ``cli.run`` decides per *command* whether to
build a client (:data:`NO_CLIENT`), and ``webhooks`` must stay in it: ``serve`` is used without any account
(against the fake service, before credentials exist) and must not fail for want of a token. Rather than teach
``cli.run`` a per-subcommand rule that every domain module would then have to follow, the three account
subcommands (and ``serve --discover-from``, which answers by calls) build their own client here with
:func:`~health_async._cli._output.make_client`, the one every command uses, from the same connection flags
(``--base-url``, ``--token``, ... added to them and to ``serve``) and the same ``HEALTH_ASYNC_*`` environment, as
``ingest`` does with its ``EnvClientFactory``; it is closed when the subcommand ends.

How the raw body reaches the forward: the library's handler reads the body itself and gives its callback only the
:class:`~health_async.webhooks.WebhookEvent`. The handler is given a view of the request (:class:`_Tee`) that
keeps a copy of the bytes it reads; the callback, run only after the webhook verified, finds that copy through a
context variable. Nothing of the signature check is done here.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import os
import re
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import IO, Any, Final, cast
from urllib.parse import urlsplit

import aiohttp
import attrs
from aiohttp import web
from multidict import CIMultiDictProxy

from ... import _json, webhooks
from ..._client import HealthClient
from ..._config import _is_loopback
from ..._mobile import mask_mobile
from ...errors import HealthError, InvalidRequest, NotFoundError, OutcomeUnknown
from ...models import CareContext, CareContextDiscover, DiscoverLinkInit, MatchedPatient, WebhookSubscription
from ...resources.abdm._user_linking import discovered_patients
from ...resources.webhooks.subscriptions import DOCUMENTED_EVENTS, check_signing_key
from .._output import Command, InputError, emit, make_client, open_input, port, report_error

__all__ = ["ENV_WEBHOOK_SECRET", "FORWARD_TIMEOUT", "NO_CLIENT", "add_commands", "serve"]

#: Commands of this module that run without a HealthClient built by ``cli.run`` (they get ``None``).
NO_CLIENT: frozenset[str] = frozenset({"webhooks"})

#: Where the signing secret is read from when ``--secret`` is not given.
ENV_WEBHOOK_SECRET: Final = "HEALTH_ASYNC_WEBHOOK_SECRET"
#: Seconds a forward may take in all (the sender is waiting for our answer meanwhile).
FORWARD_TIMEOUT: Final = 10.0
#: Seconds the webhooks in flight get to finish when the server stops.
SHUTDOWN_TIMEOUT: Final = 5.0


# ------------------------------------------------------------------------ the raw body, kept for the forward


class _TeeStream:
    """The request's body stream, keeping a copy of every byte read through it."""

    def __init__(self, stream: aiohttp.StreamReader, copy: bytearray) -> None:
        self._stream, self._copy = stream, copy

    async def read(self, n: int = -1) -> bytes:
        chunk = await self._stream.read(n)
        self._copy += chunk
        return chunk

    async def readany(self) -> bytes:
        chunk = await self._stream.readany()
        self._copy += chunk
        return chunk

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _Tee:
    """A request as the library's handler sees it: the same in every respect, except that the bytes of the body
    it reads (``request.content.read``, ``readany``, or ``request.read``) are also kept in :attr:`body`."""

    def __init__(self, request: web.Request) -> None:
        self._request = request
        self.body = bytearray()
        self.content = _TeeStream(request.content, self.body)

    async def read(self) -> bytes:
        body = await self._request.read()
        self.body[:] = body
        return body

    def __getattr__(self, name: str) -> Any:
        return getattr(self._request, name)


_REQUEST: contextvars.ContextVar[_Tee | None] = contextvars.ContextVar("health_async_webhook_request", default=None)


# ------------------------------------------------------------------------ output


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def event_line(event: webhooks.WebhookEvent, *, show_data: bool) -> dict[str, Any]:
    """What is printed of a verified event: no personal data unless ``show_data`` (then its ``data`` too)."""
    line: dict[str, Any] = {
        "event": event.event,
        "kind": event.kind.value,
        "service": event.service,
        "event_time": _iso(event.event_time),
        "signed_at": _iso(event.signed_at),
    }
    if event.status is not None:
        line["status"] = event.status.value
    if event.document_id is not None:
        line["document_id"] = event.document_id
    if event.kind is webhooks.EventKind.LINK_CARE_CONTEXT:
        try:
            result = event.link_result()
        except HealthError:  # a data object that does not fit: the event is still shown
            line.update(link_status=None, care_context_id=None)
        else:
            line.update(link_status=result.status.value, care_context_id=result.care_context_id)
            if result.error is not None:
                line["link_error"] = result.error
    if show_data:
        line["data"] = event.data
    return line


# ------------------------------------------------------------------------ a patient's own search (development)


@attrs.frozen
class FilePatient:
    """One patient of a ``--discover-from`` file: what a discovery is matched against, and what it offers."""

    reference: str = attrs.field(repr=False)
    name: str = attrs.field(repr=False)
    care_contexts: tuple[CareContext, ...] = attrs.field(repr=lambda v: f"<{len(v)}>")
    mobile: str | None = attrs.field(default=None, repr=False)
    abha_address: str | None = attrs.field(default=None, repr=False)
    gender: str | None = attrs.field(default=None, repr=False)
    year_of_birth: int | None = attrs.field(default=None, repr=False)


def _optional_text(item: dict[str, Any], key: str, where: str) -> str | None:
    value = item.get(key)
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise InvalidRequest(f"{where}.{key} must be a non-empty string when given")
    return value


def load_patients(source: str) -> tuple[FilePatient, ...]:
    """The patients of a ``--discover-from`` file (see the module), every rule checked before the server starts:
    :class:`InputError` when it cannot be read, :class:`InvalidRequest` naming the field (never its value)."""
    stream = open_input(source)
    try:
        raw = stream.read()
    except OSError as exc:
        raise InputError(f"the --discover-from file cannot be read ({exc.strerror or type(exc).__name__})") from None
    finally:
        if stream is not sys.stdin and stream is not getattr(sys.stdin, "buffer", None):
            stream.close()
    try:
        document = _json.loads(raw)
    except ValueError:
        raise InvalidRequest("--discover-from: the file is not JSON") from None
    items = document.get("patients") if isinstance(document, dict) else None
    if not isinstance(items, list):
        raise InvalidRequest('--discover-from: the file must be a JSON object {"patients": [...]}')
    patients: list[FilePatient] = []
    references: set[str] = set()
    for i, item in enumerate(items):
        where = f"--discover-from: patients[{i}]"
        if not isinstance(item, dict):
            raise InvalidRequest(f"{where} must be a JSON object")
        contexts = item.get("care_contexts")
        if not isinstance(contexts, list) or not all(isinstance(c, dict) for c in contexts):
            raise InvalidRequest(f"{where}.care_contexts must be a list of JSON objects")
        offered = tuple(CareContext(c.get("care_context_id"), c.get("display"), c.get("hi_type")) for c in contexts)
        mobile = _optional_text(item, "mobile", where)
        abha_address = _optional_text(item, "abha_address", where)
        gender = _optional_text(item, "gender", where)
        year = item.get("year_of_birth")
        if year is not None and (type(year) is not int or not 1800 <= year <= 9999):
            raise InvalidRequest(f"{where}.year_of_birth must be a year (a whole number) when given")
        if mobile is None and abha_address is None:
            raise InvalidRequest(f"{where} needs a mobile or an abha_address to be found by")
        try:  # the library's own rules of a discovery answer (reference, display: the name, every care context)
            reference: Any = item.get("reference")
            name: Any = item.get("name")
            discovered_patients(MatchedPatient(reference, name, offered), where)
        except InvalidRequest as exc:
            raise InvalidRequest(str(exc).replace(f"{where}.display", f"{where}.name")) from None
        if item["reference"] in references:
            raise InvalidRequest(f"{where}.reference repeats another patient's")
        references.add(item["reference"])
        patients.append(FilePatient(item["reference"], item["name"], offered, mobile, abha_address, gender, year))
    return tuple(patients)


def _loose_name(value: str | None) -> str:
    return " ".join((value or "").casefold().split())


def _last_ten(value: str | None) -> str:
    digits = "".join(ch for ch in value or "" if ch.isdigit())
    return digits[-10:]


def matches(patient: FilePatient, request: CareContextDiscover) -> bool:
    """Whether a discovery finds ``patient``: the same ABHA address (case ignored); or the same mobile (its last
    ten digits) and name (case and spacing ignored), and the same gender and year of birth where the file gives
    them."""
    if patient.abha_address and request.abha_address:
        if patient.abha_address.casefold() == request.abha_address.casefold():
            return True
    mobile = _last_ten(request.identifier("MOBILE"))
    if not patient.mobile or not mobile or _last_ten(patient.mobile) != mobile:
        return False
    if _loose_name(patient.name) != _loose_name(request.patient_name):
        return False
    if patient.gender is not None and (request.gender or "").upper() != patient.gender.upper():
        return False
    return patient.year_of_birth is None or patient.year_of_birth == request.year_of_birth


def mask_abha_address(value: str | None) -> str | None:
    """``me***@sbx``: the first two characters of an ABHA address and its domain, for display."""
    if not value:
        return None
    local, at, domain = value.partition("@")
    return f"{local[:2]}***{at}{domain}"


def mask_name(value: str | None) -> str | None:
    """``M*** K***``: each word's initial, for display."""
    if not value:
        return None
    return " ".join(f"{word[0]}***" for word in value.split())


class DiscoverFromFile:
    """The callbacks ``serve --discover-from`` gives :func:`health_async.webhooks.abdm_handler`: a search of the
    file's patients, an OTP "sender" that prints the OTP to stderr (development only), and a line for each link.
    A care context linked during the run is not offered again (as a hospital offers only unlinked ones)."""

    def __init__(self, patients: tuple[FilePatient, ...], out: IO[str], err: IO[str]) -> None:
        self._patients, self._out, self._err = patients, out, err
        self._linked: set[tuple[str, str]] = set()  # (reference, care_context_id)

    async def on_discover(self, request: CareContextDiscover) -> MatchedPatient | None:
        """The one patient of the file the discovery finds, with the care contexts not linked yet; ``None`` when
        none or several are found (ABDM's rule: never guess)."""
        found = [p for p in self._patients if matches(p, request)]
        patient = found[0] if len(found) == 1 else None
        offered = (
            ()
            if patient is None
            else tuple(
                cc for cc in patient.care_contexts if (patient.reference, cc.care_context_id) not in self._linked
            )
        )
        emit(
            {
                "linking": "discover",
                "hip_id": request.hip_id,
                "searched": {
                    "abha_address": mask_abha_address(request.abha_address),
                    "name": mask_name(request.patient_name),
                    "mobile": mask_mobile(request.identifier("MOBILE") or "") or None,
                    "gender": request.gender,
                    "year_of_birth": request.year_of_birth,
                },
                "matches": len(found),
                "reference": None if patient is None else patient.reference,
                "offered": [cc.care_context_id for cc in offered],
            },
            self._out,
        )
        if patient is None:
            return None
        return MatchedPatient(patient.reference, patient.name, offered, mobile=patient.mobile)

    async def on_link_otp(self, mobile: str, otp: str, request: DiscoverLinkInit) -> None:
        """Development only: print the OTP to stderr, where a hospital's sender would text it."""
        chosen = [ref.reference_number for p in request.patients for ref in p.care_contexts]
        emit(
            {"linking": "otp_sent", "hip_id": request.hip_id, "mobile": mask_mobile(mobile), "care_contexts": chosen},
            self._out,
        )
        self._err.write(
            f"webhooks: DEVELOPMENT ONLY: the linking OTP for {mask_mobile(mobile)} is {otp} (a hospital's "
            "on_link_otp texts it and never prints it)\n"
        )
        self._err.flush()

    async def on_linked(self, link: webhooks.PendingLink) -> None:
        """A line for the link (the ABHA address masked); its care contexts are not offered again."""
        for cc in link.care_contexts:
            self._linked.add((link.reference, cc.care_context_id))
        emit(
            {
                "linking": "linked",
                "hip_id": link.hip_id,
                "reference": link.reference,
                "abha_address": mask_abha_address(link.abha_address),
                "care_contexts": [cc.care_context_id for cc in link.care_contexts],
            },
            self._out,
        )


# ------------------------------------------------------------------------ the server


def _forward_url(url: str) -> str:
    """``--forward``: an http(s) URL with a host; plain http only to a loopback host (webhooks carry personal
    data). :class:`InvalidRequest` (exit 2) otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidRequest("--forward must be an http(s) URL with a host, like http://127.0.0.1:8000/webhooks")
    if parts.scheme == "http" and not _is_loopback(parts.hostname):
        raise InvalidRequest(
            "--forward uses plain http:// to a non-loopback host: use https:// (webhooks carry personal data)"
        )
    return url


def _secret(args: argparse.Namespace) -> str:
    secret = args.secret if args.secret is not None else os.environ.get(ENV_WEBHOOK_SECRET)
    if not secret:
        raise InvalidRequest(f"webhooks serve needs the signing secret: --secret or {ENV_WEBHOOK_SECRET}")
    return secret


async def _forward(session: aiohttp.ClientSession, url: str, body: bytes, headers: CIMultiDictProxy[str]) -> Any:
    """POST the webhook as received; its outcome for the event's line (never raises, but for cancellation)."""
    sent = {
        "Content-Type": headers.get("Content-Type", "application/json"),
        webhooks.SIGNATURE_HEADER: headers.get(webhooks.SIGNATURE_HEADER, ""),
    }
    try:
        async with session.post(url, data=body, headers=sent, allow_redirects=False) as response:
            await response.read()
            return {"status": response.status}
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a refused connection, a timeout, a broken answer: shown, the server goes on
        return {"error": {"type": type(exc).__name__, "message": str(exc)}}


async def serve(
    args: argparse.Namespace,
    *,
    stop: asyncio.Event,
    on_ready: Callable[[str], None] | None = None,
    out: IO[str] | None = None,
    err: IO[str] | None = None,
) -> int:
    """Serve webhooks (see the module) until ``stop`` is set; ``on_ready(url)`` once listening, with the bound
    port. Returns 0 once stopped, 2 when the address cannot be bound; :class:`InvalidRequest` for no secret or a
    bad ``--forward``."""
    stdout, stderr = out or sys.stdout, err or sys.stderr
    forward = _forward_url(args.forward) if args.forward is not None else None
    show_data: bool = args.show_data
    session: aiohttp.ClientSession | None = None
    recorder = None
    if getattr(args, "record_links", None):
        from ...ingest import LinkRecorder  # the ingest subpackage only when asked for (no cycle: it never imports us)

        recorder = LinkRecorder(args.record_links)
    source = getattr(args, "discover_from", None)
    patients = load_patients(source) if source is not None else None  # before listening: a bad file is exit 2

    async def on_event(event: webhooks.WebhookEvent) -> None:
        line = event_line(event, show_data=show_data)
        if recorder is not None and event.kind is webhooks.EventKind.LINK_CARE_CONTEXT:
            line["recorded"] = await recorder.record(event.link_result())
        tee = _REQUEST.get()
        if forward is not None and session is not None and tee is not None:
            line["forward"] = await _forward(session, forward, bytes(tee.body), tee.headers)
        emit(line, stdout)

    secret = _secret(args)
    client: HealthClient | None = None
    abdm: webhooks.AbdmHandler | None = None
    library_handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    if patients is None:
        library_handler = webhooks.aiohttp_handler(secret, on_event)  # checks the secret: InvalidRequest
    else:  # answering a patient's own search needs the service: the client from the flags and the environment
        client = make_client(args)
        linking = DiscoverFromFile(patients, stdout, stderr)
        try:
            abdm = webhooks.abdm_handler(
                secret,
                client=client,
                on_event=on_event,
                on_discover=linking.on_discover,
                on_link_otp=linking.on_link_otp,
                on_linked=linking.on_linked,
            )
        except BaseException:
            await client.aclose()
            raise
        library_handler = abdm.handle

    async def handle(request: web.Request) -> web.StreamResponse:
        tee = _Tee(request)
        token = _REQUEST.set(tee)
        try:
            return await library_handler(cast(web.Request, tee))
        finally:
            _REQUEST.reset(token)

    app = web.Application()
    app.router.add_route("*", args.path, handle)  # every method: the library's handler answers 405 itself
    runner = web.AppRunner(app, shutdown_timeout=SHUTDOWN_TIMEOUT)
    await runner.setup()
    try:
        if forward is not None:
            session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=FORWARD_TIMEOUT))
        site = web.TCPSite(runner, args.host, args.port)
        try:
            await site.start()
        except OSError as exc:
            stderr.write(f"health-async: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}\n")
            stderr.flush()
            return 2
        host, port = runner.addresses[0][:2]
        shown = f"[{host}]" if ":" in host else host
        url = f"http://{shown}:{port}{args.path}"
        stderr.write(f"webhooks: listening on {url} (Ctrl-C to stop)\n")
        if forward is not None:
            target = urlsplit(forward)
            stderr.write(
                f"webhooks: forwarding verified webhooks to {target.scheme}://{target.netloc.rpartition('@')[2]}\n"
            )
        if not _is_loopback(str(host)):
            stderr.write("webhooks: listening beyond this machine: use it only on a network you trust\n")
        if patients is not None:
            stderr.write(
                f"webhooks: answering a patient's own search from {len(patients)} patient(s) of --discover-from; "
                "DEVELOPMENT ONLY: linking OTPs are printed here\n"
            )
        stderr.flush()
        if on_ready is not None:
            on_ready(url)
        await stop.wait()
    finally:
        await runner.cleanup()  # stops listening, lets the webhooks in flight finish
        if abdm is not None:
            await abdm.aclose()  # the answers still under way are cancelled
        if client is not None:
            await client.aclose()
        if session is not None:
            await session.close()
    return 0


@contextlib.contextmanager
def _stop_on_signals(stop: asyncio.Event) -> Iterator[list[int]]:
    """Ctrl-C and SIGTERM set ``stop`` (the server then closes cleanly); yields the signals received. Where the
    loop cannot take signal handlers (Windows, not the main thread), Ctrl-C still ends the run by cancellation
    (the server's cleanup runs) and SIGTERM keeps its default action."""
    loop = asyncio.get_running_loop()
    received: list[int] = []
    installed: list[signal.Signals] = []

    def on_signal(signum: signal.Signals) -> None:
        received.append(int(signum))
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(signum, on_signal, signum)
        except (NotImplementedError, RuntimeError, ValueError):
            continue
        installed.append(signum)
    try:
        yield received
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)


# ------------------------------------------------------------------------ subscriptions

_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")


def _events(values: list[str]) -> list[str]:
    return [name.strip() for value in values for name in value.split(",") if name.strip()]


def _cell(value: str | None) -> str:
    """A table cell: ``-`` for nothing; control characters (the service's text, bound for a terminal) as ``?``."""
    return _CONTROL.sub("?", value) if value else "-"


async def _subscribe(client: HealthClient, args: argparse.Namespace) -> int:
    env_key = os.environ.get(ENV_WEBHOOK_SECRET) or None
    if env_key is not None:
        try:
            check_signing_key(env_key)
        except InvalidRequest as exc:  # name where the key came from (never the key)
            raise InvalidRequest(f"{ENV_WEBHOOK_SECRET}: {exc}") from None
    try:
        created = await client.webhook_subscriptions.create(
            args.url,
            _events(args.event),
            signing_key=env_key,
            allow_unknown_events=args.allow_unknown_event,
        )
    except OutcomeUnknown as exc:
        hint = "the subscription may have been made: check with 'health-async webhooks list' before subscribing again"
        return report_error(exc, hint, as_json=args.json, url=args.url)
    if args.json:
        line: dict[str, Any] = {
            "id": created.id,
            "url": created.url,
            "events": list(created.events),
            "status": created.status,
        }
        if args.show_secret:
            line["signing_key"] = created.signing_key
        emit(line)
    else:
        print(f"webhook subscription {_cell(created.id)} created: {created.url} ({', '.join(created.events)})")
        if args.show_secret:
            print(f"signing key: {created.signing_key}")
        sys.stdout.flush()
    if not args.show_secret:
        where = (
            f"it is {ENV_WEBHOOK_SECRET}"
            if env_key is not None
            else "a new one was generated; 'health-async webhooks list --show-secret' shows it (or subscribe with "
            f"{ENV_WEBHOOK_SECRET} set to your receiver's secret)"
        )
        print(f"webhooks: the signing key is not shown: {where}", file=sys.stderr)
    return 0


def _subscription_json(item: WebhookSubscription, show_secret: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": item.id,
        "url": item.url,
        "events": list(item.events),
        "protocol": item.protocol,
        "client_id": item.client_id,
        "created_at": _iso(item.created_at),
        "updated_at": _iso(item.updated_at),
        "signed": item.signed,
    }
    if show_secret:
        out["signing_key"] = item.signing_key
    return out


async def _list(client: HealthClient, args: argparse.Namespace) -> int:
    items = await client.webhook_subscriptions.list()
    if args.json:
        for item in items:
            emit(_subscription_json(item, args.show_secret))
        return 0
    if not items:
        print("no webhook subscriptions", file=sys.stderr)
        return 0
    header = ["id", "url", "events", "signed", "created_at"] + (["signing_key"] if args.show_secret else [])
    rows = [header]
    for item in items:
        row = [
            _cell(item.id),
            _cell(item.url),
            _cell(",".join(item.events)),
            "yes" if item.signed else "no",
            _cell(_iso(item.created_at)),
        ]
        rows.append(row + ([_cell(item.signing_key)] if args.show_secret else []))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    sys.stdout.flush()
    return 0


async def _unsubscribe(client: HealthClient, args: argparse.Namespace) -> int:
    try:
        await client.webhook_subscriptions.delete(args.id)
    except (NotFoundError, OutcomeUnknown) as exc:
        if isinstance(exc, NotFoundError):
            hint = "no webhook subscription has that id: 'health-async webhooks list' shows them"
        else:
            hint = "the subscription may have been deleted: check with 'health-async webhooks list'"
        return report_error(exc, hint, as_json=args.json, id=args.id)
    if args.json:
        emit({"id": args.id, "deleted": True})
    else:
        print(f"webhook subscription {_cell(args.id)} deleted")
        sys.stdout.flush()
    return 0


_ACCOUNT_COMMANDS: Final[dict[str, Callable[[HealthClient, argparse.Namespace], Any]]] = {
    "subscribe": _subscribe,
    "list": _list,
    "unsubscribe": _unsubscribe,
}


async def _webhooks(client: Any, args: argparse.Namespace) -> int:  # noqa: ARG001 - cli.run gives none
    command = _ACCOUNT_COMMANDS.get(args.webhooks_command)
    if command is not None:
        async with make_client(args) as own:
            return int(await command(own, args))
    stop = asyncio.Event()
    with _stop_on_signals(stop) as received:
        code = await serve(args, stop=stop)
    if code == 0 and received:
        sys.stderr.write("webhooks: stopped\n")
        return 128 + received[0]  # 130 for Ctrl-C, 143 for SIGTERM, as a shell reports them
    return code


def _path(text: str) -> str:
    if not text.startswith("/") or any(ch.isspace() or ord(ch) < 0x20 for ch in text):
        raise argparse.ArgumentTypeError("the path must start with '/' and hold no spaces")
    return text


def add_commands(sub: Any, common: argparse.ArgumentParser) -> dict[str, Command]:
    """Add ``webhooks`` (``serve``, ``subscribe``, ``list``, ``unsubscribe``) to ``sub``; return ``{"webhooks":
    handler}``. ``serve`` takes the connection flags (``common``) for ``--discover-from`` only."""
    parser = sub.add_parser(
        "webhooks",
        help="receive signed webhooks locally; subscribe a URL to the service's webhooks",
        description="Webhook tools: a local receiver for development (serve), and the service's webhook "
        "subscriptions (subscribe, list, unsubscribe).",
    )
    wsub = parser.add_subparsers(dest="webhooks_command", required=True, metavar="SUBCOMMAND")
    p = wsub.add_parser(
        "serve",
        parents=[common],
        help="a local webhook receiver: verify, print each event as a JSON line, optionally forward",
        description="Receive webhooks on http://HOST:PORT/PATH, verified by the library's handler; print each "
        "verified event as one JSON line (no personal data unless --show-data). --forward URL posts each verified "
        "webhook as received (same body, same signature) to your application. --discover-from PATIENTS.json answers "
        "a patient's own search from a file (a development server: the linking OTP is printed to stderr). Runs "
        "until Ctrl-C or SIGTERM.",
        epilog=f"The secret may come from {ENV_WEBHOOK_SECRET} instead of --secret (preferred); it is never printed.",
    )
    p.add_argument("--secret", help=f"the webhook signing secret (env {ENV_WEBHOOK_SECRET}; prefer the environment)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=port, default=8080, help="port (default 8080; 0 picks a free one)")
    p.add_argument("--path", type=_path, default="/webhooks", help="path webhooks are posted to (default /webhooks)")
    p.add_argument("--forward", metavar="URL", help="also POST each verified webhook, as received, to URL")
    p.add_argument("--show-data", action="store_true", help="print each event's data too (personal data)")
    p.add_argument(
        "--record-links",
        metavar="JOURNAL",
        help="record abha.link_care_context outcomes against an `ingest link` journal (ingest status shows them)",
    )
    p.add_argument(
        "--discover-from",
        metavar="PATIENTS.json",
        help="answer a patient's own search (discover, link with an OTP printed to stderr: development only) from "
        "this file's patients; needs the connection flags or HEALTH_ASYNC_* (the answers are calls)",
    )

    p = wsub.add_parser(
        "subscribe",
        parents=[common],
        help="have the service POST webhooks of the given events to URL",
        description="Register URL (https://; plain http:// only to a loopback host) for the events. Sent once: if "
        "the outcome is unknown (exit 1), check 'webhooks list' first. Exits 2 for a value the library refuses "
        "(nothing sent).",
        epilog=f"The signing key is {ENV_WEBHOOK_SECRET} when set (what 'webhooks serve' verifies with), else a new "
        "random one; it is printed only with --show-secret. Documented events: " + ", ".join(sorted(DOCUMENTED_EVENTS)),
    )
    p.add_argument("url", metavar="URL", help="where the service POSTs the webhooks")
    p.add_argument(
        "--event",
        action="append",
        required=True,
        metavar="EVENT",
        help="an event name, e.g. abha.link_care_context (repeatable, or comma-separated)",
    )
    p.add_argument(
        "--allow-unknown-event", action="store_true", help="let through event names this version does not document"
    )
    p.add_argument("--show-secret", action="store_true", help="print the signing key (a secret)")
    p.add_argument("--json", action="store_true", help="print a JSON object instead of a sentence")

    p = wsub.add_parser(
        "list",
        parents=[common],
        help="the service's webhook subscriptions (table, or JSON lines)",
        description="List the webhook subscriptions: id, url, events, signed, created_at. Signing keys are secrets: "
        "shown only with --show-secret.",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per subscription instead of a table")
    p.add_argument("--show-secret", action="store_true", help="also show each signing key (secrets)")

    p = wsub.add_parser(
        "unsubscribe",
        parents=[common],
        help="delete one webhook subscription",
        description="Delete the webhook subscription ID (see 'webhooks list'). Sent once: if the outcome is "
        "unknown (exit 1), check 'webhooks list'. An unknown id exits 1.",
    )
    p.add_argument("id", metavar="ID", help="the subscription's id")
    p.add_argument("--json", action="store_true", help="print a JSON object instead of a sentence")
    return {"webhooks": _webhooks}
