"""/dictionary through the sandbox: an entry changes what is heard; list, export and import round trip; /voice name."""

from __future__ import annotations

import json

import aiohttp
import pytest

from engine.base import Voice
from tests.audio_util import assert_same_speech, mono
from tests.e2e.recorders import Heard, heard_say
from tests.e2e.test_readout import enable_readout, join

pytestmark = pytest.mark.e2e
SAID = "Please send me the gif before lunch."
SUBSTITUTED = "Please send me the graphics file before lunch."


async def test_an_entry_changes_what_is_heard(sb, demo, bot):
    manager = sb.owner
    demo.guild.add_member(manager, roles=[demo.guild.role("admins", 1 << 5)])  # Manage Server
    it = await sb.slash(manager, demo.general, "dictionary add", word="GIF", say_as="graphics file")
    assert "is now said as graphics file" in await it.wait_text(timeout=20)
    spoken: list[str] = []
    bot.speech.listeners.append(lambda _g, utt, _o: spoken.append(utt.request.text))
    heard = await heard_say(sb, demo, SAID)
    assert spoken == [SUBSTITUTED]
    # the heard audio is the engine's rendering of the substituted text, not of the original
    reference = mono(await bot.engine.synthesize_all(SUBSTITUTED, Voice()))
    assert_same_speech(heard, reference, mono(await bot.engine.synthesize_all(SAID, Voice())))


async def test_list_export_import_and_a_bad_import_changes_nothing(sb, demo, bot):
    manager = sb.owner
    demo.guild.add_member(manager, roles=[demo.guild.role("admins", 1 << 5)])
    for word, say in (("gif", "jif"), ("sql", "sequel")):
        it = await sb.slash(manager, demo.general, "dictionary add", word=word, say_as=say)
        await it.wait_text(timeout=20)
    it = await sb.slash(demo.alice, demo.general, "dictionary list")
    listed = await it.wait_text(timeout=20)
    assert "gif → jif" in listed and "Page 1 of 1 (2 words)" in listed
    it = await sb.slash(demo.alice, demo.general, "dictionary export")
    answer = await it.wait_response(timeout=20)
    assert answer.ephemeral
    async with aiohttp.ClientSession() as http, http.get(answer.message.attachments[0].url) as resp:
        exported = await resp.read()  # as a Discord client downloads it
    assert resp.headers["Content-Type"] == "application/json"
    assert json.loads(exported) == {"gif": "jif", "sql": "sequel"}
    bad = sb.attachment("dictionary.json", json.dumps({"ok": "fine", "two words": "no"}).encode(), "application/json")
    it = await sb.slash(manager, demo.general, "dictionary import", file=bad)
    assert "Nothing was imported" in await it.wait_text(timeout=20)
    assert await bot.dictionary.entries(demo.guild.id) == {"gif": "jif", "sql": "sequel"}
    good = sb.attachment("dictionary.json", json.dumps({"kubectl": "cube control"}).encode(), "application/json")
    it = await sb.slash(manager, demo.general, "dictionary import", file=good)
    assert "Imported 1 words" in await it.wait_text(timeout=20)
    assert await bot.dictionary.entries(demo.guild.id) == {"kubectl": "cube control"}
    # the export imports back: the dictionary is as it was exported
    again = sb.attachment("dictionary.json", exported, "application/json")
    it = await sb.slash(manager, demo.general, "dictionary import", file=again)
    assert "Imported 2 words" in await it.wait_text(timeout=20)
    assert await bot.dictionary.entries(demo.guild.id) == {"gif": "jif", "sql": "sequel"}
    for junk in (b"{not json", b"[]", json.dumps({"gif": "x" * 101}).encode()):
        it = await sb.slash(manager, demo.general, "dictionary import", file=sb.attachment("d.json", junk))
        text = await it.wait_text(timeout=20)
        assert "Imported" not in text and it.ephemeral, text
    assert await bot.dictionary.entries(demo.guild.id) == {"gif": "jif", "sql": "sequel"}


async def test_a_users_name_is_said_as_they_chose_in_xsaid_and_mentions(sb, demo, bot):
    bob = sb.user("bob")
    demo.guild.add_member(bob)
    await sb.user_joins_voice(bob, demo.voice)  # readout reads members of the bot's channel (require_voice)
    await enable_readout(sb, demo)
    await join(sb, demo)
    heard = Heard(bot)
    it = await sb.slash(bob, demo.general, "voice name", say_as="x" * 41)
    assert "at most 40 characters" in await it.wait_text(timeout=20)
    it = await sb.slash(bob, demo.general, "voice name", say_as="Bobby  Tables")
    assert "Your name is now said as Bobby Tables" in await it.wait_text(timeout=20)
    await sb.post(bob, demo.general, "hello")
    await sb.post(demo.alice, demo.general, f"hi <@{bob.id}>", mentions=[bob])
    await heard.wait_count(2)
    it = await sb.slash(demo.alice, demo.general, "say", text=f"<@{bob.id}> is here")
    await it.wait_text(timeout=30)
    await heard.wait_count(3)
    # a guild nickname is the more specific choice: it wins in that guild
    it = await sb.slash(bob, demo.general, "nickname", name="Robert")
    await it.wait_text(timeout=20)
    await sb.post(bob, demo.general, "again")
    await heard.wait_count(4)
    it = await sb.slash(bob, demo.general, "nickname")
    await it.wait_text(timeout=20)
    it = await sb.slash(bob, demo.general, "voice name")
    assert "as written again" in await it.wait_text(timeout=20)
    await sb.post(demo.alice, demo.general, "and now")
    await sb.post(bob, demo.general, "bye")
    await heard.wait_count(6)
    assert heard.texts() == ["Bobby Tables said, hello", "alice said, hi Bobby Tables", "Bobby Tables is here",
                             "Robert said, again", "alice said, and now", "bob said, bye"], heard.texts()
