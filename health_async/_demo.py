"""``health-async demo``: every operation against the built-in fake server, no account needed.

Starts :class:`~health_async.testing.FakeHealthServer` in-process, runs each operation (plain and encrypted,
success and typed failure), then a bulk describe of a few thousand documents under injected faults (a share of
503s and a 429 with ``Retry-After``) with a progress bar, and prints a short summary: what ran, how long,
requests per second and the retries the client absorbed. Personal data in the output is masked.

One step plays a patient's own search (user-initiated linking): the fake's PHR side searches a facility for the
seeded user, and the hospital answers through :func:`health_async.webhooks.abdm_handler`, served on 127.0.0.1,
with an ``on_discover`` over the demo's data (the user's profile and documents) and an SMS sender that texts the
OTP to the fake patient's phone (``server.abdm.text``), from which the PHR side types it back.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable
from typing import IO, TYPE_CHECKING

import attrs

from ._aadhaar import mask_aadhaar
from ._auth import ClientCredentials
from ._client import HealthClient
from ._mobile import mask_mobile
from ._retry import RetryPolicy
from .errors import AbhaError, DocumentNotFound, HealthError
from .models import FlowStep, HprRegistrationStep
from .resources.records._polling import PollPolicy

if TYPE_CHECKING:
    from .testing import FakeHealthServer

__all__ = ["DemoSummary", "run_demo"]

#: A small but real PDF header, enough for the fake server (it stores what it receives).
SAMPLE_PDF = b"%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n" * 40

#: Retries that keep the demo quick: short backoff, Retry-After honoured up to half a second.
DEMO_RETRY = RetryPolicy(attempts=5, base_delay=0.02, max_delay=0.2, retry_after_cap=0.5, deadline=30)


@attrs.define
class DemoSummary:
    """What the demo did: one line per step, and the bulk figures."""

    steps: list[tuple[str, bool, float, str]] = attrs.field(factory=list)
    bulk_ids: int = 0
    bulk_failed: int = 0
    bulk_seconds: float = 0.0
    retries_absorbed: int = 0

    @property
    def ok(self) -> bool:
        """True when every step did what it should and no bulk id failed."""
        return all(ok for _, ok, _, _ in self.steps) and self.bulk_failed == 0


class _Printer:
    def __init__(self, out: IO[str]) -> None:
        self.out = out

    def line(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()


#: The facility the demo's patient searches, and the secret of the hospital's webhook receiver.
DEMO_HIP = "IN2910000101"
_DEMO_WEBHOOK_SECRET = "demo-user-linking-secret"
#: The facility the demo onboards (the fake's registry does not hold it) and the demo doctor's HPR password.
DEMO_NEW_FACILITY = "IN2910000777"
_DEMO_HPR_PASSWORD = "Demo!Passw0rd-46"


def _last_ten(value: str | None) -> str:
    return "".join(ch for ch in value or "" if ch.isdigit())[-10:]


async def patient_own_search(server: FakeHealthServer, client: HealthClient, user: str, doc_ids: list[str]) -> str:
    """A patient's own search, end to end (see the module): the PHR side discovers the user's records at
    :data:`DEMO_HIP` and links two of them with the OTP the hospital texted. Returns the step's line (masked)."""
    from aiohttp import web

    from . import webhooks
    from .models import CareContext, CareContextDiscover, DiscoverLinkInit, HiType, MatchedPatient

    profile = await client.profiles.get(user)  # the hospital's record of the patient: the demo's own data
    visits = tuple(CareContext(d, "Lab report", HiType.DIAGNOSTIC_REPORT) for d in doc_ids[:2])
    texted: list[str] = []
    linked: list[webhooks.PendingLink] = []

    async def on_discover(request: CareContextDiscover) -> MatchedPatient | None:
        same_mobile = _last_ten(request.identifier("MOBILE")) == _last_ten(profile.mobile)
        if not same_mobile or request.patient_name != profile.full_name:
            return None
        return MatchedPatient(user, profile.full_name or "", visits)

    async def on_link_otp(mobile: str, otp: str, request: DiscoverLinkInit) -> None:  # noqa: ARG001
        server.abdm.text(mobile, otp)  # the hospital's SMS gateway; here the fake patient's phone
        texted.append(mobile)

    async def on_linked(link: webhooks.PendingLink) -> None:
        linked.append(link)

    handler = webhooks.abdm_handler(
        _DEMO_WEBHOOK_SECRET, client=client, on_discover=on_discover, on_link_otp=on_link_otp, on_linked=on_linked
    )
    app = web.Application()
    app.router.add_post("/webhooks/abdm", handler.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        server.abdm.webhooks(f"http://127.0.0.1:{runner.addresses[0][1]}/webhooks/abdm", _DEMO_WEBHOOK_SECRET)
        search = await server.abdm.patient_discovers(
            DEMO_HIP,
            abha_address="demo.patient@sbx",
            name=profile.full_name or "",
            gender=profile.gender or "O",
            year_of_birth=profile.date_of_birth.year if profile.date_of_birth else 1990,
            mobile=profile.mobile or "",
            oid=user,
        )
    finally:
        await handler.aclose()
        await runner.cleanup()
    offered = sum(len(p["care_contexts"]) for p in (search.discover or {}).get("patients") or [])
    if search.errors or not search.linked or not linked:
        raise HealthError(f"the search did not link: error codes {search.errors}")
    return (
        f"PHR app searched {DEMO_HIP}: {offered} care contexts offered -> OTP texted to "
        f"{mask_mobile(texted[-1])} -> {len(search.linked)} linked"
    )


async def lab_report_to_requester(server: FakeHealthServer, client: HealthClient, user: str) -> str:
    """The job ABDM exists for, end to end: a lab report uploaded and extracted, its ``DiagnosticReportRecord`` built
    and validated, the care context linked to the patient's ABHA, a requester's data request answered (pushed page by
    page, encrypted to the requester's key), and the requester putting the pages together, decrypting and reading back
    the same values. Returns the step's line (no personal data)."""
    from . import fhir
    from ._wire import structure
    from .models import CareContext, HealthDataRequest, HiType, HiuDataPush
    from .webhooks import PushPages

    server.records.configure(polls=1)
    up = await client.documents.upload(SAMPLE_PDF, filename="cbc.pdf", wait=True, poll=PollPolicy(0.05, max_poll=0.2))
    if up.processing is None:
        raise HealthError("the lab report was not processed")
    profile = await client.profiles.get(user)
    bundle = fhir.from_processing_result(
        up.processing,
        care_context_id=up.document_id,
        patient=fhir.Patient(profile.full_name or "Demo Patient", abha_address="demo.patient@sbx", hospital_id=user),
        organization=fhir.Organization("Demo Hospital", facility_id=DEMO_HIP),
        conclusion="Reviewed; see the attached report.",  # the lab's own words; the guide requires a conclusion
        original_file=SAMPLE_PDF,
    )
    report = fhir.validate(bundle)
    if not report.ok:
        raise HealthError(f"the built lab report does not validate: {[p.rule for p in report.errors]}")
    visit = CareContext(up.document_id, "Lab report", HiType.DIAGNOSTIC_REPORT)
    await client.abdm.link_care_contexts([visit], abha_address="demo.patient@sbx")
    # the requester (HIU) asks, through ABDM, for the lab report: the hospital answers with the same bundle
    asked = server.abdm.data_request([up.document_id], oid=user, hip_id=DEMO_HIP, hi_types=("DiagnosticReport",))
    pushed = await client.abdm.push_health_data(HealthDataRequest.from_event(asked), {up.document_id: bundle})
    # the requester: the pages (as ABDM hands them over), put together, decrypted with its key, read
    pages, whole = PushPages(), None
    for page in server.abdm.pages(pushed.transaction_id):
        whole = pages.add(structure(page, HiuDataPush)) or whole
    if whole is None:
        raise HealthError("the requester did not receive every page")
    [received] = client.abdm.decrypt_health_data(whole, server.abdm.hiu_key(pushed.transaction_id))
    record = fhir.read(received.bundle)
    sent = [(t.name, t.value) for t in up.processing.tests]
    read_back = [(o.name, o.value) for o in record.observations]
    if not received.report.ok or [(n, str(v)) for n, v in read_back] != [(n, str(v)) for n, v in sent]:
        raise HealthError("the requester read back other values than the lab report's")
    return (
        f"lab report -> {report.record_type.value if report.record_type else '?'} ({len(sent)} observations, "
        f"valid) -> linked -> pushed {len(pushed.pushed)} page -> requester read the same {len(read_back)} values"
    )


async def run_demo(
    *, documents: int = 3000, concurrency: int = 64, out: IO[str] | None = None, progress: bool | None = None
) -> DemoSummary:
    """Run the demo; returns its :class:`DemoSummary` (also printed to ``out``, stdout by default)."""
    from ._progress import Progress
    from .testing import FakeHealthServer, Fault

    printer = _Printer(out or sys.stdout)
    summary = DemoSummary()
    started = time.perf_counter()

    async with FakeHealthServer(users=1, documents_per_user=documents) as server:
        user = server.data.user_ids[0]
        printer.line(f"health_async demo: fake service on {server.url}, {documents} documents seeded\n")

        async def step(name: str, action: Callable[[], Awaitable[str]], expect: type[Exception] | None = None) -> None:
            t0 = time.perf_counter()
            try:
                detail = await action()
                ok = expect is None
            except HealthError as exc:
                detail = f"{type(exc).__name__}: {exc}"
                ok = expect is not None and isinstance(exc, expect)
            ms = (time.perf_counter() - t0) * 1000
            summary.steps.append((name, ok, ms, detail))
            printer.line(f"  {'ok ' if ok else 'FAIL'} {name:<34} {ms:7.1f} ms  {detail}")

        async with HealthClient(
            base_url=server.url,
            token=server.token,
            client_id=server.client_id,
            user_id=user,
            encryption_key=server.encryption_key,
            key_id=server.key_id,
            retry=DEMO_RETRY,
            max_connections=concurrency,
        ) as client:
            doc_ids = server.data.document_ids(user)
            valid = server.data.valid_aadhaar[0]
            failing = next(iter(server.data.failing_aadhaar))

            async def describe() -> str:
                doc = await client.documents.describe(doc_ids[0])
                report = doc.smart_report
                items = report.items if report else ()
                abnormal = sum(1 for i in items if i.flag.is_abnormal)
                return f"type={doc.document_type} files={len(doc.files)} report items={len(items)} abnormal={abnormal}"

            async def describe_missing() -> str:
                await client.documents.describe("no-such-document")
                return "found?"

            async def upload(encrypt: bool) -> str:
                result = await client.documents.upload(SAMPLE_PDF, filename="report.pdf", encrypt=encrypt)
                doc = await client.documents.describe(result.document_id)
                return f"document_id={result.document_id} (described: type={doc.document_type})"

            async def aadhaar(number: str, encrypt: bool) -> str:
                init = await client.abha.aadhaar_init(number, encrypt=encrypt)
                return f"{mask_aadhaar(number)} -> OTP sent ({init.hint})"  # the txn id is a secret: not shown

            async def profile() -> str:
                prof = await client.profiles.get(user)
                return repr(prof)

            async def listing() -> str:
                count = pages = 0
                async for page in client.documents.pages():
                    pages += 1
                    count += len(page.items)
                return f"{count} documents in {pages} pages"

            async def lifecycle() -> str:
                # upload, wait for the service to read it (the fake finishes after one poll; polled fast here),
                # then read what it extracted, correct the type, and delete it
                server.records.configure(polls=1)
                fast = PollPolicy(first_poll=0.05, max_poll=0.2)
                up = await client.documents.upload(SAMPLE_PDF, filename="cbc.pdf", wait=True, poll=fast)
                assert up.processing is not None
                tests = up.processing.tests
                shown = ", ".join(f"{t.name} {t.value} {t.unit or ''}".strip() for t in tests[:3])
                await client.documents.update(up.document_id, document_type="lr", tags={"cbc", "demo"})
                await client.documents.delete(up.document_id)
                status = up.processing.status.name
                return f"{up.route} upload -> {status}: {len(tests)} tests ({shown}, ...) -> updated, deleted"

            async def large_scan() -> str:
                scan = SAMPLE_PDF + b"%" * (11 * 1024 * 1024)  # over the direct route's 10 MB: presigned
                up = await client.documents.upload(scan, filename="scan.pdf")
                await client.documents.describe(up.document_id)
                return f"11 MB PDF -> {up.route} route, stored and described"

            printer.line("operations:")
            await step("upload -> wait -> extracted tests", lifecycle)
            await step("large PDF (presigned upload)", large_scan)
            await step("describe a document", describe)
            await step("describe a missing document", describe_missing, expect=DocumentNotFound)
            await step("profile", profile)
            await step("list documents (paged)", listing)
            await step("upload (multipart, streamed)", lambda: upload(False))
            await step("upload (JWE-encrypted, streamed)", lambda: upload(True))
            await step("aadhaar init", lambda: aadhaar(valid, False))
            await step("aadhaar init (JWE-encrypted)", lambda: aadhaar(valid, True))
            await step("aadhaar init, refused upstream", lambda: aadhaar(failing, False), expect=AbhaError)

            async def abha_register_and_login() -> str:
                # The guided flows, end to end; the OTPs are read from the in-process fake (what the SMS carried).
                number = server.data.valid_aadhaar[0]
                reg = await client.abha.register_with_aadhaar(number)
                otp = server.abha.last_otp(reg.to_state()["txn_id"])
                await reg.verify_otp(otp, mobile=server.abha.linked_mobile(number))
                if reg.next_step is FlowStep.SELECT_ACCOUNT:  # this Aadhaar already holds an ABHA: log into it
                    account = await reg.choose(reg.accounts[0].abha_address)
                else:
                    free = await reg.suggest_addresses()
                    account = await reg.create(free[0] if free else "demo.patient1")
                login = await client.abha.login("phr_address", account.abha_address or "")
                await login.verify_otp(server.abha.last_otp(login.to_state()["txn_id"]))
                return f"{mask_aadhaar(number)} -> {account!r}, then login -> {login.next_step.name}"

            await step("abha register (Aadhaar OTP) + login", abha_register_and_login)

            async def professional_registers() -> str:
                # A doctor's HPR ID with the guided flow (abdm-connect/flows/m4.mdx); the OTPs from the fake. No
                # X-Pt-Id: the professional is not the demo's patient. The password is the demo's, never shown.
                number = server.data.valid_aadhaar[1]
                reg = await client.hpr.register(number, user_id=None)
                await reg.verify_otp(server.hpr.last_otp(reg.to_state()["txn_id"]))
                await reg.verify_mobile(server.hpr.linked_mobile(number))
                if await reg.check_exist() is HprRegistrationStep.CREATE:
                    free = await reg.suggest()
                    await reg.create(
                        free[0] if free else "demo.doctor1",
                        password=_DEMO_HPR_PASSWORD,
                        email="doctor@example.org",
                        hp_category_code=1,
                        hp_sub_category_code=1,
                    )
                how = "held already" if reg.existed else "created"
                return f"{mask_aadhaar(number)} -> OTP, mobile, check/exist -> HPR ID {how} ({reg.next_step.name})"

            async def facility_onboards() -> str:
                done = await client.hfr.register("demo-clinic", DEMO_NEW_FACILITY)
                how = "not in the registry: onboarded, then linked" if done.was_onboarded else "found, linked"
                return f"{DEMO_NEW_FACILITY} -> search -> {how} to clinic {done.linked.clinic_id}"

            await step("hpr register (a professional)", professional_registers)
            await step("hfr register (search/onboard/link)", facility_onboards)
            await step("patient-initiated discover + link", lambda: patient_own_search(server, client, user, doc_ids))
            await step(
                "FHIR lab report -> requester",
                lambda: lab_report_to_requester(server, client, user),
            )

            async def with_credentials() -> str:
                creds = ClientCredentials(server.client_id, server.client_secret)
                async with HealthClient(base_url=server.url, auth=creds, client_id=server.client_id) as other:
                    prof = await other.profiles.get(user)
                return f"logged in with client credentials, then {prof!r}"

            await step("client-credentials login", with_credentials)

            # Bulk, under faults: 5% of describes answer 503, and one 429 asks every worker to pause.
            server.inject("describe", Fault(status=503, rate=0.05))
            server.inject("describe", Fault(status=429, retry_after=0.2, times=1))
            calls_before = server.calls("describe")
            bar = Progress("bulk describe", enabled=progress)
            t0 = time.perf_counter()
            try:
                async for r in client.documents.describe_many(doc_ids, concurrency=concurrency, progress=bar):
                    summary.bulk_ids += 1
                    summary.bulk_failed += not r.ok
            finally:
                bar.close()
            summary.bulk_seconds = time.perf_counter() - t0
            summary.retries_absorbed = server.calls("describe") - calls_before - summary.bulk_ids
            server.clear_faults()

    total = time.perf_counter() - started
    rate = summary.bulk_ids / summary.bulk_seconds if summary.bulk_seconds else 0.0
    printer.line(
        f"\nbulk: described {summary.bulk_ids} documents in {summary.bulk_seconds:.2f} s ({rate:,.0f} requests/s, "
        f"concurrency {concurrency}); {summary.retries_absorbed} retries absorbed under injected 503s and a 429; "
        f"{summary.bulk_failed} failed"
    )
    passed = sum(1 for _, ok, _, _ in summary.steps if ok)
    printer.line(
        f"summary: {passed}/{len(summary.steps)} operations as expected, "
        f"bulk {'ok' if not summary.bulk_failed else 'FAILED'}, {total:.2f} s in all"
    )
    return summary
