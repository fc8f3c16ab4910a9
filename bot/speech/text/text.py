"""Discord message content -> plain text a voice can read; pure functions, no discord.py objects."""

from __future__ import annotations

import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache

from bot.speech.text.emoji_names import FAMILY_MEMBERS, FLAGS, NAMES, SEQUENCES
from engine.segment import scrub

DISCORD_MAX_CHARS = 4000  # the longest message Discord sends (Nitro): no more is read
CODE_READ_MAX = 30  # inline code up to this long is read; longer is "code"
NAME_MAX = 100  # display, role, channel and emoji names are cut to this


@dataclass(frozen=True)
class TextOptions:
    emoji: str = "name"  # "name" | "skip": unicode and custom emoji
    links: str = "a link"  # "a link" | "domain"
    read_spoilers: bool = False  # False: ||spoilers|| say nothing
    max_repeat: int = 3  # a character said at most this many times in a row

    def __post_init__(self) -> None:
        if self.emoji not in ("name", "skip"):
            raise ValueError(f"emoji must be 'name' or 'skip', not {self.emoji!r}")
        if self.links not in ("a link", "domain"):
            raise ValueError(f"links must be 'a link' or 'domain', not {self.links!r}")
        if self.max_repeat < 1:
            raise ValueError("max_repeat must be at least 1")


@dataclass(frozen=True)
class Mentions:
    """Names for the ids a message mentions; an id not here reads as "someone", "a role", "a channel"."""

    users: Mapping[int, str] = field(default_factory=dict)
    roles: Mapping[int, str] = field(default_factory=dict)
    channels: Mapping[int, str] = field(default_factory=dict)


def _marks() -> str:
    """A character class of every combining mark (category M) this Python's Unicode knows."""
    spans: list[list[int]] = []
    for cp in range(sys.maxunicode + 1):
        if unicodedata.category(chr(cp))[0] == "M":
            if spans and spans[-1][1] == cp - 1:
                spans[-1][1] = cp
            else:
                spans.append([cp, cp])
    return "[" + "".join(f"{chr(a)}-{chr(b)}" for a, b in spans) + "]"


# The text is scrubbed once, before it is read (marks capped, none on nothing). Every edit after that keeps it
# so: a character dropped or replaced takes the combining marks on it along, so none is joined onto the
# character before it or left on a space.
_MARK = _marks()
# Emoji that stand alone (no variation selector needed). Regional indicators and skin tones are not
# bases: they only modify one.
_EMOJI_BASE = (
    "\u00a9\u00ae\u2194-\u2199\u21a9\u21aa\u231a\u231b\u2328\u23cf\u23e9-\u23f3\u23f8-\u23fa"
    "\u25aa\u25ab\u25b6\u25c0\u25fb-\u25fe\u2600-\u27bf\u2934\u2935\u2b05-\u2b07\u2b1b\u2b1c\u2b50\u2b55"
    "\u3030\u303d\U0001f000-\U0001f1e5\U0001f200-\U0001f3fa\U0001f400-\U0001faff"
)
_SKIN = "\U0001f3fb-\U0001f3ff"
_FLAG_LETTER = "\U0001f1e6-\U0001f1ff"
_EMOJI = rf"[{_FLAG_LETTER}]{{2}}|[{_EMOJI_BASE}][{_SKIN}]*(?:\u200d[{_EMOJI_BASE}][{_SKIN}]*)*"
_URL = r"(?i:https?)://"
_URL_BODY = r"(?:[^\s()<>]|\([^\s()<>]*\))*"  # one level of parentheses, as in Wikipedia links

# Every alternative is anchored by literal delimiters or disjoint character classes, and every lazy
# span stops at the same delimiter that opens it, so matching stays linear on hostile input.
_TOKEN = re.compile(
    "(?:" + "|".join(
        f"(?P<{name}>{pattern})"
        for name, pattern in (
            ("escape", rf"\\(?P<escaped>[^\w\s{_MARK[1:-1]}])"),
            ("code_block", r"```[\s\S]*?```"),
            ("inline_code", r"``(?P<code2>[\s\S]+?)``|`(?P<code1>[^`]+)`"),
            ("spoiler", r"\|\|(?P<hidden>[\s\S]+?)\|\|"),
            ("masked_link", rf"\[(?P<label>[^\[\]]{{0,256}})\]\(\s*<?(?P<target>{_URL}{_URL_BODY})>?\s*\)"),
            ("link", rf"<?(?P<url>{_URL}[^\s<>]*)>?"),
            ("user", r"<@!?(?P<user_id>\d{1,20})>"),
            ("role", r"<@&(?P<role_id>\d{1,20})>"),
            ("channel", r"<#(?P<channel_id>\d{1,20})>"),
            ("command", r"</(?P<command_name>[^<>:\n]{1,100}):\d{1,20}>"),
            ("custom_emoji", r"<a?:(?P<emoji_name>\w{1,64}):\d{1,20}>"),
            ("timestamp", r"<t:(?P<seconds>-?\d{1,20})(?::(?P<style>[A-Za-z]))?>"),
            ("everyone", r"(?<!\w)@(?P<who>everyone|here)(?!\w)"),
            ("emoji", _EMOJI),
        )
    ) + f"){_MARK}*"
)
# Quote, heading, subtext and list markers at the start of a line (repeated: "> - # x").
_LINE_MARKERS = re.compile(r"^[^\S\n]*(?:(?:>>>|>|#{1,3}|-#|[-*+]|\d{1,9}[.)])[^\S\n]+)+", re.M)
# Markdown left in plain text, and emoji modifiers left without an emoji to modify; an underscore reads as a space.
_MARKUP = re.compile(rf"(?:[*`]+|~~|\|\||[\u200d{_SKIN}{_FLAG_LETTER}]|(?P<underscore>_)){_MARK}*")
_LEADING_MARKS = re.compile(f"^{_MARK}+")
_LEFTOVER_URL = re.compile(rf"{_URL}[^\s<>]*")
_LEFTOVER_MENTION = re.compile(r"<(?=[@#:])")
# Left by token spacing. A run is tried from its first character only and never backtracked into
# ((?<!\s), \s++): linear; "\s+(?=...)" retried every start in a run of n spaces, O(n^2).
_SPACE_BEFORE_PUNCT = re.compile(r"(?<!\s)\s++(?=[.,!?;:)\]])|(?<=[(\[])\s+")
_SPACES = re.compile(r"\s+")
_HOST = re.compile(r"[\w.-]*")
PAUSES = ".!?,;:"
_URL_TAIL = ".,;:!?'\"*_~|"
_MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip


def speakable(content: str, mentions: Mentions = Mentions(), options: TextOptions = TextOptions()) -> str:
    """What a voice should say for a message's `content`, in words; "" when there is nothing to say. Not cut to a
    length: what is spoken is cut once, to its limit (bot/speech/text/say.py)."""
    text = _Renderer(mentions, options).render(_LINE_MARKERS.sub("", _clean(content[:DISCORD_MAX_CHARS])))
    text = _cap_repeats(_SPACE_BEFORE_PUNCT.sub("", _sentences(text)), options.max_repeat)
    # Last line of defence, after every edit that could join characters: no URL and no raw markup.
    text = _LEFTOVER_URL.sub(lambda m: f" {_link_words(m[0], options)} ", text)
    text = _LEFTOVER_MENTION.sub(" ", text)
    return _SPACES.sub(" ", text).strip()


def attachment_kind(filename: str, content_type: str | None = None, *, voice_message: bool = False) -> str:
    """What an attachment is called: image, video, audio file, voice message or file."""
    if voice_message or filename.lower().startswith("voice-message"):
        return "voice message"
    major = (content_type or "").partition("/")[0].strip().lower()
    if major in ("image", "video"):
        return major
    if major == "audio":
        return "audio file"
    extension = filename.rpartition(".")[2].lower() if "." in filename else ""
    return next((kind for kind, exts in _EXTENSIONS.items() if extension in exts), "file")


def attachment_phrase(kinds: Sequence[str]) -> str:
    """["image", "image", "file"] -> "two images and a file" (kinds in first-seen order)."""
    parts = [_counted(kind, n) for kind, n in Counter(k for k in kinds if k).items()]
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


_EXTENSIONS = {
    "image": {"png", "jpg", "jpeg", "gif", "webp", "bmp", "avif", "heic", "svg", "tif", "tiff"},
    "video": {"mp4", "mov", "webm", "mkv", "avi", "m4v"},
    "audio file": {"mp3", "wav", "ogg", "oga", "opus", "flac", "m4a", "aac"},
}
_NUMBERS = ("no", "a", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def _counted(kind: str, n: int) -> str:
    if n == 1:
        return ("an " if kind[0] in "aeiou" else "a ") + kind
    return f"{_NUMBERS[n] if n < len(_NUMBERS) else n} {kind}s"


def _clean(text: str) -> str:
    """The engine's Unicode hygiene (engine.segment.scrub) in its compatibility form (fullwidth and styled
    letters become plain ones, so markup written with them is read as markup), keeping newline, tab and the
    emoji joiner, which Discord markup and emoji sequences need. The engine cleans what it is given again (NFC)."""
    return scrub(text, form="NFKC", keep="\n\t\u200d")


def _sentences(text: str) -> str:
    """Lines become sentences: joined by ". ", or by a space where a line already ends in punctuation."""
    out: list[str] = []
    for line in filter(None, (line.strip() for line in text.split("\n"))):
        if out:
            out.append(" " if out[-1][-1] in PAUSES else ". ")
        out.append(line)
    return "".join(out)


@lru_cache(maxsize=8)
def _repeat_patterns(limit: int) -> tuple[re.Pattern[str], re.Pattern[str], int]:
    # Digits are never capped (numbers keep their value); short letter units are capped at no fewer
    # than three ("hahahaha" -> "hahaha", while "mama" stays even at max_repeat 1).
    units = max(limit, 3)
    return re.compile(rf"([^\d\s])\1{{{limit},}}"), re.compile(rf"([^\W\d_]{{2,3}}?)\1{{{units},}}"), units


def _cap_repeats(text: str, limit: int) -> str:
    single, unit, units = _repeat_patterns(limit)
    text = single.sub(lambda m: m[1] * limit, text)
    return unit.sub(lambda m: m[1] * units, text)


def _link_words(url: str, options: TextOptions) -> str:
    """The words for a link ("a link" or its domain), then any punctuation the URL swallowed."""
    end, balance = len(url), url.count("(") - url.count(")")
    while end and (url[end - 1] in _URL_TAIL or (url[end - 1] == ")" and balance < 0)):
        balance += url[end - 1] == ")"  # a ")" the URL itself opened stays part of it
        end -= 1
    words = "a link"
    if options.links == "domain":
        host = re.split(r"[/?#]", url[:end].split("://", 1)[1], maxsplit=1)[0].rpartition("@")[2]
        found = _HOST.match(host)
        words = (found[0] if found else "").strip(".").removeprefix("www.") or words
    return words + url[end:]


def _timestamp_words(seconds: int, style: str | None) -> str:
    """A date for Discord's date styles; "a time" for times and relative times (the listener's zone
    and the moment of reading are unknown to a pure function)."""
    if style in ("t", "T", "R"):
        return "a time"
    try:
        when = datetime.fromtimestamp(seconds, timezone.utc)
    except (OverflowError, OSError, ValueError):
        return "a time"
    return f"{_MONTHS[when.month - 1]} {when.day}, {when.year}"


def _emoji_words(cluster: str) -> str:
    """The spoken name of one emoji, its skin tone and gender left out."""
    if "\U0001f1e6" <= cluster[0] <= "\U0001f1ff":
        country = FLAGS.get("".join(chr(ord(c) - 0x1F1E6 + ord("A")) for c in cluster))
        return f"flag of {country}" if country else "a flag"
    key = re.sub(f"[{_SKIN}]", "", cluster)
    parts = key.split("\u200d")
    if len(parts) > 1 and FAMILY_MEMBERS.issuperset(parts):
        return "family"
    named = SEQUENCES.get(key) or NAMES.get(parts[0])
    return named or unicodedata.name(parts[0], "").lower().removesuffix(" sign")


class _Renderer:
    """Turns markup tokens into words; the text between them loses its markdown markers."""

    def __init__(self, mentions: Mentions, options: TextOptions) -> None:
        self.mentions = mentions
        self.options = options

    def render(self, text: str) -> str:
        text = _LEADING_MARKS.sub("", text)  # marks on a delimiter (code, spoiler, label) went with it
        pieces: list[str] = []
        last = None  # the words of the previous token, while only whitespace follows it
        pos = 0
        for m in _TOKEN.finditer(text):
            gap = _plain(text[pos : m.start()])
            pos = m.end()
            pieces.append(gap)
            if gap.strip():
                last = None
            if m.lastgroup == "escape":
                if unicodedata.category(m["escaped"])[0] != "C":  # an escaped joiner is no character
                    pieces.append(m[0][1:])  # with its marks
                last = None
                continue
            words = getattr(self, m.lastgroup or "")(m).strip()
            if words and words != last:  # a flood of the same emoji or mention is said once
                pieces.append(f" {words} ")
                last = words
            else:
                pieces.append(" ")
        pieces.append(_plain(text[pos:]))
        return "".join(pieces)

    def _name(self, raw: str | None) -> str:
        """A user-chosen name is untrusted text too: cleaned and rendered, but mentions no one."""
        if not raw:
            return ""
        words = _Renderer(Mentions(), self.options).render(_clean(str(raw)[:NAME_MAX]))
        return words.replace("\n", " ").strip()

    def code_block(self, m: re.Match[str]) -> str:
        return "code block"

    def inline_code(self, m: re.Match[str]) -> str:
        code = m["code2"] or m["code1"]
        return self.render(code) if len(code.strip()) <= CODE_READ_MAX else "code"

    def spoiler(self, m: re.Match[str]) -> str:
        return self.render(m["hidden"]) if self.options.read_spoilers else ""

    def masked_link(self, m: re.Match[str]) -> str:
        return self.render(m["label"]).strip() or _plain(_link_words(m["target"], self.options))

    def link(self, m: re.Match[str]) -> str:
        return _plain(_link_words(m["url"], self.options))

    def user(self, m: re.Match[str]) -> str:
        return self._name(self.mentions.users.get(int(m["user_id"]))) or "someone"

    def role(self, m: re.Match[str]) -> str:
        return self._name(self.mentions.roles.get(int(m["role_id"]))) or "a role"

    def channel(self, m: re.Match[str]) -> str:
        return self._name(self.mentions.channels.get(int(m["channel_id"]))) or "a channel"

    def command(self, m: re.Match[str]) -> str:
        return self._name(m["command_name"])

    def custom_emoji(self, m: re.Match[str]) -> str:
        return self._name(m["emoji_name"]) if self.options.emoji == "name" else ""

    def timestamp(self, m: re.Match[str]) -> str:
        return _timestamp_words(int(m["seconds"]), m["style"])

    def everyone(self, m: re.Match[str]) -> str:
        return m["who"]

    def emoji(self, m: re.Match[str]) -> str:
        return _emoji_words(m["emoji"]) if self.options.emoji == "name" else ""


def _plain(text: str) -> str:
    """Text between tokens: markdown markers dropped, underscores read as spaces."""
    return _MARKUP.sub(lambda m: " " if m["underscore"] else "", text)
