"""What "say this" means, for every way of asking (/say, /voice preview, readout): the order, its words, refusals."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import discord

from bot.config import MORE, SpeechSettings
from bot.dictionary import Rules, pronounce
from bot.errors import UserError
from bot.speech.queue.utterance import Notify
from bot.speech.text.discord_text import ChosenNames, speakable_content
from bot.speech.text.text import PAUSES, TextOptions
from bot.storage.settings_repo import GuildPrefs
from engine.base import Voice

if TYPE_CHECKING:
    from bot.languages import LanguageService


class Join(enum.Enum):
    """What to do when the bot is not in a voice channel of the guild."""

    AUTHOR = "author"  # join the author's voice channel (/say)
    AUTOJOIN = "autojoin"  # the same, only when the guild turned autojoin on (readout)
    NEVER = "never"  # refuse (/voice preview: it plays where the bot already is)


class Reason(enum.Enum):
    """Why an order was not queued."""

    NOT_CONNECTED = "the bot is not in a voice channel"
    JOIN_FAILED = "the bot could not join"
    NOT_IN_VOICE = "the author is not in the bot's voice channel"
    TOO_LONG = "the text is over the limit"
    EMPTY = "nothing to say"
    NOT_ADMITTED = "the caller's own admission check said no"
    QUEUE_FULL = "the queue is full"
    LATE = "it could not start within the guild's max_delay"


class Refusal(UserError):
    """An order that was not queued; the message is for the user, the reason for the caller."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass
class SayOrder:
    """One request to speak, as the user made it."""

    guild: discord.Guild
    author: discord.Member | discord.User
    text: str  # as written, Discord markup and all
    kind: str = "say"  # say | preview | readout | tts | menu
    voice_name: str | None = None  # a voice the author may use; None: their active voice
    voice_of: discord.Member | discord.User | None = None  # speak in this user's active voice (with their consent)
    channel_id: int | None = None  # where it was asked
    message_id: int | None = None  # readout: a deleted message leaves the queue
    join: Join = Join.AUTHOR
    cut_long: bool = False  # readout: cut long text with a spoken "and more"; otherwise refuse it
    names: dict[int, str] | None = None  # display names of mentioned users Discord sent along
    frame: Callable[[str], str] | None = None  # readout: the cleaned text in its "NAME said, ..." frame
    admit: Callable[[], bool] | None = None  # readout: the author's rate limit, asked last before queueing
    notify: Notify | None = None  # tells the author when synthesis fails later
    label: str = ""  # for /queue


VocalChannel = discord.VoiceChannel | discord.StageChannel  # a channel the bot can speak in


def author_channel(author: discord.Member | discord.User) -> VocalChannel | None:
    """The voice channel the author is in, or None."""
    voice = getattr(author, "voice", None)
    return voice.channel if voice is not None else None


def check_in_channel(author: discord.Member | discord.User, bot_channel: VocalChannel | None,
                     required: bool) -> None:
    """With the guild's require_voice on, only members in the bot's voice channel make it speak there."""
    mine = author_channel(author)
    if required and bot_channel is not None and (mine is None or mine.id != bot_channel.id):
        raise Refusal(Reason.NOT_IN_VOICE, f"Join {bot_channel.mention} to speak there.")


def too_long(length: int, limit: int) -> Refusal:
    return Refusal(Reason.TOO_LONG, f"That text is too long ({length} characters; the limit is {limit}).")


async def spoken(order: SayOrder, speech: SpeechSettings, prefs: GuildPrefs, voice: Voice, *,
                 rules: Rules | None = None, chosen: ChosenNames | None = None,
                 languages: LanguageService | None = None) -> tuple[str, Voice]:
    """What is spoken for `order` (spoken_text) and the voice that speaks it: `voice` (the asker's), or with
    `languages` the one that speaks the message's language (bot/languages.py); or a Refusal."""
    text, body = await spoken_text(order, speech, prefs, rules, chosen)
    if languages is not None:
        voice = await languages.voice_for(body, voice, order.author.id, prefs.language, prefs.voices)
    return text, voice


async def spoken_text(order: SayOrder, speech: SpeechSettings, prefs: GuildPrefs,
                      rules: Rules | None = None, chosen: ChosenNames | None = None) -> tuple[str, str]:
    """(what is spoken for `order`, its body without the readout frame), or a Refusal (TOO_LONG, EMPTY).

    The one place text becomes speech, for the bot (SpeechService) and the benches alike: Discord markup in
    words (mentions named from `order.names`, else `order.guild`, and the names users `chosen`), the dictionaries'
    `rules` (bot/dictionary.py: the author's, the server's and the operator's), then cut once (`truncate`, to its
    `room`) and framed. Asked-for speech over the bot's
    speech.max_text_chars is refused; a readout message (`order.cut_long`) is cut at the guild's max_length
    (`prefs`: the guild's effective GuildPrefs, never above speech.max_text_chars) with a spoken "and more". Unicode
    hygiene and the engine's own limit are the engine's (engine/streaming.py cleans and checks again what it is
    given)."""
    limit = prefs.max_message_chars if order.kind == "readout" else speech.max_text_chars
    if not order.cut_long and len(order.text) > limit:
        raise too_long(len(order.text), limit)
    options = TextOptions(emoji=speech.emoji, links=speech.links, read_spoilers=prefs.read_spoilers,
                          max_repeat=prefs.repeated_characters)
    body = await speakable_content(order.text, order.guild, options, order.names, chosen)
    body = pronounce(body, rules or Rules())
    body = truncate(body, room(body, order.frame, limit, speech.max_text_chars))
    text = order.frame(body) if order.frame is not None else body
    if not text:
        raise Refusal(Reason.EMPTY, "There is nothing I can say in that text.")
    return text, body


def room(body: str, frame: Callable[[str], str] | None, limit: int, ceiling: int) -> int:
    """How long `body` may be: `limit`, and its framed text within `ceiling` (the bot's limit; a frame longer than
    that leaves only "and more" of the body)."""
    frame_chars = len(frame(body)) - len(body) if frame is not None else 0
    return max(1, min(limit, ceiling - frame_chars))


def truncate(text: str, max_chars: int) -> str:
    """`text` if it fits in `max_chars`, else its head cut at a word (if one is near) plus MORE."""
    if len(text) <= max_chars:
        return text
    cut = text.rfind(" ", 0, max_chars + 1)
    if cut < max_chars // 2:
        cut = max(max_chars, 0)
    head = text[:cut].rstrip(" " + PAUSES + "-")
    return head + MORE if head else MORE.lstrip(", ")


def late(order: SayOrder, wait: float, max_delay: float) -> Refusal:
    """An order that would start past the guild's max_delay: readout is skipped (to catch up); asked-for speech is
    refused with its wait."""
    if order.kind == "readout":
        return Refusal(Reason.LATE, f"it could not be read within {max_delay:.0f} s")
    return Refusal(Reason.LATE, f"I'm busy here: that would start in about {wait:.0f} s, past this server's "
                                f"limit of {max_delay:.0f} s. Try again in a little while.")


def queued_text(position: int, wait: float, notice_s: float) -> str:
    """What the asker is told: speaking now, or queued (at `position`), with the expected wait when it is long."""
    about = f" (starts in about {wait:.0f} s)" if wait > notice_s else ""
    if position <= 1 and not about:
        return "Speaking."
    ahead = f"{position - 1} ahead of you" if position > 1 else "next"
    return f"Queued: {ahead}{about}."
