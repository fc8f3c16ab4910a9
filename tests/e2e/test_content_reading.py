"""README's "How messages are read" through the sandbox: each example posted in a readout channel is read as its
row says, and one mixing the kinds is heard as its reading."""

from __future__ import annotations

import pytest

from engine.base import Voice
from tests.audio_util import assert_same_speech, mono
from tests.content_examples import ATTACHMENTS, EXAMPLES
from tests.e2e.recorders import heard_post
from tests.e2e.test_readout import readout  # noqa: F401 (the fixture)

pytestmark = pytest.mark.e2e
MIXED = "see https://example.com/page. gg <:pepe_laugh:123> ||the twist|| ```py\nprint(1)\n```"


async def test_each_example_is_read_as_the_readme_says(sb, demo, bot, readout):
    it = await sb.slash(sb.owner, demo.general, "settings set", setting="xsaid", value="off")
    assert "xsaid is now off" in await it.wait_text(timeout=20)
    bob = sb.user("Bob")
    demo.guild.add_member(bob)
    mods = demo.guild.role("Mods")
    ids = {"user": f"<@{bob.id}>", "role": f"<@&{mods.id}>", "channel": f"<#{demo.general.id}>"}
    for n, (_kind, written, _said) in enumerate(EXAMPLES, 1):
        content = written.format(**ids)
        await sb.post(demo.alice, demo.general, content, mentions=[bob] if ids["user"] in content else None)
        await readout.wait_count(n)  # one at a time: the author's rate limit would skip a burst
    _kind, files, said = ATTACHMENTS
    await sb.post(demo.alice, demo.general, "", attachments=[sb.attachment(f, b"...") for f in files])
    await readout.wait_count(len(EXAMPLES) + 1)
    assert readout.texts() == [s for _k, _w, s in EXAMPLES] + [said]
    assert {o for _g, _t, o in readout.items} == {"played"}


async def test_a_message_mixing_the_kinds_is_heard_as_its_reading(sb, demo, bot, readout):
    heard = await heard_post(sb, demo, demo.alice, MIXED)
    reading = "alice said, see a link. gg pepe laugh code block"
    assert readout.texts() == [reading]
    assert_same_speech(heard, mono(await bot.engine.synthesize_all(reading, Voice())),
                       mono(await bot.engine.synthesize_all("alice said, see example dot com slash page", Voice())))
