"""/healthz and Prometheus /metrics of a running bot, after it has spoken."""

from __future__ import annotations

import aiohttp
import pytest

from demo.sandbox_bot import sandbox_settings, start_bot
from tests.e2e.conftest import make_settings

pytestmark = pytest.mark.e2e


async def test_health_and_metrics_after_speaking(sb, demo, tmp_path):
    settings = make_settings(tmp_path, web={"enabled": True, "port": 0}, speech={"idle_leave_s": 0.0})
    running = await start_bot(sb, sandbox_settings(settings, sb))
    try:
        bot = running.bot
        base = f"http://127.0.0.1:{bot.web.port}"
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{base}/healthz") as r:
                assert r.status == 200 and (await r.json())["status"] == "ok"
            capture = sb.capture(demo.guild)
            it = await sb.slash(demo.alice, demo.general, "say", text="Counting this one in the metrics.")
            await it.wait_text(timeout=30)
            await capture.wait_for_audio(0.5, timeout=30)
            await capture.wait_until_silent(0.6, timeout=30)
            async with http.get(f"{base}/metrics") as r:
                text = await r.text()
        assert 'voicebot_utterances_total{kind="say",outcome="played"} 1.0' in text
        assert "voicebot_ttfa_seconds_count 1.0" in text
        assert "voicebot_voice_connections 1.0" in text
        assert f'voicebot_queue_length{{guild="{demo.guild.id}"}} 0.0' in text
        assert "voicebot_engine_rtf" in text and "voicebot_underruns_total" in text
    finally:
        await running.stop()
