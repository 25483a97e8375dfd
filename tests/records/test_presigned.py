"""Presigned uploads: ``documents.create`` (declare, then one storage form per file) and the size routing of
``documents.upload``, against the fake server and its second storage host."""

from __future__ import annotations

import asyncio
import hashlib
import io
import logging
import os
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from health_async import HealthClient, RetryPolicy
from health_async.errors import (
    DocumentNotFound,
    FileTooLarge,
    InvalidRequest,
    OutcomeUnknown,
    ProcessingFailed,
    ResponseValidationError,
    UploadFailed,
)
from health_async.models import ProcessingStatus
from health_async.models.records._cases import PresignedEntry, PresignedForm
from health_async.resources.records import _presigned
from health_async.resources.records._polling import PollPolicy
from health_async.testing import FakeHealthServer, Fault

FAST = RetryPolicy(attempts=4, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)
MiB = 1024 * 1024
PDF = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"\x00" * 16
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x00" * 16


def pdf(size: int = 4000, fill: bytes = b"p") -> bytes:
    return PDF + fill * (size - len(PDF))


def sparse(path: Path, head: bytes, size: int) -> Path:
    """A file of ``size`` bytes starting with ``head``, without writing (or holding) its bulk."""
    with path.open("wb") as fh:
        fh.write(head)
        fh.truncate(size)
    return path


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(documents_per_user=2) as srv:
        yield srv


@pytest.fixture
async def client(server: FakeHealthServer) -> AsyncIterator[HealthClient]:
    async with HealthClient(
        base_url=server.url,
        token=server.token,
        client_id=server.client_id,
        user_id=server.data.user_ids[0],
        encryption_key=server.encryption_key,
        retry=FAST,
    ) as c:
        yield c


def batch_json(server: FakeHealthServer) -> Any:
    [rec] = [r for r in server.requests if r.route == "presigned_batch"]
    return rec.json


def nothing_sent(server: FakeHealthServer) -> bool:
    return server.calls("presigned_batch") == 0 and server.calls("storage_form") == 0 and server.calls("upload") == 0


# ------------------------------------------------------------------------------------------------ the happy path


async def test_create_declares_files_and_stores_each_one(client: HealthClient, server: FakeHealthServer) -> None:
    pages = [pdf(3000, b"a"), pdf(5000, b"b"), pdf(7000, b"c")]
    result = await client.documents.create(
        pages, document_type="lr", title="Blood panel", tags=["lab", "annual", "lab"], date=1_614_556_800
    )
    assert result.route == "presigned"

    entry = batch_json(server)["batch_request"][0]
    assert entry["files"] == [{"contentType": "application/pdf", "file_size": len(p)} for p in pages]
    assert entry["dt"] == "lr" and entry["title"] == "Blood panel" and entry["dd_e"] == 1_614_556_800
    assert entry["tg"] == ["lab", "annual"]  # a set: the duplicate is dropped, the order kept

    received = sorted(server.storage.received, key=lambda r: r.fields["key"])
    assert [r.status for r in received] == [204, 204, 204]
    assert [r.sha256 for r in received] == [hashlib.sha256(p).hexdigest() for p in pages]
    for r in received:
        assert r.order[-1] == "file" and len(r.order) > 1  # the signed fields first, then the file
        assert r.content_type == "application/pdf"

    doc = await client.documents.describe(result.document_id)  # the stored document is there
    assert len(doc.files) == 3 and doc.document_type == "lr" and set(doc.tags) == {"lab", "annual"}


async def test_create_accepts_one_file_object(client: HealthClient, server: FakeHealthServer) -> None:
    result = await client.documents.create(io.BytesIO(PNG + b"\x01" * 500))
    assert batch_json(server)["batch_request"][0]["files"] == [
        {"contentType": "image/png", "file_size": len(PNG) + 500}
    ]
    assert (await client.documents.describe(result.document_id)).files[0].file_type.value == "IMG"


async def test_storage_host_gets_nothing_of_ours(client: HealthClient, server: FakeHealthServer) -> None:
    await client.documents.create(pdf())
    [batch] = [r for r in server.requests if r.route == "presigned_batch"]
    assert batch.headers["Authorization"] == f"Bearer {server.token}"  # the API call carries them...
    [form] = server.storage.received
    names = {k.lower() for k in form.headers}
    assert not names & {"authorization", "client-id", "x-pt-id", "x-partner-pt-id", "x-hip-id", "cookie"}
    assert server.token not in str(form.headers) and server.client_id not in str(form.headers)


async def test_content_ending_in_error_fails_processing_as_on_the_direct_route(
    client: HealthClient, server: FakeHealthServer
) -> None:
    quick = PollPolicy(first_poll=0.005, max_poll=0.01)
    fine = await client.documents.create(pdf())
    broken = await client.documents.create(pdf() + b"error")
    pages = await client.documents.create([pdf(3000, b"a"), pdf(3000, b"b") + b"error"])  # one page is enough
    assert {fine.route, broken.route, pages.route} == {"presigned"}
    marked = {r.fields["key"].split("/", 1)[1]: r.ends_in_error for r in server.storage.received}
    assert marked == {
        f"{fine.document_id}/0": False,
        f"{broken.document_id}/0": True,
        f"{pages.document_id}/0": False,
        f"{pages.document_id}/1": True,
    }

    done = await client.documents.wait_for_result(fine.document_id, poll=quick)
    assert done.status is ProcessingStatus.COMPLETED and done.tests
    for result in (broken, pages):
        with pytest.raises(ProcessingFailed) as info:
            await client.documents.wait_for_result(result.document_id, poll=quick)
        assert info.value.document_id == result.document_id and info.value.errors


async def test_redirect_from_storage_is_not_followed(client: HealthClient, server: FakeHealthServer) -> None:
    server.storage.redirect_next(5)
    with pytest.raises(UploadFailed) as info:
        await client.documents.create(pdf())
    assert info.value.file_index == 0 and info.value.code is None
    assert server.storage.followed == 0
    assert server.calls("storage_form") == 1  # a redirect is final: not retried, not followed


async def test_redirect_to_the_api_host_does_not_carry_the_token(
    client: HealthClient, server: FakeHealthServer
) -> None:
    server.storage.redirect_next(location=f"{server.url}/mr/api/v2/docs?task=smart")
    with pytest.raises(UploadFailed):
        await client.documents.create(pdf())
    assert server.calls("upload") == 0


# ------------------------------------------------------------------------------------------------ limits


def _limit_case(name: str, tmp: Path) -> tuple[Any, dict[str, Any]]:
    if name == "eleven files":
        return [pdf()] * 11, {}
    if name == "no files":
        return [], {}
    if name == "pdf and png":
        return [pdf(), PNG + b"\x00" * 100], {}
    if name == "png and jpeg":
        return [PNG + b"\x00" * 100, JPEG + b"\x00" * 100], {}
    if name == "not a pdf or image":
        return b"hello, this is plain text and no PDF at all", {}
    if name == "empty":
        return b"", {}
    if name == "tag too short":
        return pdf(), {"tags": ["a"]}
    if name == "tag too long":
        return pdf(), {"tags": ["x" * 21]}
    if name == "eleven tags":
        return pdf(), {"tags": [f"tag{i}" for i in range(11)]}
    if name == "title too long":
        return pdf(), {"title": "t" * 257}
    if name == "naive datetime":
        import datetime as dt

        return pdf(), {"date": dt.datetime(2024, 1, 1)}
    if name == "bad document type":
        return pdf(), {"document_type": "Lab Report"}
    if name == "no user":
        return pdf(), {"user_id": None}
    if name == "unseekable":
        import os

        read_fd, write_fd = os.pipe()
        os.write(write_fd, pdf(100))
        os.close(write_fd)
        return open(read_fd, "rb", buffering=0), {}  # closed by the test
    raise AssertionError(name)


@pytest.mark.parametrize(
    "name",
    [
        "eleven files",
        "no files",
        "pdf and png",
        "png and jpeg",
        "not a pdf or image",
        "empty",
        "tag too short",
        "tag too long",
        "eleven tags",
        "title too long",
        "naive datetime",
        "bad document type",
        "no user",
        "unseekable",
    ],
)
async def test_limits_refuse_before_anything_is_sent(
    name: str, client: HealthClient, server: FakeHealthServer, tmp_path: Path
) -> None:
    files, kwargs = _limit_case(name, tmp_path)
    try:
        with pytest.raises(InvalidRequest):
            await client.documents.create(files, **kwargs)
    finally:
        if isinstance(files, io.IOBase):
            files.close()
    assert nothing_sent(server)


async def test_pdf_over_25_mib_is_too_large(client: HealthClient, server: FakeHealthServer, tmp_path: Path) -> None:
    ok = sparse(tmp_path / "ok.pdf", PDF, 25 * MiB)
    big = sparse(tmp_path / "big.pdf", PDF, 25 * MiB + 1)
    with pytest.raises(FileTooLarge, match=r"file 1 .*limit for a PDF"):
        await client.documents.create([ok, big])
    assert nothing_sent(server)


async def test_image_over_10_mib_is_too_large(client: HealthClient, server: FakeHealthServer, tmp_path: Path) -> None:
    big = sparse(tmp_path / "scan.png", PNG, 10 * MiB + 1)
    with pytest.raises(FileTooLarge, match="image"):
        await client.documents.create(big)
    assert nothing_sent(server)


async def test_limit_messages_name_the_rule_not_the_file(client: HealthClient, tmp_path: Path) -> None:
    path = tmp_path / "Asha Sharma blood report.txt"
    path.write_bytes(b"not a pdf")
    with pytest.raises(InvalidRequest) as info:
        await client.documents.create(path)
    assert "Asha" not in str(info.value) and "file 0" in str(info.value)


# ------------------------------------------------------------------------------------------------ sniffing


async def test_type_is_sniffed_from_the_bytes_not_the_name(
    client: HealthClient, server: FakeHealthServer, tmp_path: Path
) -> None:
    fake_pdf = tmp_path / "report.pdf"
    fake_pdf.write_bytes(PNG + b"\x00" * 200)
    await client.documents.create(fake_pdf)
    assert batch_json(server)["batch_request"][0]["files"][0]["contentType"] == "image/png"
    assert server.storage.received[0].content_type == "image/png"


async def test_a_png_named_pdf_gets_the_image_limit(
    client: HealthClient, server: FakeHealthServer, tmp_path: Path
) -> None:
    big = sparse(tmp_path / "report.pdf", PNG, 12 * MiB)  # under the PDF limit, over the image one
    with pytest.raises(FileTooLarge):
        await client.documents.create(big)
    assert nothing_sent(server)


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (PDF, "application/pdf"),
        (b"\x00" * 100 + PDF, "application/pdf"),  # junk before the header, as PDF readers allow
        (PNG, "image/png"),
        (JPEG, "image/jpg"),  # the vendor's spelling
        (b"GIF89a" + b"\x00" * 10, None),
        (b"<html>%PDF-", "application/pdf"),
        (b"\x00" * 1100 + PDF, None),  # the header must be within the first 1024 bytes
        (b"", None),
    ],
)
def test_sniff_content_type(head: bytes, expected: str | None) -> None:
    from health_async._files import sniff_content_type

    assert sniff_content_type(head) == expected


# ------------------------------------------------------------------------------------------------ failures


async def test_form_post_is_retried_then_succeeds(client: HealthClient, server: FakeHealthServer) -> None:
    server.storage.fail_next(2, status=503)
    body = pdf(9000)
    result = await client.documents.create(body)
    assert [r.status for r in server.storage.received] == [503, 503, 204]
    assert server.storage.received[-1].sha256 == hashlib.sha256(body).hexdigest()  # the whole file again
    assert server.calls("presigned_batch") == 1  # only the form is repeated, not the declaration
    await client.documents.describe(result.document_id)


async def test_failure_names_the_file_index(client: HealthClient, server: FakeHealthServer) -> None:
    server.storage.fail_file(1)
    with pytest.raises(UploadFailed) as info:
        await client.documents.create([pdf(), pdf(), pdf()])
    err = info.value
    assert err.file_index == 1 and err.code is None
    assert "file 1" in str(err) and "HTTP 500" in str(err)
    failed = [r for r in server.storage.received if r.fields["key"].endswith("/1")]
    assert len(failed) == FAST.attempts  # retried per the policy before giving up
    document_id = batch_response_id(server)
    assert err.document_id == document_id  # so the caller can clean up or check
    assert document_id not in str(err)  # ids stay out of messages (and so out of logs)
    with pytest.raises(DocumentNotFound):  # not complete: not stored
        await client.documents.describe(document_id)


def batch_response_id(server: FakeHealthServer) -> str:
    return next(r.fields["key"].split("/")[1] for r in server.storage.received)


async def test_a_passing_failure_does_not_fail_the_document(client: HealthClient, server: FakeHealthServer) -> None:
    server.storage.fail_file(2, times=3)
    result = await client.documents.create([pdf(), pdf(), pdf()])
    await client.documents.describe(result.document_id)


async def test_error_details_raise_upload_failed_with_the_code(client: HealthClient, server: FakeHealthServer) -> None:
    server.storage.refuse_next("INVALID_DOCUMENT_TYPE", "Invalid document type.")
    with pytest.raises(UploadFailed) as info:
        await client.documents.create(pdf())
    assert info.value.code == "INVALID_DOCUMENT_TYPE" and info.value.file_index is None
    assert "INVALID_DOCUMENT_TYPE" in str(info.value)
    assert server.calls("storage_form") == 0


async def test_error_details_in_a_400_answer(client: HealthClient, server: FakeHealthServer) -> None:
    body = {"error": True, "message": "bad", "batch_response": [{"error_details": {"code": "E_SIZE", "message": "x"}}]}
    server.inject("presigned_batch", Fault(status=400, body=body, times=1))
    with pytest.raises(UploadFailed) as info:
        await client.documents.create(pdf())
    assert info.value.code == "E_SIZE"


async def test_declaration_is_not_repeated_after_a_server_error(client: HealthClient, server: FakeHealthServer) -> None:
    server.inject("presigned_batch", Fault(status=500, times=1))
    with pytest.raises(OutcomeUnknown):
        await client.documents.create(pdf())
    assert server.calls("presigned_batch") == 1


@pytest.mark.parametrize(
    "entry",
    [
        {"document_id": "d1", "forms": []},  # fewer forms than files
        {"forms": [{"url": "http://127.0.0.1:9/x", "fields": {}}]},  # no document id
        {"document_id": "d1", "forms": [{"url": "http://storage.example.com/x", "fields": {}}]},  # plain http
        {"document_id": "d1", "forms": [{"url": "ftp://127.0.0.1/x", "fields": {}}]},
        {"document_id": "d1", "forms": [{"url": "https://s.example.com/x", "fields": {"k": 1}}]},
    ],
)
async def test_unusable_batch_answer(entry: dict[str, Any], client: HealthClient, server: FakeHealthServer) -> None:
    server.inject("presigned_batch", Fault(status=200, body={"batch_response": [entry]}, times=1))
    with pytest.raises(ResponseValidationError) as info:
        await client.documents.create(pdf())
    assert server.calls("storage_form") == 0
    assert "example.com" not in str(info.value) and "127.0.0.1" not in str(info.value)


@pytest.mark.parametrize(
    "host",
    [
        "[bad",  # urlsplit: unclosed IPv6 bracket (ValueError)
        "ex\uff03ample.com",  # urlsplit: a fullwidth '#' (ValueError)
        "ex\u00e9.com",  # non-ASCII: yarl would raise UnicodeEncodeError
        "a..b",  # an empty label: the resolver's idna codec would raise UnicodeError
        "a" * 64 + ".com",  # a label over 63 characters: likewise
    ],
)
async def test_a_storage_form_url_that_is_not_a_url_is_the_services_fault(
    host: str, client: HealthClient, server: FakeHealthServer, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "X-Amz-Signature=SECRET-SIGNATURE-0123456789"
    url = f"https://{host}/bucket/key?{secret}"
    entry = {"document_id": "d1", "forms": [{"url": url, "fields": {"k": "v"}}]}
    server.inject("presigned_batch", Fault(status=200, body={"batch_response": [entry]}, times=1))
    caplog.set_level(logging.DEBUG, logger="health_async")
    with pytest.raises(ResponseValidationError, match="storage form URL") as info:
        await client.documents.create(pdf())
    assert server.calls("storage_form") == 0
    assert info.value.__cause__ is None
    shown = str(info.value) + repr(info.value) + caplog.text + repr(info.value.__context__)
    assert "SECRET-SIGNATURE" not in shown and host not in shown


async def test_at_most_five_batches_at_a_time(client: HealthClient, server: FakeHealthServer) -> None:
    server.inject("storage_form", Fault(latency=0.05))
    results = await asyncio.gather(*(client.documents.create(pdf()) for _ in range(7)))
    assert len({r.document_id for r in results}) == 7
    assert server.storage.max_open_batches == _presigned.MAX_CONCURRENT_BATCHES


# ------------------------------------------------------------------------------------------------ secrets


async def test_presigned_urls_and_fields_never_shown(
    client: HealthClient, server: FakeHealthServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.storage.fail_file(0)
    caplog.set_level(logging.DEBUG, logger="health_async")
    with pytest.raises(UploadFailed) as info:
        await client.documents.create(pdf())
    form = server.storage.received[0]
    secrets = [form.path, form.fields["policy"], form.fields["x-amz-signature"], form.fields["key"]]
    shown = str(info.value) + repr(info.value) + caplog.text + str(info.value.__cause__) + repr(info.value.__cause__)
    assert "<storage form>" in caplog.text
    for secret in secrets:
        assert secret not in shown

    entry = PresignedEntry(document_id="d", forms=(PresignedForm(url=f"{server.url}{form.path}", fields=form.fields),))
    assert form.path not in repr(entry) and form.fields["policy"] not in repr(entry)
    assert "hidden" in repr(entry.forms[0])


# ------------------------------------------------------------------------------------------------ upload routing


async def test_upload_sends_a_large_pdf_the_presigned_way(
    client: HealthClient, server: FakeHealthServer, tmp_path: Path
) -> None:
    big = sparse(tmp_path / "scan.bin", PDF, 12 * MiB)  # the name says nothing: the bytes do
    result = await client.documents.upload(big, document_type="lr")
    assert result.route == "presigned"
    assert server.calls("upload") == 0 and server.calls("presigned_batch") == 1
    assert batch_json(server)["batch_request"][0] == {
        "dt": "lr",
        "files": [{"contentType": "application/pdf", "file_size": 12 * MiB}],
    }
    await client.documents.describe(result.document_id)


async def test_upload_keeps_the_direct_route_for_small_files(client: HealthClient, server: FakeHealthServer) -> None:
    result = await client.documents.upload(pdf())
    assert result.route == "direct"
    assert server.calls("upload") == 1 and server.calls("presigned_batch") == 0


@pytest.mark.parametrize(
    ("head", "size", "kwargs"),
    [
        (PNG, 12 * MiB, {}),  # a large image still has the 10 MB limit
        (PDF, 25 * MiB + 1, {}),  # over the presigned PDF limit
        (PDF, 12 * MiB, {"encrypt": True}),  # no JWE on the presigned route: refused, not downgraded
        (b"plain text", 12 * MiB, {}),
    ],
)
async def test_upload_still_refuses_what_cannot_go_presigned(
    head: bytes, size: int, kwargs: dict[str, Any], client: HealthClient, server: FakeHealthServer, tmp_path: Path
) -> None:
    big = sparse(tmp_path / "file.pdf", head, size)
    with pytest.raises(FileTooLarge):
        await client.documents.upload(big, **kwargs)
    assert nothing_sent(server)


# ------------------------------------------------------------------------------------------------ bad file inputs

#: A file name that is personal data: no refusal may show it.
PATIENT = "Asha_Verma_discharge"

BAD_INPUTS = ["missing", "directory", "fifo", "unreadable", "nul", "too_long", "name_not_utf8", "closed", "write_only"]


def bad_input(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, str, str]:
    """A file input of ``kind`` that cannot be uploaded, the reason its refusal must give, and its path."""
    folder = tmp_path / kind / PATIENT
    folder.mkdir(parents=True)
    path = folder / f"{PATIENT}.pdf"
    if kind == "missing":
        return path, "does not exist", str(path)
    if kind == "directory":
        return folder, "is a directory", str(folder)
    if kind == "fifo":
        os.mkfifo(path)  # opening it to read would block for ever
        return path, "not a regular file", str(path)
    path.write_bytes(pdf())
    if kind == "unreadable":  # permission bits do not stop root: refuse as the OS would for others
        monkeypatch.setattr("health_async._files.os.access", lambda *_: False)
        return path, "not readable", str(path)
    if kind == "nul":
        return f"{folder}/{PATIENT}\x00.pdf", "NUL", str(folder)
    if kind == "too_long":
        long = f"{folder}/{PATIENT}{'x' * 5000}.pdf"
        return long, "too long", long
    if kind == "name_not_utf8":
        raw = os.fsencode(folder) + b"/" + PATIENT.encode() + b"\xff.pdf"
        with open(raw, "wb") as fh:
            fh.write(pdf())
        return os.fsdecode(raw), "not valid UTF-8", os.fsdecode(raw)
    if kind == "closed":
        closed = path.open("rb")
        closed.close()
        return closed, "closed", str(path)
    return path.open("ab"), "not open for reading", str(path)


def refusal_hides_the_file(message: str, shown: str) -> bool:
    return PATIENT not in message and shown not in message and "\\x" not in message


@pytest.mark.parametrize("kind", BAD_INPUTS)
async def test_upload_refuses_a_bad_file_with_invalid_request_and_sends_nothing(
    kind: str, client: HealthClient, server: FakeHealthServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    value, reason, shown = bad_input(kind, tmp_path, monkeypatch)
    try:
        with pytest.raises(InvalidRequest) as caught:
            await client.documents.upload(value)
    finally:
        if hasattr(value, "close"):
            value.close()
    message = str(caught.value)
    assert type(caught.value) is InvalidRequest
    assert message.startswith("file: ") and reason in message, message
    assert refusal_hides_the_file(message, shown), message
    assert nothing_sent(server) and server.requests == []


@pytest.mark.parametrize("kind", BAD_INPUTS)
async def test_create_refuses_a_bad_file_with_invalid_request_and_sends_nothing(
    kind: str, client: HealthClient, server: FakeHealthServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    value, reason, shown = bad_input(kind, tmp_path, monkeypatch)
    try:
        with pytest.raises(InvalidRequest) as alone:
            await client.documents.create(value)
        with pytest.raises(InvalidRequest) as second:
            await client.documents.create([pdf(), value])
    finally:
        if hasattr(value, "close"):
            value.close()
    assert str(alone.value).startswith("files: ") and reason in str(alone.value)
    assert str(second.value).startswith("files[1]: ") and reason in str(second.value)
    assert all(refusal_hides_the_file(str(exc.value), shown) for exc in (alone, second))
    assert nothing_sent(server) and server.requests == []


@pytest.mark.parametrize("name", ["a\udcff.pdf", f"{PATIENT}\udcff.pdf"])
async def test_upload_refuses_a_filename_that_is_not_utf8(
    name: str, client: HealthClient, server: FakeHealthServer
) -> None:
    with pytest.raises(InvalidRequest, match=r"^filename is not valid UTF-8") as caught:
        await client.documents.upload(pdf(), filename=name)
    assert refusal_hides_the_file(str(caught.value), name)
    assert nothing_sent(server)


async def test_upload_many_reports_each_bad_file_as_invalid_request(
    client: HealthClient, server: FakeHealthServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = tmp_path / "good.pdf"
    good.write_bytes(pdf())
    kinds = ["missing", "directory", "nul", "too_long", "name_not_utf8"]
    bad = [bad_input(kind, tmp_path, monkeypatch)[0] for kind in kinds]
    outcomes = [outcome async for outcome in client.documents.upload_many([good, *bad], ordered=True)]
    assert [outcome.ok for outcome in outcomes] == [True] + [False] * len(kinds)
    assert all(type(outcome.error) is InvalidRequest for outcome in outcomes[1:])
    assert all(PATIENT not in str(outcome.error) for outcome in outcomes[1:])
    assert server.calls("upload") == 1


# ------------------------------------------------------------------------------------------------ memory


async def test_a_25_mib_pdf_streams_in_bounded_memory(
    client: HealthClient, server: FakeHealthServer, tmp_path: Path
) -> None:
    size = 25 * MiB
    path = tmp_path / "big.pdf"
    with path.open("wb") as fh:
        fh.write(PDF)
        block = bytes(range(256)) * 4096  # 1 MiB of varied bytes (a sparse file would be zeros)
        for _ in range(size // len(block)):
            fh.write(block)
        fh.truncate(size)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    tracemalloc.start()
    try:
        result = await client.documents.create(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.route == "presigned"
    assert server.storage.received[0].sha256 == digest
    assert peak < size // 5, f"peak {peak} bytes for a {size}-byte file"
