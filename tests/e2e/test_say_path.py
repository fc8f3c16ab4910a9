"""Every way of asking to speak goes through SpeechService.say: cleaned text, the voice, the queue bound."""

from __future__ import annotations

import pytest

from tests.e2e.test_voices import espeak_clip, final_edit, register

pytestmark = pytest.mark.e2e


async def test_voice_preview_speaks_names_and_a_link_not_raw_markup(sb, demo, bot):
    bob = sb.user("bob")
    demo.guild.add_member(bob)
    it, press = await register(sb, demo.alice, demo.general, "robot", espeak_clip())
    assert (await final_edit(it, press)).startswith("Registered 'robot'")
    it = await sb.slash(demo.alice, demo.general, "join")
    assert (await it.wait_text(timeout=30)).startswith("Joined")
    spoken: list[str] = []
    bot.speech.listeners.append(lambda _g, utt, _outcome: spoken.append(utt.request.text))
    capture = sb.capture(demo.guild)
    capture.clear()
    it = await sb.slash(demo.alice, demo.general, "voice preview", name="robot", text=f"<@{bob.id}> https://x.y")
    assert "Previewing 'robot'" in await it.wait_text(timeout=30)
    await capture.wait_for_audio(0.3, timeout=60)
    await capture.wait_until_silent(0.6, timeout=60)
    assert len(spoken) == 1
    text = spoken[0]
    assert "bob" in text and "a link" in text, text
    assert "<@" not in text and "http" not in text and "x.y" not in text, text


async def test_voice_preview_respects_the_queue_bound(sb, demo, bot):
    await bot.prefs.update_guild(demo.guild.id, max_queue=1)
    it, press = await register(sb, demo.alice, demo.general, "robot", espeak_clip())
    assert (await final_edit(it, press)).startswith("Registered 'robot'")
    it = await sb.slash(demo.alice, demo.general, "say", text="A long sentence to keep the queue busy. " * 4)
    assert (await it.wait_text(timeout=30)) == "Speaking."
    it = await sb.slash(demo.alice, demo.general, "say", text="The one that waits.")
    await it.wait_text(timeout=30)
    assert len(bot.speech.speaker(demo.guild.id).pending()) == 1  # the queue is at its bound
    it = await sb.slash(demo.alice, demo.general, "voice preview", name="robot")
    answer = await it.wait_text(timeout=30)
    assert "full" in answer.lower(), answer
