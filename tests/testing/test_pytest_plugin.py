"""The pytest11 plugin: users get ``fake_health_server`` and ``health_client`` fixtures in their own suites."""

from __future__ import annotations

import pytest


def _plugin_args(pytestconfig: pytest.Config) -> list[str]:
    # Installed packages register the plugin through the pytest11 entry point; a plain checkout needs -p.
    if pytestconfig.pluginmanager.hasplugin("health_async"):
        return []
    return ["-p", "health_async.testing.pytest_plugin"]


def test_fixtures_in_a_user_suite(pytester: pytest.Pytester, pytestconfig: pytest.Config) -> None:
    pytester.makeini(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\nfilterwarnings = error\n"
    )
    pytester.makepyfile(
        """
        import pytest
        import health_async as ha
        from health_async.testing import Fault

        async def test_describe(health_client, fake_health_server):
            user = fake_health_server.data.user_ids[0]
            doc_id = fake_health_server.data.document_ids(user)[0]
            doc = await health_client.documents.describe(doc_id)
            assert doc.document_id == doc_id
            assert fake_health_server.calls("describe") == 1

        async def test_faults_are_absorbed_without_sleeping(health_client, fake_health_server):
            user = fake_health_server.data.user_ids[0]
            fake_health_server.inject("describe", Fault(status=503, times=2))
            doc = await health_client.documents.describe(fake_health_server.data.document_ids(user)[0])
            assert doc is not None
            assert fake_health_server.calls("describe") == 3

        async def test_typed_errors(health_client):
            with pytest.raises(ha.DocumentNotFound):
                await health_client.documents.describe("no-such-document")

        # The two examples of the README's "Testing your code", verbatim.
        async def test_my_ingest_survives_a_flaky_service(health_client, fake_health_server):
            fake_health_server.inject("describe", Fault(status=503, rate=0.3))           # 30% of describes fail
            fake_health_server.inject("describe", Fault(status=429, retry_after=0.1, times=1))
            user = fake_health_server.data.user_ids[0]
            ids = fake_health_server.data.document_ids(user)
            results = [r async for r in health_client.documents.describe_many(ids)]      # your code here
            assert all(r.ok or isinstance(r.error, ha.ServerError) for r in results)    # typed, never lost
            assert fake_health_server.calls("describe") > len(ids)                       # retries happened

        async def test_otp_is_never_sent_twice(health_client, fake_health_server):
            fake_health_server.inject("aadhaar_init", Fault(status=500, times=1))
            with pytest.raises(ha.OutcomeUnknown):         # a 500 without ABDM's answer: the OTP may have gone out
                await health_client.abha.aadhaar_init(fake_health_server.data.valid_aadhaar[0])
            assert fake_health_server.calls("aadhaar_init") == 1
        """
    )
    result = pytester.runpytest("-q", *_plugin_args(pytestconfig))
    result.assert_outcomes(passed=5)
