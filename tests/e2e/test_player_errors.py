"""Failures in the voice driver's thread (Opus, DAVE, transport encryption) reach the log (with the request id), the
user."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e


async def test_a_player_error_reaches_the_log_and_the_user(sb, demo, bot, caplog, monkeypatch):
    from bot.speech.connection.voice_sink import VoiceSink

    def broken(self, packet):  # an encryption or socket failure in the driver's thread, where frames are sent
        raise RuntimeError("injected player failure")

    monkeypatch.setattr(VoiceSink, "send_opus", broken)
    it = await sb.slash(demo.alice, demo.general, "say", text="This will not play.")
    told = await it.wait(lambda i: next((r for r in i.responses if "Playback failed" in (r.content or "")), None),
                         timeout=30, what="the playback failure message")
    assert told.ephemeral
    failures = [r for r in caplog.records if "audio player failed" in r.getMessage()]
    assert failures and failures[0].exc_info and "injected player failure" in str(failures[0].exc_info[1])
