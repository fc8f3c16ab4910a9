"""Pronunciations beyond the server's words, through the sandbox: a user's own words, the server's patterns (refused
ones told why), the operator's global file; user > server > global, shown by /dictionary test and heard."""

from __future__ import annotations

import json

import pytest

from engine.base import Voice
from tests.audio_util import assert_same_speech, mono
from tests.e2e.conftest import make_settings
from tests.e2e.recorders import heard_say

pytestmark = pytest.mark.e2e
OPERATOR = {"words": {"gif": "graphic", "sql": "S Q L", "asap": "as soon as possible"},
            "patterns": {r"\d+ ?kg": "some weight", r"v\d+": "a version"}}


@pytest.fixture
def settings(tmp_path):
    path = tmp_path / "operator.json"
    path.write_text(json.dumps(OPERATOR))
    return make_settings(tmp_path, speech={"idle_leave_s": 0.0}, dictionary={"global_file": str(path)})


async def answer(sb, user, channel, command: str, **options) -> str:
    it = await sb.slash(user, channel, command, **options)
    text = await it.wait_text(timeout=20)
    assert it.ephemeral, text
    return text


async def test_user_over_server_over_global_in_what_is_said_and_heard(sb, demo, bot):
    manager, bob = sb.owner, sb.user("bob")
    demo.guild.add_member(manager, roles=[demo.guild.role("admins", 1 << 5)])  # Manage Server
    demo.guild.add_member(bob)
    said = "Send the gif and the sql asap, 5 kg of v2"
    assert await answer(sb, bob, demo.general, "dictionary test", text=said) == \
        "Would be said: Send the graphic and the S Q L as soon as possible, some weight of a version"
    assert "is now said as sequel" in await answer(sb, manager, demo.general, "dictionary add", word="sql",
                                                   say_as="sequel")
    assert "is now said as a number" in await answer(sb, manager, demo.general, "dictionary pattern add",
                                                     pattern=r"\d+", say_as="a number")
    assert "gif → jif" in await answer(sb, demo.alice, demo.general, "dictionary mine add", word="GIF", say_as="jif")
    # bob: the server's word and pattern over the operator's; alice: her own word over the operator's too
    assert await answer(sb, bob, demo.general, "dictionary test", text=said) == \
        "Would be said: Send the graphic and the sequel as soon as possible, a number kg of va number"
    expected = "Send the jif and the sequel as soon as possible, a number kg of va number"
    assert await answer(sb, demo.alice, demo.general, "dictionary test", text=said) == f"Would be said: {expected}"
    spoken: list[str] = []
    bot.speech.listeners.append(lambda _g, utt, _o: spoken.append(utt.request.text))
    heard = await heard_say(sb, demo, said)
    assert spoken == [expected]
    assert_same_speech(heard, mono(await bot.engine.synthesize_all(expected, Voice())),
                       mono(await bot.engine.synthesize_all(said, Voice())))
    listed = await answer(sb, demo.alice, demo.general, "dictionary mine list")
    assert listed == "gif → jif"
    assert await answer(sb, demo.alice, demo.general, "dictionary mine remove", word="gif") == "Removed."
    assert await answer(sb, demo.alice, demo.general, "dictionary mine remove", word="gif") == \
        "That word is not among yours."
    assert "graphic and the sequel" in await answer(sb, demo.alice, demo.general, "dictionary test", text=said)


async def test_patterns_that_could_backtrack_are_refused_with_the_reason_and_change_nothing(sb, demo, bot):
    manager = sb.owner
    demo.guild.add_member(manager, roles=[demo.guild.role("admins", 1 << 5)])
    for pattern, why in [(r"(a+)+b", "a repeat inside a repeat"), (r"(\w)\1", "backreferences"),
                         (r"foo(?=bar)", "lookarounds"), (r"(a|ab)*", "a choice inside a repeat"),
                         (r"(unclosed", "does not compile"), (r"x*", "can match empty text")]:
        assert why in await answer(sb, manager, demo.general, "dictionary pattern add", pattern=pattern,
                                   say_as="x")
    assert "Manage Server" in await answer(sb, demo.alice, demo.general, "dictionary pattern add",
                                           pattern="ok", say_as="fine")
    assert await bot.dictionary.patterns(demo.guild.id) == ()
    assert await answer(sb, demo.alice, demo.general, "dictionary pattern list") == \
        "This server has no patterns. Add one with /dictionary pattern add."
    await answer(sb, manager, demo.general, "dictionary pattern add", pattern=r"\bk8s\b", say_as="kubernetes")
    assert await answer(sb, demo.alice, demo.general, "dictionary pattern list") == "`\\bk8s\\b` → kubernetes"
    assert await answer(sb, manager, demo.general, "dictionary pattern remove", pattern=r"\bk8s\b") == "Removed."
    assert await bot.dictionary.patterns(demo.guild.id) == ()
