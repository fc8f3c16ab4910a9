"""/dictionary through the sandbox: an entry changes what is heard; list, export and import round trip."""

from __future__ import annotations

import json

import pytest

from engine.base import Voice
from tests.audio_util import mono, stretched_envelope_correlation
from tests.e2e.recorders import heard_say

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
    refs = [mono(await bot.engine.synthesize_all(SUBSTITUTED, Voice())) for _ in range(2)]
    other = mono(await bot.engine.synthesize_all(SAID, Voice()))
    assert abs(len(heard) - len(refs[0])) / len(refs[0]) < 0.15
    corr = max(stretched_envelope_correlation(heard, r) for r in refs)
    assert corr > 0.6 and corr > stretched_envelope_correlation(heard, other), corr


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
    exported = answer.message.attachments[0].data
    assert json.loads(exported) == {"gif": "jif", "sql": "sequel"}
    bad = sb.attachment("dictionary.json", json.dumps({"ok": "fine", "two words": "no"}).encode(), "application/json")
    it = await sb.slash(manager, demo.general, "dictionary import", file=bad)
    assert "Nothing was imported" in await it.wait_text(timeout=20)
    assert await bot.dictionary.entries(demo.guild.id) == {"gif": "jif", "sql": "sequel"}
    good = sb.attachment("dictionary.json", json.dumps({"kubectl": "cube control"}).encode(), "application/json")
    it = await sb.slash(manager, demo.general, "dictionary import", file=good)
    assert "Imported 1 words" in await it.wait_text(timeout=20)
    assert await bot.dictionary.entries(demo.guild.id) == {"kubectl": "cube control"}
