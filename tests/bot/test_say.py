"""SayOrder -> spoken text (text/say.py spoken_text): the refusal, the one cut, the frame and the dictionary."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot import guild_options
from bot.config import MORE, Settings
from bot.dictionary import Layer, Rules
from bot.readout import compose
from bot.speech.text.say import Reason, Refusal, SayOrder, spoken_text, truncate
from bot.speech.text.text import TextOptions
from bot.storage.settings_repo import GuildPrefs
from tests.bot.test_text import assert_clean

CONFIG = Settings()
PREFS = guild_options.effective(GuildPrefs(guild_id=0), CONFIG)  # max_length 300 under the bot's 500


def said(text: str, *, kind: str = "say", frame=None, words=None, speech=CONFIG.speech, prefs=PREFS):
    order = SayOrder(guild=None, author=None, text=text, kind=kind,  # type: ignore[arg-type]
                     cut_long=kind == "readout", names={1: "Alice"}, frame=frame)
    return asyncio.run(spoken_text(order, speech, prefs, Rules((Layer(words or {}),))))


def test_markup_in_words_then_the_dictionary():
    assert said("**hi** <@1>, gg", words={"gg": "good game"}) == ("hi Alice, good game", "hi Alice, good game")


def test_asked_for_text_over_the_bots_limit_is_refused_and_empty_text_too():
    limit = CONFIG.speech.max_text_chars
    longest = ("word " * limit)[:limit]
    assert said(longest)[0] == longest.strip()
    with pytest.raises(Refusal) as too_long:
        said(longest + "s")
    assert too_long.value.reason is Reason.TOO_LONG and f"the limit is {limit}" in str(too_long.value)
    with pytest.raises(Refusal) as empty:
        said("**__||||``")
    assert empty.value.reason is Reason.EMPTY


def test_a_readout_message_is_cut_at_the_guilds_max_length_with_a_marker():
    text, body = said("word " * 400, kind="readout")
    assert text == body and text.endswith(MORE) and len(text) <= 300 + len(MORE)
    assert set(text.removesuffix(MORE).split(" ")) == {"word"}


def test_the_dictionary_is_cut_too():
    text, _ = said("gg " * 100, words={"gg": "good game " * 10})
    assert text.endswith(MORE) and len(text) <= CONFIG.speech.max_text_chars + len(MORE)


def test_the_frame_is_outside_the_guilds_limit_and_inside_the_bots():
    frame = lambda body: compose("alice", body, ["image"], xsaid=True)  # noqa: E731
    text, body = said("word " * 400, kind="readout", frame=frame)
    assert text == f"alice said, {body}. alice sent an image" and len(body) <= 300 + len(MORE)
    small = dataclasses.replace(CONFIG.speech, max_text_chars=60)
    text, body = said("word " * 400, kind="readout", frame=frame, speech=small,
                      prefs=dataclasses.replace(PREFS, max_message_chars=60))
    assert text.startswith("alice said, word word") and text.endswith(". alice sent an image"), text
    assert body.endswith(MORE) and len(text) <= 60 + len(MORE)


@pytest.mark.parametrize("kind", ["readout", "say"])
@pytest.mark.parametrize("hostile", [
    "\U0001f600\U0001f603" * 2_000, "<t:1:D><t:2:D>" * 300, "z\u0301\u0302\u0303\u0304" * 800, "<@1> " * 800,
])
def test_hostile_text_is_spoken_clean_within_the_limit(kind, hostile):
    try:
        text, _ = said(hostile, kind=kind)
    except Refusal as exc:
        assert kind == "say" and exc.reason is Reason.TOO_LONG
        return
    assert_clean(text, TextOptions())
    assert len(text) <= (300 if kind == "readout" else 500) + len(MORE)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400), st.integers(1, 300))
def test_truncate_keeps_a_prefix_within_the_limit(text, max_chars):
    out = truncate(text, max_chars)
    assert len(out) <= max_chars + len(MORE)
    if len(text) <= max_chars:
        assert out == text
    else:
        assert out.endswith("and more")
        assert text.startswith(out.removesuffix(MORE).removesuffix("and more"))


def test_the_servers_repeated_characters_caps_runs():
    assert said("nooooooo!!!!!!")[0] == "nooo!!!"  # the default, 3
    assert said("nooooooo!!!!!!", prefs=dataclasses.replace(PREFS, repeated_characters=1))[0] == "no!"
    assert said("nooooooo 2000000", prefs=dataclasses.replace(PREFS, repeated_characters=6))[0] == "noooooo 2000000"
