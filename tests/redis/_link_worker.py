"""One hospital web worker for tests/redis/test_redis_link_store.py, run as a child process: an aiohttp app serving
``webhooks.abdm_handler`` with a patient's own search answered (``on_discover``, ``on_link_otp``, ``on_linked``),
whose pending links are a ``RedisLinkOtpStore`` shared with the other workers (and whose seen store is the
in-memory default: each worker its own). The SMS sender appends ``mobile otp`` to ``PHONE_FILE`` (the test's
patient's phone); ``on_linked`` appends this worker's ``LABEL`` to ``LINKED_FILE``. It writes its port to
``PORT_FILE`` and serves until killed.

Usage: ``python -m tests.redis._link_worker FAKE_URL TOKEN CLIENT_ID REDIS_URL NAME OTP_KEY_HEX SECRET LABEL
PHONE_FILE LINKED_FILE PORT_FILE``
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import health_async as ha
from health_async import webhooks
from health_async.models import CareContext, CareContextDiscover, DiscoverLinkInit, HiType, MatchedPatient
from health_async.redis import RedisLinkOtpStore

from ._serve import serve_until_killed

MOBILE = "9812345678"
VISITS = (
    CareContext("OPD-2024-17", "OP visit, 3 March 2024", HiType.OP_CONSULTATION),
    CareContext("LAB-88", "Lipid profile", HiType.DIAGNOSTIC_REPORT),
)


def _append(path: str, line: str) -> None:
    with Path(path).open("a") as f:
        f.write(line + "\n")


async def main(argv: list[str]) -> None:
    fake_url, token, client_id, redis_url, name, key_hex, secret, label, phone, linked, port_file = argv

    async def on_discover(request: CareContextDiscover) -> MatchedPatient:
        return MatchedPatient("PT-1042", "Meera Krishnan", VISITS, mobile=MOBILE)

    async def on_link_otp(mobile: str, otp: str, request: DiscoverLinkInit) -> None:
        await asyncio.to_thread(_append, phone, f"{mobile} {otp}")

    async def on_linked(link: webhooks.PendingLink) -> None:
        await asyncio.to_thread(_append, linked, f"{label} {link.abha_address} {len(link.care_contexts)}")

    async with (
        ha.HealthClient(base_url=fake_url, token=token, client_id=client_id, user_id="oid-1") as client,
        RedisLinkOtpStore(redis_url, name=name, otp_key=bytes.fromhex(key_hex)) as store,
    ):
        handler = webhooks.abdm_handler(
            secret, client=client, on_discover=on_discover, on_link_otp=on_link_otp, on_linked=on_linked,
            link_store=store,
        )  # fmt: skip
        await serve_until_killed("/abdm", handler.handle, port_file, aclose=handler.aclose)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
