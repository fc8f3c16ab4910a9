"""Discord message -> speakable text: one example per rule, and properties that hold for any input."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.speech.text.text import (
    DISCORD_MAX_CHARS,
    Mentions,
    TextOptions,
    attachment_kind,
    attachment_phrase,
    speakable,
)

FEW = settings(max_examples=200, deadline=None)
NAMES = Mentions(users={1: "Alice", 2: "Bob_the_Builder"}, roles={5: "Mods"}, channels={7: "general"})
# Arabic, English, Hebrew, Chinese: kept as they are.
MIXED_SCRIPTS = "\u0645\u0631\u062d\u0628\u0627 hello \u05e9\u05dc\u05d5\u05dd \u4f60\u597d"


@pytest.mark.parametrize(
    "content, expected",
    [
        # mentions
        ("hi <@1>", "hi Alice"),
        ("hi <@!1>", "hi Alice"),
        ("<@2> joined", "Bob the Builder joined"),
        ("ask <@&5> in <#7>", "ask Mods in general"),
        ("<@9> <@&9> <#9>", "someone a role a channel"),
        ("@everyone and @here", "everyone and here"),
        ("mail me@everyone.com", "mail me@everyone.com"),
        ("try </ping:1> or </music play:2>", "try ping or music play"),
        ("<t:1700000000:D>", "November 14, 2023"),
        ("<t:1700000000>", "November 14, 2023"),
        ("in <t:1700000000:R>", "in a time"),
        ("at <t:99999999999999999999:f>", "at a time"),
        # emoji
        ("<:pepe_laugh:123>", "pepe laugh"),
        ("<a:party_parrot:456> yay", "party parrot yay"),
        ("\U0001f600", "grinning face"),
        ("ok \U0001f44d\U0001f3fd", "ok thumbs up"),
        ("\u2764\ufe0f", "red heart"),
        ("\u2764\ufe0f\u200d\U0001f525", "heart on fire"),
        ("\U0001f468\u200d\U0001f469\u200d\U0001f467", "family"),
        ("\U0001f9d1\U0001f3ff\u200d\U0001f4bb", "technologist"),
        ("\U0001f937\u200d\u2642\ufe0f", "shrug"),
        ("\U0001f1eb\U0001f1f7 \U0001f1f5\U0001f1f9", "flag of France a flag"),
        ("\U0001f602" * 6, "face with tears of joy"),
        ("\U0001f602 \U0001f602 \U0001f602", "face with tears of joy"),
        ("<:kek:1><:kek:1><:kek:1>", "kek"),
        ("<@1> <@1> <@1> <@1>", "Alice"),
        ("1\ufe0f\u20e3 place", "1 place"),
        # links
        ("see https://example.com/page", "see a link"),
        ("see https://example.com/page.", "see a link."),
        ("(https://example.com/page)", "(a link)"),
        ("quiet <https://example.com>", "quiet a link"),
        ("read [the docs](https://docs.example.com/x_(y)) now", "read the docs now"),
        ("[](https://example.com)", "a link"),
        ("HTTP://EXAMPLE.COM", "a link"),
        # code
        ("```py\nprint('<@1>')\n```", "code block"),
        ("run `pip install x`", "run pip install x"),
        ("see `" + "x" * 31 + "`", "see code"),
        ("a ``b`c`` d", "a bc d"),
        # markdown
        ("**bold** *it* __under__ ~~gone~~ ***both***", "bold it under gone both"),
        ("> quoted\n>>> block", "quoted. block"),
        ("# Title\n## Sub\n-# small print", "Title. Sub. small print"),
        ("- one\n* two\n1. three\n2) four", "one. two. three. four"),
        ("\\*not italic\\*", "*not italic*"),
        ("snake_case name", "snake case name"),
        ("a ||secret|| b", "a b"),
        # lines, repeats, whitespace
        ("first\nsecond!\n\n\nthird", "first. second! third"),
        ("sooooooo good!!!!!!", "sooo good!!!"),
        ("hahahahahahaha", "hahaha"),
        ("1000000 people", "1000000 people"),
        ("  lots \t of   space  ", "lots of space"),
        # unicode
        ("\U0001d421\U0001d41e\U0001d425\U0001d425\U0001d428 \uff57\uff4f\uff52\uff4c\uff44", "hello world"),
        ("\u202eevil\u202c \u200fok\u2066", "evil ok"),
        ("a\x00b\x07c\x85d", "abcd"),
        (MIXED_SCRIPTS, MIXED_SCRIPTS),
        # zalgo: two marks per character at most (NFC makes z + acute one character)
        ("z" + "\u0301\u0302\u0303\u0304\u0305" * 20 + "a", "\u017a\u0302\u0303a"),
        # nothing to say
        ("", ""),
        ("   \n\t ", ""),
        ("**__~~||||``", ""),
        ("\u200b\u2060\ufeff", ""),
    ],
)
def test_rule(content, expected):
    assert speakable(content, NAMES) == expected


def test_options_change_the_reading():
    assert speakable("\U0001f600 hi <:wave:1>", options=TextOptions(emoji="skip")) == "hi"
    domain = TextOptions(links="domain")
    assert speakable("at https://www.example.com/a?b=1.", options=domain) == "at example.com."
    assert speakable("x https://user@host.io:8080/p", options=domain) == "x host.io"
    assert speakable("a ||secret <@1>|| b", NAMES, TextOptions(read_spoilers=True)) == "a secret Alice b"
    assert speakable("nooooo", options=TextOptions(max_repeat=1)) == "no"


def test_names_are_untrusted_text():
    hostile = Mentions(users={1: "<@1> **x** https://evil.example \u202e\x00" + "\u0301" * 9})
    assert speakable("hi <@1>", hostile) == "hi someone x a link"


def test_long_text_is_read_whole_up_to_the_longest_message():
    # not cut: what is spoken is cut once, to its limit (bot/speech/text/say.py, tests/bot/test_say.py)
    assert speakable("word " * 300) == ("word " * 300).strip()
    longest = " ".join(f"w{i}" for i in range(1_000))
    assert speakable(longest) == longest[:DISCORD_MAX_CHARS].strip()


def test_options_are_checked():
    for bad in ({"emoji": "loud"}, {"links": "url"}, {"max_repeat": 0}):
        with pytest.raises(ValueError):
            TextOptions(**bad)


@pytest.mark.parametrize(
    "filename, content_type, kind",
    [
        ("cat.PNG", None, "image"),
        ("clip", "video/mp4", "video"),
        ("song.mp3", "application/octet-stream", "audio file"),
        ("voice-message.ogg", "audio/ogg", "voice message"),
        ("notes.pdf", "application/pdf", "file"),
        ("README", None, "file"),
    ],
)
def test_attachment_kind(filename, content_type, kind):
    assert attachment_kind(filename, content_type) == kind


def test_attachment_phrase():
    assert attachment_phrase(["image", "image", "file"]) == "two images and a file"
    assert attachment_phrase(["audio file"]) == "an audio file"
    mixed = ["video", "image", "video", "voice message"]
    assert attachment_phrase(mixed) == "two videos, an image and a voice message"
    assert attachment_phrase(["file"] * 12) == "12 files"
    assert attachment_phrase([]) == ""


# --- properties -------------------------------------------------------------------------------

FRAGMENTS = [
    "<@1>", "<@!2>", "<@&5>", "<#7>", "<@", "<#", "<:", "<:x_y:1>", "<a:z:2>", "</cmd:3>",
    "<t:1700000000:R>", "<t:-99999999999999999999>", "@everyone", "@here", "http://", "https://a.b/c",
    "<https://x.y>", "[t](https://u.v)", "[", "](", ")", "```", "``", "`", "||", "**", "__", "~~",
    "*", "_", "\\", "> ", "# ", "-# ", "- ", "1. ", "\n", "\t", "\r\n", "\u2028", "\u200d", "\ufe0f",
    "\U0001f3fd", "\U0001f1fa", "\U0001f602", "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\u0301",
    "\u202e", "\x00", "\x85", "\uff48\uff54\uff54\uff50\uff1a\uff0f\uff0f", "\uff1c\uff20\uff11\uff1e",
    "htttp://", "hhttps://", "!!!!", "aaaa",
]  # fmt: skip
discordish = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=6)), max_size=40).map("".join)
hostile_names = st.dictionaries(st.integers(0, 8), st.one_of(st.text(max_size=20), discordish), max_size=4)
mentions = st.builds(Mentions, users=hostile_names, roles=hostile_names, channels=hostile_names)
options = st.builds(
    TextOptions,
    emoji=st.sampled_from(["name", "skip"]),
    links=st.sampled_from(["a link", "domain"]),
    read_spoilers=st.booleans(),
    max_repeat=st.integers(1, 5),
)


def assert_clean(out: str, opts: TextOptions) -> None:
    """What every reading must be, whatever came in."""
    assert out == out.strip() and "  " not in out
    assert not [ch for ch in out if unicodedata.category(ch)[0] == "C"], "control/format characters"
    assert not re.search(r"<[@#:]", out), "raw mention or emoji markup"
    assert not re.search(r"(?i)https?://", out), "a URL"
    run = 0
    for i, ch in enumerate(out):
        run = run + 1 if unicodedata.category(ch)[0] == "M" else 0
        assert run <= 2, "more than two combining marks on one character"
        assert run == 0 or (i >= run and not out[i - run].isspace()), "a combining mark on nothing or on a space"
    assert not re.search(r"([^\d\s])\1{%d}" % opts.max_repeat, out), "a character repeated past the cap"


@FEW
@given(st.text(max_size=300))
def test_any_text_reads_clean(content):
    assert_clean(speakable(content), TextOptions())


@FEW
@given(discordish, mentions, options)
def test_any_markup_reads_clean(content, names, opts):
    assert_clean(speakable(content, names, opts), opts)


MARKUP_CHARS = set("*_~|`<>#\\[]()@:-+")
plain_char = st.characters(blacklist_categories=("Cs", "Nd", "Nl", "No")).filter(
    lambda ch: not MARKUP_CHARS.intersection(unicodedata.normalize("NFKC", ch))
    and not any(unicodedata.category(c)[0] == "N" for c in unicodedata.normalize("NFKC", ch))
)


@FEW
@given(st.text(plain_char, max_size=200))
def test_reading_plain_text_twice_changes_nothing(content):
    once = speakable(content)
    assert speakable(once) == once


@pytest.mark.parametrize(
    "hostile",
    [
        "a" * 10_000,
        "z\u0301\u0302\u0303\u0304" * 2_500,
        "\u0301" * 10_000,
        "<@1>" * 2_500,
        "<@" * 5_000,
        "\U0001f600\U0001f603" * 2_500,
        "[" * 10_000,
        "[a](" * 2_500,
        "`" * 10_000,
        "``a" * 3_333,
        "|" * 10_000,
        "*_~" * 3_333,
        "> " * 5_000,
        "a\n" * 5_000,
        "http://" * 1_428,
        "\x00\x1b\u202e\u2066" * 2_500,
        "\u0627\u0644\u0639\u0631\u0628\u064a\u0629 english \u05e2\u05d1\u05e8\u05d9\u05ea " * 400,
    ],
)
def test_hostile_input_gives_bounded_clean_output(hostile):
    assert_clean(speakable(hostile, NAMES), TextOptions())
