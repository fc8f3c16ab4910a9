"""The message context-menu commands through the sandbox: synced, "Speak this" in the invoker's voice,
"Speak in their voice" only with the author's consent (/voice lend)."""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile as sf
import soxr

from engine.voices import embedding
from tests.e2e.recorders import Heard
from tests.e2e.test_voices import SPOKEN, embed_pcm48, espeak_clip, final_edit, register

pytestmark = pytest.mark.e2e
MENUS = ("Speak this", "Speak in their voice")


async def heard_menu(sb, demo, user, message, name: str) -> bytes:
    """Run a menu on `message`; the channel's audio once it is quiet again."""
    capture = sb.capture(demo.guild)
    capture.clear()
    it = await sb.message_command(user, message, name)
    assert await it.wait_text(timeout=30) == "Reading it." and it.ephemeral
    await capture.wait_for_audio(1.0, timeout=60)
    await capture.wait_until_silent(0.8, timeout=60)
    return capture.pcm()


async def refused(sb, user, message, name: str) -> str:
    it = await sb.message_command(user, message, name)
    text = await it.wait_text(timeout=30)
    assert it.ephemeral
    return text


async def test_both_menus_are_synced_as_guild_only_message_commands(sb, demo, bot):
    for name in MENUS:
        menu = sb.find_command(name, demo.guild, type_=3)
        assert menu["type"] == 3 and not menu.get("options")
        assert menu.get("contexts") == [0] or menu.get("dm_permission") is False, menu


async def test_speak_in_their_voice_needs_the_authors_consent(sb, demo, bot):
    bob = sb.user("bob")
    demo.guild.add_member(bob)
    clip = espeak_clip()
    it, press = await register(sb, bob, demo.general, "robot", clip)
    assert (await final_edit(it, press)).startswith("Registered 'robot'")
    it = await sb.slash(bob, demo.general, "voice use", name="robot")
    assert "now spoken in 'robot'" in await it.wait_text(timeout=20)
    robot_id = (await bot.prefs.user(bob.id)).active_voice_id
    heard = Heard(bot)
    voices: list[str | None] = []
    bot.speech.listeners.append(lambda _g, utt, _o: voices.append(utt.request.voice.name))
    message = await sb.post(bob, demo.general, SPOKEN)

    # without consent: refused, nothing spoken, no voice channel joined
    text = await refused(sb, demo.alice, message, "Speak in their voice")
    assert "bob has not allowed others to use their voice" in text and "/voice lend on" in text, text
    assert heard.items == [] and not bot.speech.is_connected(demo.guild.id)

    it = await sb.slash(bob, demo.general, "voice lend", state="on")
    assert "Others may now" in await it.wait_text(timeout=20)
    theirs = await heard_menu(sb, demo, demo.alice, message, "Speak in their voice")
    mine = await heard_menu(sb, demo, demo.alice, message, "Speak this")  # alice has no voice: the default
    await heard.wait_count(2)
    assert heard.texts() == [SPOKEN, SPOKEN] and voices == [robot_id, "default"], (heard.texts(), voices)
    ref, rate = sf.read(io.BytesIO(clip), dtype="float32")
    ref16 = embedding.embed(soxr.resample(ref, rate, 16_000).astype(np.float32))
    assert embedding.similarity(embed_pcm48(theirs), ref16) > embedding.similarity(embed_pcm48(mine), ref16)

    it = await sb.slash(bob, demo.general, "voice lend", state="off")
    assert "Only you" in await it.wait_text(timeout=20)
    assert "has not allowed" in await refused(sb, demo.alice, message, "Speak in their voice")
    assert len(heard.items) == 2


async def test_opted_out_empty_dm_and_own_messages(sb, demo, bot):
    heard = Heard(bot)
    carol = sb.user("carol")
    demo.guild.add_member(carol)
    it = await sb.slash(carol, demo.general, "optout")
    await it.wait_text(timeout=20)
    message = await sb.post(carol, demo.general, "Please do not read this.")
    for name in MENUS:
        assert "carol opted out of being read aloud" in await refused(sb, demo.alice, message, name)
    picture = await sb.post(demo.alice, demo.general, "", attachments=[sb.attachment("a.png", b"\x89PNG", "image/png")])
    assert "no text to read" in await refused(sb, demo.alice, picture, "Speak this")
    assert heard.items == []
    in_dm = await sb.post(demo.alice, sb.dm_channel(demo.alice), "Read this from a DM.")
    for name in MENUS:
        assert "only works in a server" in await refused(sb, demo.alice, in_dm, name)
    own = await sb.post(demo.alice, demo.general, "My own words, in my own voice.")
    await heard_menu(sb, demo, demo.alice, own, "Speak in their voice")  # one's own voice needs no lending
    await heard.wait_count(1)
    assert heard.texts() == ["My own words, in my own voice."]
