"""ReadoutService: decides whether and how a message in a readout channel is spoken, and queues it."""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import discord

from bot import guild_options
from bot.catch_up import CatchUp
from bot.config import Settings
from bot.prefs import PrefsService
from bot.speech.queue.utterance import Outcome, Utterance
from bot.speech.service import SpeechService
from bot.speech.text.say import Join, Reason, Refusal, SayOrder, truncate
from bot.speech.text.text import TextOptions, attachment_kind, attachment_phrase, speakable
from bot.storage.settings_repo import GuildPrefs

log = logging.getLogger(__name__)
TOLD_WINDOW_S = 30.0  # a flooding user is told once in this window


class Skip(enum.Enum):
    """Why a message was not queued (None of these: it was queued)."""

    NOT_READOUT = "not a readout channel"
    BOT = "bots are not read"
    PREFIX = "starts with a skip prefix (the bot's or the server's ignore_prefix)"
    NO_PREFIX = "lacks the server's required_prefix"
    OPTED_OUT = "author opted out"
    ROLE = "author lacks the required role"
    NOT_CONNECTED = "the bot is not in a voice channel"
    NOT_IN_VOICE = "author is not in the bot's voice channel"
    EMPTY = "nothing to say"
    RATE_LIMITED = "author is sending too fast"
    QUEUE_FULL = "the queue is full"
    STALE = "could not start within max_delay; told once per catch-up"
    FAILED = "could not be queued"


# a refused order -> (why it was skipped, the reason its author is told under; None: not told)
_SKIPS: dict[Reason, tuple[Skip, str | None]] = {
    Reason.NOT_CONNECTED: (Skip.NOT_CONNECTED, None),
    Reason.JOIN_FAILED: (Skip.FAILED, "join"),
    Reason.NOT_IN_VOICE: (Skip.NOT_IN_VOICE, None),
    Reason.EMPTY: (Skip.EMPTY, None),
    Reason.TOO_LONG: (Skip.EMPTY, None),  # not raised for readout: long messages are cut
    Reason.NOT_ADMITTED: (Skip.RATE_LIMITED, "rate"),
    Reason.QUEUE_FULL: (Skip.QUEUE_FULL, "full"),
    Reason.LATE: (Skip.STALE, None),  # counted into the guild's catch-up notice
}


@dataclass
class Decision:
    queued: bool
    skip: Skip | None = None
    text: str = ""
    told: bool = False  # the author was told why


class TokenBucket:
    """Per-user rate limit: `burst` messages at once, then one per `cooldown` seconds."""

    def __init__(self, burst: int, cooldown: float) -> None:
        self.burst = max(1, burst)
        self.cooldown = max(0.0, cooldown)
        self._state: dict[tuple[int, int], tuple[float, float]] = {}

    def allow(self, key: tuple[int, int], now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        tokens, last = self._state.get(key, (float(self.burst), now))
        if self.cooldown > 0:
            tokens = min(float(self.burst), tokens + (now - last) / self.cooldown)
        else:
            tokens = float(self.burst)
        if tokens < 1.0:
            self._state[key] = (tokens, now)
            return False
        self._state[key] = (tokens - 1.0, now)
        if len(self._state) > 10_000:  # forget the oldest users
            for k in list(self._state)[: len(self._state) - 5_000]:
                del self._state[k]
        return True


RATE_LIMITED = "you're sending messages faster than I can read them; some were skipped."


def compose(name: str, body: str, attachment_kinds: list[str], xsaid: bool) -> str:
    """The spoken message: "NAME said, BODY. NAME sent an image" (xsaid: the author changed recently)."""
    sent = f"{name} sent {attachment_phrase(attachment_kinds)}" if attachment_kinds else ""
    if not body:
        return sent
    said = f"{name} said, {body}" if xsaid else body
    return f"{said}. {sent}" if sent else said


def operator_prefixes(config: Settings) -> tuple[str, ...]:
    """What this bot never reads a message starting with: readout.skip_prefixes and the command prefix."""
    return tuple(p for p in [*config.readout.skip_prefixes, config.discord.command_prefix] if p)


def prefix_readers(config: Settings, current: GuildPrefs) -> dict[str, Callable[[str], tuple[str, str]]]:
    """The /settings readers of required_prefix and ignore_prefix for a guild's `current` settings: (stored, in
    words) or OptionError. Refused with why: a pair with which nothing would be read."""
    never = operator_prefixes(config) + ((current.ignore_prefix,) if current.ignore_prefix else ())
    return {"required_prefix": lambda raw: _read_prefix("required_prefix", raw, never=never),
            "ignore_prefix": lambda raw: _read_prefix("ignore_prefix", raw, required=current.required_prefix)}


def _read_prefix(name: str, raw: str, *, never: tuple[str, ...] = (), required: str = "") -> tuple[str, str]:
    """A prefix as typed ("off" or "none": no prefix). Refused: a required prefix starting with one that is never
    read (`never`), an ignored prefix that every message read (`required`) starts with."""
    text, most = raw.strip(), guild_options.OPTIONS[name].chars
    if text.lower() in ("off", "none", ""):
        return "", "off"
    if len(text) > most or any(c.isspace() or c == "`" or not c.isprintable() for c in text):
        raise guild_options.OptionError(f"{name} takes up to {most} characters without spaces or backticks, "
                                        "or off.")
    blocked = next((p for p in never if text.startswith(p)), None)
    if blocked is not None:
        raise guild_options.OptionError(f"Messages starting with {blocked!r} are not read here, so {name} cannot "
                                        "start with it.")
    if required.startswith(text):
        raise guild_options.OptionError(f"Every message read starts with the required_prefix {required!r}, so "
                                        f"{name} {text!r} would skip them all.")
    return text, f"`{text}`"


async def spoken_name(prefs: PrefsService, guild_id: int, user: discord.Member | discord.User) -> str:
    """How a member is named aloud ("NAME said", announcements): the name they chose here or everywhere, else their
    display name; in words, without emoji, at most 40 characters."""
    raw = await prefs.spoken_name(guild_id, user.id) or user.display_name
    return truncate(speakable(raw, options=TextOptions(emoji="skip")), 40) or "someone"


class ReadoutService:
    """Reads the messages of a guild's readout channels into its voice channel (bot.readout)."""

    def __init__(self, client: discord.Client, speech: SpeechService, prefs: PrefsService, config: Settings) -> None:
        self.client = client
        self.speech = speech
        self.prefs = prefs
        self.config = config
        self.settings = settings = config.readout
        self.prefixes = operator_prefixes(config)
        self.bucket = TokenBucket(settings.user_burst, settings.user_cooldown_s)
        self._last_author: dict[int, tuple[int, float]] = {}  # guild -> (author, time)
        self._told: dict[tuple[int, int, str], float] = {}
        self._locks: dict[int, asyncio.Lock] = {}
        self.catch_up = CatchUp(self._post)

    async def handle(self, message: discord.Message) -> Decision:
        """Decide and queue; one guild's messages are handled one at a time, so they are read in order."""
        guild = message.guild
        if guild is None or self.client.user is None or message.author.id == self.client.user.id:
            return Decision(False, Skip.NOT_READOUT)
        content = message.content  # as posted: a later edit changes the cached message, not what is read
        lock = self._locks.setdefault(guild.id, asyncio.Lock())
        async with lock:
            return await self._handle(message, guild, content)

    async def _handle(self, message: discord.Message, guild: discord.Guild, content: str) -> Decision:
        gp = guild_options.effective(await self.prefs.guild(guild.id), self.config)
        if message.channel.id not in gp.readout_channel_ids:
            return Decision(False, Skip.NOT_READOUT)
        if (message.author.bot or message.webhook_id is not None) and not gp.read_bots:
            return Decision(False, Skip.BOT)
        if content.startswith(self.prefixes) or (gp.ignore_prefix and content.startswith(gp.ignore_prefix)):
            return Decision(False, Skip.PREFIX)
        if not content.startswith(gp.required_prefix):
            return Decision(False, Skip.NO_PREFIX)
        content = content.removeprefix(gp.required_prefix)
        if (await self.prefs.user(message.author.id)).opted_out:
            return Decision(False, Skip.OPTED_OUT)
        member = message.author if isinstance(message.author, discord.Member) else guild.get_member(message.author.id)
        if gp.required_role_id and (member is None or not any(r.id == gp.required_role_id for r in member.roles)):
            return Decision(False, Skip.ROLE)
        name = await spoken_name(self.prefs, guild.id, member or message.author)
        kinds = [attachment_kind(a.filename, a.content_type) for a in message.attachments]
        xsaid = gp.xsaid and not self._same_author_recently(guild.id, message.author.id)
        order = SayOrder(
            guild=guild, author=member or message.author, text=content, kind="readout",
            channel_id=message.channel.id, message_id=message.id, join=Join.AUTOJOIN, cut_long=True,
            names={u.id: u.display_name for u in message.mentions},
            frame=lambda body: compose(name, body, kinds, xsaid),
            admit=lambda: self.bucket.allow((guild.id, message.author.id)),
            notify=lambda m, msg=message: self._notify_failure(msg, m),
        )
        try:
            utt = await self.speech.say(order)
        except Refusal as exc:
            if exc.reason is Reason.LATE:
                self.catch_up.skipped(guild.id, message.channel.id, gp.max_delay)
                return Decision(False, Skip.STALE, told=True)
            return await self._refused(message, exc)
        self._last_author[guild.id] = (message.author.id, time.monotonic())
        return Decision(True, text=utt.request.text)

    async def _refused(self, message: discord.Message, exc: Refusal) -> Decision:
        """Skip the message; tell its author when it is their business (join failed, too fast, queue full)."""
        skip, tell = _SKIPS[exc.reason]
        if tell is None:
            return Decision(False, skip)
        text = RATE_LIMITED if exc.reason is Reason.NOT_ADMITTED else str(exc)
        return Decision(False, skip, told=await self._tell(message, tell, text))

    def _same_author_recently(self, guild_id: int, author_id: int) -> bool:
        last = self._last_author.get(guild_id)
        return last is not None and last[0] == author_id and time.monotonic() - last[1] < self.settings.xsaid_window_s

    async def _tell(self, message: discord.Message, reason: str, text: str) -> bool:
        """Tell the author why, once per reason in TOLD_WINDOW_S; True when they have been told."""
        key = (message.guild.id, message.author.id, reason)
        now = time.monotonic()
        if now - self._told.get(key, -1e9) < TOLD_WINDOW_S:
            return True  # told moments ago; saying it again would be a flood of our own
        self._told[key] = now
        try:
            await message.channel.send(f"{message.author.mention}, {text}",
                                       allowed_mentions=discord.AllowedMentions(users=[message.author]),
                                       delete_after=20)
        except discord.HTTPException as exc:
            log.warning("guild %s: could not tell %s: %s", message.guild.id, message.author.id, exc)
            return False
        return True

    async def _notify_failure(self, message: discord.Message, text: str) -> None:
        await self._tell(message, "failed", f"I could not read your message: {text}")

    def on_utterance(self, guild_id: int, utt: Utterance, outcome: Outcome) -> None:
        """A queued message that became too late to start is counted into the guild's catch-up notice."""
        r = utt.request
        if outcome is Outcome.STALE and r.kind == "readout" and r.start_by is not None:
            self.catch_up.skipped(guild_id, r.channel_id, r.start_by - r.created_at)

    async def _post(self, channel_id: int, text: str) -> None:
        channel = self.client.get_channel(channel_id)
        if channel is None:
            raise LookupError(f"channel {channel_id} is gone")
        await channel.send(text, allowed_mentions=discord.AllowedMentions.none())

    def message_deleted(self, guild_id: int | None, message_id: int) -> bool:
        if guild_id is None:
            return False
        return self.speech.remove_message(guild_id, message_id)
