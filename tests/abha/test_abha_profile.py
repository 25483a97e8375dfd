"""client.abha's profile after registration against the fake server: the profile (read, update, delete), the card
and the QR streamed to a path or a file object (size cap, content checks, nothing partial left), search by mobile
and pincode details; input refused before anything is sent; personal data out of reprs; reads retried, the update
and the delete sent once."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import json
import logging
import re
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import health_async as ha
from health_async import errors as E
from health_async.models import AbhaProfile, AbhaSearchResult, PincodeDetails
from health_async.testing import FakeHealthServer, Fault
from health_async.testing.abha._profile import SEEDED_PROFILE_MOBILE

NO_WAIT = ha.RetryPolicy(attempts=3, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
ERROR_BODY = {"code": 500, "error": "Something went wrong", "source_error": {"code": "ABDM-9999", "message": "x"}}


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=2, documents_per_user=1) as srv:
        yield srv


@pytest.fixture
def kyc_oid(server: FakeHealthServer) -> str:
    """The seeded KYC-verified user (name, gender and date of birth locked)."""
    return server.data.user_ids[0]


@pytest.fixture
def mobile_oid(server: FakeHealthServer) -> str:
    """The seeded mobile-only user (every field can change)."""
    return server.data.user_ids[1]


@pytest.fixture
async def client(server: FakeHealthServer, kyc_oid: str) -> AsyncIterator[ha.HealthClient]:
    async with client_for(server, user_id=kyc_oid) as c:
        yield c


def client_for(server: FakeHealthServer, **kwargs: Any) -> ha.HealthClient:
    options: dict[str, Any] = {
        "token": server.token,
        "client_id": server.client_id,
        "partner_hip_id": "hip-9",
        "encryption_key": server.encryption_key,
        "key_id": server.key_id,
        "retry": NO_WAIT,
    }
    options.update(kwargs)
    return ha.HealthClient(base_url=server.url, **options)


def files(folder: Path) -> list[str]:
    """The names in ``folder`` (temporary files included)."""
    return sorted(p.name for p in folder.iterdir())


def last(server: FakeHealthServer, route: str) -> Any:
    return [r for r in server.requests if r.route == route][-1]


# ----------------------------------------------------------------------------------------------- the profile


async def test_profile_is_the_users_and_its_repr_holds_no_personal_data(
    server: FakeHealthServer, client: ha.HealthClient, kyc_oid: str
) -> None:
    stored = server.abha_profile.profiles[kyc_oid]
    profile = await client.abha.profile()
    assert isinstance(profile, AbhaProfile)
    assert profile.first_name == stored["first_name"] and profile.mobile == SEEDED_PROFILE_MOBILE
    assert profile.abha_number == stored["abha_number"] and profile.kyc_verified is True
    assert profile.date_of_birth == dt.date(stored["year_of_birth"], stored["month_of_birth"], stored["day_of_birth"])
    assert last(server, "abha_profile_get").headers["X-Pt-Id"] == kyc_oid
    shown = repr(profile)
    personal = ["first_name", "full_name", "mobile", "abha_address", "abha_number", "address", "pincode"]
    for value in [stored[name] for name in personal] + [str(stored["year_of_birth"])]:
        assert value not in shown
    assert shown == "AbhaProfile(kyc_verified=True)"


async def test_profile_calls_need_a_user_id_and_send_nothing_without(server: FakeHealthServer, tmp_path: Path) -> None:
    async with client_for(server) as anonymous:
        with pytest.raises(E.InvalidRequest, match="OID"):
            await anonymous.abha.profile()
        with pytest.raises(E.InvalidRequest, match="OID"):
            await anonymous.abha.card(tmp_path / "card.png")
        with pytest.raises(E.InvalidRequest, match="OID"):
            await anonymous.abha.delete_profile(confirm=True)
        with pytest.raises(E.InvalidRequest, match="OID"):
            await anonymous.abha.update_profile(pincode="560001")
    assert [r.route for r in server.requests] == []
    assert files(tmp_path) == []


async def test_a_read_is_retried_after_a_server_error(server: FakeHealthServer, client: ha.HealthClient) -> None:
    server.inject("abha_profile_get", Fault(status=503, times=1))
    assert (await client.abha.profile()).kyc_verified is True
    assert server.calls("abha_profile_get") == 2


async def test_an_expired_gateway_session_is_a_typed_error_never_retried(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    # ABDM's session pages: "APIs requiring ABHA Gateway authentication will return a 491" once it expires
    server.inject("abha_profile_get", Fault(status=491, times=1, body={"code": 491, "error": "session expired"}))
    with pytest.raises(E.AbhaSessionExpired, match="491") as info:
        await client.abha.profile()
    assert info.value.operation and isinstance(info.value, E.ApiError) and not isinstance(info.value, E.AbhaError)
    assert server.calls("abha_profile_get") == 1  # a read, yet not retried: waiting does not renew a session


# ----------------------------------------------------------------------------------------------- update


async def test_update_changes_only_the_given_fields(server: FakeHealthServer, mobile_oid: str) -> None:
    before = dict(server.abha_profile.profiles[mobile_oid])
    async with client_for(server, user_id=mobile_oid) as client:
        await client.abha.update_profile(pincode=" 110001 ", address="4 Janpath, New Delhi", last_name=None)
        after = await client.abha.profile()
    sent = last(server, "abha_profile_update").json
    # the vendor's PATCH takes the whole profile: the unchanged fields go as they were
    assert sent == {
        "first_name": before["first_name"],
        "middle_name": None,
        "last_name": None,
        "gender": before["gender"],
        "day_of_birth": before["day_of_birth"],
        "month_of_birth": before["month_of_birth"],
        "year_of_birth": before["year_of_birth"],
        "pincode": "110001",
        "address": "4 Janpath, New Delhi",
    }
    assert (after.pincode, after.address, after.last_name, after.state_name) == (
        "110001",
        "4 Janpath, New Delhi",
        None,
        "DELHI",
    )
    assert (after.first_name, after.gender, after.mobile, after.abha_address) == (
        before["first_name"],
        before["gender"],
        before["mobile"],
        before["abha_address"],
    )
    assert server.calls("abha_profile_update") == 1


async def test_update_can_change_name_gender_and_birth_date_of_a_mobile_only_abha(
    server: FakeHealthServer, mobile_oid: str
) -> None:
    async with client_for(server, user_id=mobile_oid) as client:
        await client.abha.update_profile(first_name="Kiran", gender="O", date_of_birth=dt.date(1985, 7, 9))
        after = await client.abha.profile()
    assert (after.first_name, after.gender, after.date_of_birth) == ("Kiran", "O", dt.date(1985, 7, 9))


@pytest.mark.parametrize(
    ("fields", "rule"),
    [
        ({}, "at least one field"),
        ({"pincode": "012345"}, "pincode"),
        ({"pincode": "5600"}, "pincode"),
        ({"first_name": "   "}, "first_name"),
        ({"gender": "X"}, "gender"),
        ({"date_of_birth": dt.date.today() + dt.timedelta(days=1)}, "date_of_birth"),
        ({"address": "line\nbreak"}, "address"),
    ],
)
async def test_update_refuses_bad_fields_before_sending_anything(
    server: FakeHealthServer, client: ha.HealthClient, fields: dict[str, Any], rule: str
) -> None:
    with pytest.raises(E.InvalidRequest, match=rule):
        await client.abha.update_profile(**fields)
    assert server.calls("abha_profile_get") == 0 and server.calls("abha_profile_update") == 0


async def test_update_of_a_kyc_verified_abha_keeps_name_gender_and_birth_date(
    server: FakeHealthServer, client: ha.HealthClient, kyc_oid: str
) -> None:
    stored = server.abha_profile.profiles[kyc_oid]
    with pytest.raises(E.InvalidRequest, match="first_name cannot change on a KYC-verified ABHA"):
        await client.abha.update_profile(first_name="Someone", pincode="400001")
    with pytest.raises(E.InvalidRequest, match="date_of_birth"):
        await client.abha.update_profile(date_of_birth=dt.date(2000, 1, 1))
    assert server.calls("abha_profile_update") == 0 and stored["pincode"] != "400001"
    # the same values are no change; the other fields do change
    await client.abha.update_profile(first_name=stored["first_name"], gender=stored["gender"], pincode="400001")
    assert (await client.abha.profile()).pincode == "400001"
    # "name" on the vendor's page: a last name is for the service to judge (the fake refuses it)
    with pytest.raises(E.ApiError) as info:
        await client.abha.update_profile(last_name="Other")
    assert info.value.status == 400 and info.value.body["source_error"]["code"] == "ABDM-1010"


async def test_update_is_sent_once_and_an_unknown_outcome_says_so(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    server.inject("abha_profile_update", Fault(status=503, times=1))
    with pytest.raises(E.OutcomeUnknown):
        await client.abha.update_profile(pincode="560001")
    assert server.calls("abha_profile_update") == 1


# ----------------------------------------------------------------------------------------------- delete


async def test_delete_needs_confirm_then_the_profile_is_gone(
    server: FakeHealthServer, client: ha.HealthClient, kyc_oid: str, tmp_path: Path
) -> None:
    refusals: list[dict[str, Any]] = [{}, {"confirm": False}]
    for kwargs in refusals:
        with pytest.raises(E.InvalidRequest, match="confirm=True"):
            await client.abha.delete_profile(**kwargs)
    assert server.calls("abha_profile_delete") == 0 and kyc_oid in server.abha_profile.profiles

    await client.abha.delete_profile(confirm=True)
    assert kyc_oid not in server.abha_profile.profiles
    with pytest.raises(E.NotFoundError):
        await client.abha.profile()
    with pytest.raises(E.NotFoundError):
        await client.abha.card(tmp_path / "card.png")
    with pytest.raises(E.NotFoundError):
        await client.abha.delete_profile(confirm=True)
    assert files(tmp_path) == []


async def test_delete_is_sent_once(server: FakeHealthServer, client: ha.HealthClient, kyc_oid: str) -> None:
    server.inject("abha_profile_delete", Fault(status=502, times=1))
    with pytest.raises(E.OutcomeUnknown):
        await client.abha.delete_profile(confirm=True)
    assert server.calls("abha_profile_delete") == 1 and kyc_oid in server.abha_profile.profiles


# ----------------------------------------------------------------------------------------------- card and QR


async def test_card_is_saved_to_a_path_readable_by_the_owner_only(
    server: FakeHealthServer, client: ha.HealthClient, kyc_oid: str, tmp_path: Path
) -> None:
    target = tmp_path / "card.png"
    target.write_bytes(b"an older card")
    assert await client.abha.card(target) == "image/png"
    assert target.read_bytes() == server.abha_profile.card_bytes(kyc_oid)
    assert files(tmp_path) == ["card.png"]  # no temporary file left
    assert stat.S_IMODE(target.stat().st_mode) & 0o077 == 0
    rec = last(server, "abha_card")
    assert rec.headers["X-Pt-Id"] == kyc_oid and "image/png" in rec.headers["Accept"]


async def test_card_is_written_to_a_binary_file_object(
    server: FakeHealthServer, client: ha.HealthClient, kyc_oid: str
) -> None:
    sink = io.BytesIO(b"kept:")
    sink.seek(0, io.SEEK_END)
    assert await client.abha.card(sink) == "image/png"
    assert sink.getvalue() == b"kept:" + server.abha_profile.card_bytes(kyc_oid)


async def test_a_pdf_card_and_a_chunked_card_are_taken(
    server: FakeHealthServer, client: ha.HealthClient, kyc_oid: str, tmp_path: Path
) -> None:
    server.abha_profile.card_format = "pdf"
    assert await client.abha.card(tmp_path / "card.pdf") == "application/pdf"
    assert (tmp_path / "card.pdf").read_bytes().startswith(b"%PDF-")
    server.abha_profile.card_format = "png"
    server.abha_profile.chunked = True
    assert await client.abha.card(str(tmp_path / "card.png")) == "image/png"
    assert (tmp_path / "card.png").read_bytes() == server.abha_profile.card_bytes(kyc_oid)


async def test_qr_image_and_qr_data(
    server: FakeHealthServer, client: ha.HealthClient, kyc_oid: str, tmp_path: Path
) -> None:
    assert await client.abha.qr(tmp_path / "qr.png") == "image/png"
    assert (tmp_path / "qr.png").read_bytes() == server.abha_profile.qr_bytes(kyc_oid)
    assert last(server, "abha_qr").query == []

    data = io.BytesIO()
    assert await client.abha.qr(data, as_json=True) == "application/json"
    assert last(server, "abha_qr").query == [("format", "json")]
    qr = json.loads(data.getvalue())
    assert qr["hidn"] == server.abha_profile.profiles[kyc_oid]["abha_number"] and "state name" in qr

    server.abha_profile.qr_answers_json = True  # the OpenAPI's only answer, without format=json
    assert await client.abha.qr(tmp_path / "qr.json") == "application/json"
    assert json.loads((tmp_path / "qr.json").read_bytes()) == qr


async def test_an_encrypted_qr_answer_is_written_decrypted(tmp_path: Path) -> None:
    async with FakeHealthServer(users=1, documents_per_user=1, encrypt_responses=True) as server:
        oid = server.data.user_ids[0]
        async with client_for(server, user_id=oid) as client:
            assert await client.abha.qr(tmp_path / "qr.json", as_json=True) == "application/json"
    assert json.loads((tmp_path / "qr.json").read_bytes())["hid"] == server.abha_profile.profiles[oid]["abha_address"]


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_an_oversized_card_leaves_no_file(
    server: FakeHealthServer, kyc_oid: str, tmp_path: Path, chunked: bool
) -> None:
    # chunked: read piece by piece, so the first 8 KiB are written before the cap is passed
    server.abha_profile.chunked, server.abha_profile.chunk_delay = chunked, 0.005
    assert len(server.abha_profile.card_bytes(kyc_oid)) > 8192
    target = tmp_path / "card.png"
    target.write_bytes(b"the card from before")
    sink = io.BytesIO(b"kept")
    sink.seek(4)
    async with client_for(server, user_id=kyc_oid, max_response_size=8192) as client:
        with pytest.raises(E.ResponseTooLarge):
            await client.abha.card(target)
        with pytest.raises(E.ResponseTooLarge):
            await client.abha.card(sink)
    assert files(tmp_path) == ["card.png"] and target.read_bytes() == b"the card from before"
    assert sink.getvalue() == b"kept"
    assert server.calls("abha_card") == 2  # a size refusal is not retried


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        (Fault(status=200, body=b"<html>maintenance</html>", content_type="text/html"), "'text/html'"),
        (Fault(status=200, body=ERROR_BODY), "an error body: ABDM-9999"),
        (Fault(status=200, body={**ERROR_BODY, "source_error": {"code": "9812345678"}}), "an error body: [redacted]"),
        (Fault(status=200, body=b"%PDF-1.4 not a png" * 10, content_type="image/png"), "not the image/png"),
        (Fault(status=200, body=b"", content_type="image/png"), "not the image/png"),
    ],
    ids=["html", "json-error", "json-error-mobile-as-code", "pdf-as-png", "empty"],
)
async def test_a_card_answer_of_the_wrong_type_is_a_typed_error_and_leaves_no_file(
    server: FakeHealthServer, client: ha.HealthClient, tmp_path: Path, fault: Fault, said: str
) -> None:
    server.inject("abha_card", fault)
    with pytest.raises(E.ResponseValidationError, match=re.escape(said)):
        await client.abha.card(tmp_path / "card.png")
    assert files(tmp_path) == []
    assert server.calls("abha_card") == 1


async def test_a_card_error_answer_is_typed_and_a_server_error_is_retried(
    server: FakeHealthServer, client: ha.HealthClient, kyc_oid: str, tmp_path: Path
) -> None:
    async with client_for(server, user_id="no-such-user") as stranger:
        with pytest.raises(E.NotFoundError) as info:
            await stranger.abha.card(tmp_path / "card.png")
    assert info.value.body["source_error"]["code"] == "NOT_FOUND" and files(tmp_path) == []

    server.inject("abha_card", Fault(status=503, body=ERROR_BODY, times=1))
    assert await client.abha.card(tmp_path / "card.png") == "image/png"
    assert server.calls("abha_card") == 3
    assert (tmp_path / "card.png").read_bytes() == server.abha_profile.card_bytes(kyc_oid)


async def test_a_body_cut_mid_way_is_fetched_again_from_the_start(
    server: FakeHealthServer, client: ha.HealthClient, kyc_oid: str, tmp_path: Path
) -> None:
    card = server.abha_profile.card_bytes(kyc_oid)
    server.abha_profile.cut_after = 5000
    assert await client.abha.card(tmp_path / "card.png") == "image/png"
    assert (tmp_path / "card.png").read_bytes() == card and files(tmp_path) == ["card.png"]
    server.abha_profile.cut_after = 5000
    sink = io.BytesIO(b"kept:")
    sink.seek(5)
    assert await client.abha.card(sink) == "image/png"
    assert sink.getvalue() == b"kept:" + card  # started over, not appended twice
    assert server.calls("abha_card") == 4


async def test_a_cancelled_download_leaves_no_partial_file(
    server: FakeHealthServer, client: ha.HealthClient, tmp_path: Path
) -> None:
    server.abha_profile.chunked, server.abha_profile.chunk_delay = True, 0.2
    task = asyncio.create_task(client.abha.card(tmp_path / "card.png"))
    for _ in range(200):  # until the first bytes are in the temporary file
        await asyncio.sleep(0.01)
        if any(name.endswith(".part") and (tmp_path / name).stat().st_size for name in files(tmp_path)):
            break
    else:
        pytest.fail("the download never started writing")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert files(tmp_path) == []


class _Pipe(io.RawIOBase):
    """A write-only stream that cannot seek back (a pipe, a socket)."""

    def __init__(self) -> None:
        self.data = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        self.data += bytes(b)
        return len(b)


async def test_a_cut_body_is_not_fetched_again_into_a_file_object_that_cannot_seek(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    server.abha_profile.cut_after = 5000
    pipe = _Pipe()
    with pytest.raises(E.TransportError, match="cut off"):
        await client.abha.card(pipe)  # type: ignore[arg-type]
    assert server.calls("abha_card") == 1 and 0 < len(pipe.data) <= 5000


async def test_a_card_is_fetched_again_with_a_refreshed_token(server: FakeHealthServer, kyc_oid: str) -> None:
    creds = ha.ClientCredentials(server.client_id, server.client_secret)
    async with ha.HealthClient(base_url=server.url, auth=creds, user_id=kyc_oid, retry=NO_WAIT) as client:
        assert await client.abha.card(io.BytesIO()) == "image/png"
        server.expire_tokens()
        sink = io.BytesIO()
        assert await client.abha.card(sink) == "image/png"
    assert sink.getvalue() == server.abha_profile.card_bytes(kyc_oid)
    assert server.calls("refresh") == 1 and server.calls("abha_card") == 3


async def test_card_targets_are_checked_before_sending(
    server: FakeHealthServer, client: ha.HealthClient, tmp_path: Path
) -> None:
    with pytest.raises(E.InvalidRequest, match="existing folder"):
        await client.abha.card(tmp_path / "missing" / "card.png")
    with pytest.raises(E.InvalidRequest, match="not a folder"):
        await client.abha.card(tmp_path)
    with (tmp_path / "card.txt").open("w") as text:
        with pytest.raises(E.InvalidArgumentType, match="binary"):
            await client.abha.card(text)  # type: ignore[arg-type]
    with pytest.raises(E.InvalidArgumentType):
        await client.abha.qr(b"card.png")  # type: ignore[arg-type]
    assert server.calls("abha_card") == 0 and server.calls("abha_qr") == 0


class _NoWritable:
    """A file-like object with read() and write() but no writable(): whether it can be written is unknown."""

    def read(self, size: int = -1) -> bytes:
        return b""

    def write(self, b: Any) -> int:
        return len(b)


async def test_a_file_object_not_open_for_writing_is_refused_before_sending(
    server: FakeHealthServer, client: ha.HealthClient, tmp_path: Path
) -> None:
    (tmp_path / "card.png").write_bytes(b"")
    with (tmp_path / "card.png").open("rb") as read_only:
        with pytest.raises(E.InvalidArgumentType, match="opened for writing"):
            await client.abha.card(read_only)
        with pytest.raises(E.InvalidArgumentType, match="opened for writing"):
            await client.abha.qr(read_only, as_json=True)
    with pytest.raises(E.InvalidArgumentType, match="opened for writing"):
        await client.abha.card(_NoWritable())  # type: ignore[arg-type]
    closed = io.BytesIO()
    closed.close()
    with pytest.raises(E.InvalidRequest, match="open file"):
        await client.abha.qr(closed)
    assert server.calls("abha_card") == 0 and server.calls("abha_qr") == 0


# ----------------------------------------------------------------------------------------------- search, pincode


async def test_search_finds_the_kyc_verified_abhas_of_a_mobile(
    server: FakeHealthServer, client: ha.HealthClient, kyc_oid: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="health_async")
    server.abha_profile.add("oid-second", first_name="Leela", kyc_verified=True)
    server.abha_profile.add("oid-mobile-only", first_name="Tara", kyc_verified=False)
    found = await client.abha.search("+91 98980-12345")
    assert isinstance(found, AbhaSearchResult) and found.count == 2 and found.txn_id
    assert [m.index for m in found.profiles] == [1, 2]
    names = {m.name for m in found.profiles}
    assert names == {server.abha_profile.profiles[kyc_oid]["full_name"], "Leela Iyer"}
    for match in found.profiles:
        assert match.kyc_verified is True and match.abha_number is not None
        assert re.fullmatch(r"xx-xxxx-xxxx-\d{4}", match.abha_number)
    rec = last(server, "abha_search")
    assert rec.json == {"mobile": SEEDED_PROFILE_MOBILE} and "X-Pt-Id" not in rec.headers  # the path declares none
    shown = repr(found) + repr(found.profiles) + caplog.text
    assert SEEDED_PROFILE_MOBILE not in shown and "Leela" not in shown and found.txn_id not in shown
    assert "@sbx" not in shown and "xx-xxxx" not in shown


async def test_search_with_no_match_is_empty(server: FakeHealthServer, client: ha.HealthClient) -> None:
    found = await client.abha.search("7000000001")
    assert found.profiles == () and found.count == 0 and found.txn_id


@pytest.mark.parametrize("mobile", ["12345", "5898012345", "+44 7911 123456", "98980l2345", ""])
async def test_search_refuses_a_bad_mobile_before_sending(
    server: FakeHealthServer, client: ha.HealthClient, mobile: str
) -> None:
    with pytest.raises(E.InvalidMobileNumber) as info:
        await client.abha.search(mobile)
    assert server.calls("abha_search") == 0
    assert not mobile or mobile not in str(info.value)


async def test_pincode_details(server: FakeHealthServer, client: ha.HealthClient) -> None:
    details = await client.abha.pincode("834001")
    assert details == PincodeDetails(
        pincode="834001", state_code="20", state_name="Jharkhand", district_code="339", district_name="Ranchi"
    )
    assert (await client.abha.pincode(" 560001 ")).district_name == "Bengaluru Urban"
    assert [r.path for r in server.requests] == [
        "/abdm/v1/registration/pincode/834001",
        "/abdm/v1/registration/pincode/560001",
    ]
    async with client_for(server) as registering:  # a user being registered has no OID yet: no X-Pt-Id needed
        assert (await registering.abha.pincode("110001")).state_name == "Delhi"
    assert "X-Pt-Id" not in last(server, "abha_pincode").headers


@pytest.mark.parametrize("pincode", ["83400", "8340011", "034001", "83400a", "८३४००१", "834 001"])
async def test_a_bad_pincode_is_refused_before_sending(
    server: FakeHealthServer, client: ha.HealthClient, pincode: str
) -> None:
    with pytest.raises(E.InvalidRequest, match="pincode"):
        await client.abha.pincode(pincode)
    assert server.calls("abha_pincode") == 0


async def test_an_unknown_pincode_is_a_typed_error(server: FakeHealthServer, client: ha.HealthClient) -> None:
    with pytest.raises(E.NotFoundError) as info:
        await client.abha.pincode("999999")
    assert info.value.status == 404 and info.value.body["source_error"]["code"] == "NOT_FOUND"
    assert server.calls("abha_pincode") == 1  # a 404 is final
