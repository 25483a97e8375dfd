"""Property-based runs over the response path: any status, headers and body give a result or a typed HealthError."""

from __future__ import annotations

from typing import Any

import orjson
from aioresponses import aioresponses
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import health_async as ha
from health_async import jwe

from ..conftest import BASE

KEY = jwe.derive_key("fuzz-key-16bytes")

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=10), c, max_size=5),
    max_leaves=15,
)
_bodies = st.one_of(
    st.binary(max_size=200),
    _json.map(orjson.dumps),
    st.builds(lambda pt: orjson.dumps(jwe.encrypt(pt, KEY)), st.binary(max_size=60)),
    st.builds(
        lambda env, k, v: orjson.dumps({**env, k: v}),
        st.just(jwe.encrypt(b'{"txn_id":"t"}', KEY)),
        st.sampled_from(["iv", "tag", "ciphertext", "protected"]),
        st.text(max_size=30),
    ),
)
_statuses = st.sampled_from([200, 201, 204, 400, 401, 403, 404, 408, 409, 413, 429, 500, 502, 503, 504, 599])
_headers = st.dictionaries(
    st.sampled_from(["Retry-After", "Content-Type", "X-Request-Id"]),
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=20),
    max_size=3,
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(status=_statuses, headers=_headers, body=_bodies, operation=st.sampled_from(["describe", "profile", "init"]))
async def test_any_response_gives_a_result_or_a_typed_error(
    mocked: aioresponses, status: int, headers: dict[str, str], body: bytes, operation: str
) -> None:
    policy = ha.RetryPolicy(attempts=1)
    async with ha.HealthClient(
        base_url=BASE, token="t", client_id="c", user_id="u", encryption_key=KEY, retry=policy
    ) as client:
        calls: dict[str, Any] = {
            "describe": (f"{BASE}/mr/api/v1/docs/d", "GET", lambda: client.documents.describe("d")),
            "profile": (f"{BASE}/profiles/v1/emr-user/u", "GET", lambda: client.profiles.get("u")),
            "init": (
                f"{BASE}/abdm/na/v1/registration/aadhaar/init",
                "POST",
                lambda: client.abha.aadhaar_init("234567890124"),
            ),
        }
        url, method, call = calls[operation]
        mocked.add(url, method, status=status, body=body, headers=headers)
        try:
            result = await call()
        except ha.HealthError:
            return
        assert result is not None
