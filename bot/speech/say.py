"""What "say this" means, for every way of asking (/say, /voice preview, channel readout): where the bot
speaks, who may make it speak there, what is spoken (cleaned, within the binding limit), in which voice,
and the guild's queue bound. SpeechService.say carries out a SayOrder; a Refusal says why not."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

import discord

from bot.errors import UserError
from bot.speech.speaker import Notify


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
    expected_wait: float = 0.0  # set when queued: seconds until it should start playing


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
