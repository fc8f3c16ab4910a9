"""ReadoutService: decides whether and how a message in a readout channel is spoken, and queues it."""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from dataclasses import dataclass

import discord

from bot import guild_options
from bot.config import ReadoutSettings, SpeechSettings
from bot.errors import UserError
from bot.speech.discord_text import speakable_content
from bot.speech.speaker import QueueFull, Request
from bot.speech.text import TextOptions, attachment_kind, attachment_phrase, truncate

log = logging.getLogger(__name__)
TOLD_WINDOW_S = 30.0  # a flooding user is told once in this window


class Skip(enum.Enum):
    """Why a message was not queued (None of these: it was queued)."""

    NOT_READOUT = "not a readout channel"
    BOT = "bots are not read"
    PREFIX = "starts with a skip prefix"
    OPTED_OUT = "author opted out"
    ROLE = "author lacks the required role"
    NOT_CONNECTED = "the bot is not in a voice channel"
    NOT_IN_VOICE = "author is not in the bot's voice channel"
    EMPTY = "nothing to say"
    RATE_LIMITED = "author is sending too fast"
    QUEUE_FULL = "the queue is full"
    FAILED = "could not be queued"


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


class ReadoutService:
    def __init__(self, bot, settings: ReadoutSettings, speech_settings: SpeechSettings, command_prefix: str) -> None:
        self.bot = bot
        self.settings = settings
        self.speech_settings = speech_settings
        self.prefixes = tuple(p for p in [*settings.skip_prefixes, command_prefix] if p)
        self.bucket = TokenBucket(settings.user_burst, settings.user_cooldown_s)
        self._last_author: dict[int, tuple[int, float]] = {}  # guild -> (author, time)
        self._told: dict[tuple[int, int, str], float] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    async def handle(self, message: discord.Message) -> Decision:
        """Decide and queue; one guild's messages are handled one at a time, so they are read in order."""
        guild = message.guild
        if guild is None or message.author.id == self.bot.user.id:
            return Decision(False, Skip.NOT_READOUT)
        content = message.content  # as posted: a later edit changes the cached message, not what is read
        lock = self._locks.setdefault(guild.id, asyncio.Lock())
        async with lock:
            return await self._handle(message, guild, content)

    async def _handle(self, message: discord.Message, guild: discord.Guild, content: str) -> Decision:
        gp = guild_options.effective(await self.bot.settings.guild(guild.id), self.bot.config)
        if message.channel.id not in gp.readout_channel_ids:
            return Decision(False, Skip.NOT_READOUT)
        if (message.author.bot or message.webhook_id is not None) and not gp.read_bots:
            return Decision(False, Skip.BOT)
        if content.startswith(self.prefixes):
            return Decision(False, Skip.PREFIX)
        if (await self.bot.settings.user(message.author.id)).opted_out:
            return Decision(False, Skip.OPTED_OUT)
        member = message.author if isinstance(message.author, discord.Member) else guild.get_member(message.author.id)
        if gp.required_role_id and (member is None or not any(r.id == gp.required_role_id for r in member.roles)):
            return Decision(False, Skip.ROLE)
        author_channel = member.voice.channel if member is not None and member.voice else None
        speech = self.bot.speech
        if not speech.is_connected(guild.id):
            if not (gp.autojoin and author_channel is not None):
                return Decision(False, Skip.NOT_CONNECTED)
            try:
                await speech.join(author_channel)
            except UserError as exc:
                told = await self._tell(message, "join", str(exc))
                return Decision(False, Skip.FAILED, told=told)
        bot_channel = speech.voice_channel(guild.id)
        if gp.require_in_voice and (author_channel is None or bot_channel is None or author_channel.id != bot_channel.id):
            return Decision(False, Skip.NOT_IN_VOICE)
        text = truncate(await self._compose(message, content, member, gp), self.speech_settings.max_text_chars)
        if not text:
            return Decision(False, Skip.EMPTY)
        if not self.bucket.allow((guild.id, message.author.id)):
            told = await self._tell(message, "rate", "you're sending messages faster than I can read them; "
                                                     "some were skipped.")
            return Decision(False, Skip.RATE_LIMITED, told=told)
        voice = await self.bot.voices.resolve(message.author.id, guild.id) if self.bot.voices else None
        request = Request(
            text=text, author_id=message.author.id, channel_id=message.channel.id, message_id=message.id,
            kind="readout", label=text[:80], notify=lambda m, msg=message: self._notify_failure(msg, m),
            **({"voice": voice} if voice is not None else {}),
        )
        try:
            speech.enqueue(guild.id, request, limit=gp.max_queue)
        except QueueFull as exc:
            told = await self._tell(message, "full", str(exc))
            return Decision(False, Skip.QUEUE_FULL, told=told)
        self._last_author[guild.id] = (message.author.id, time.monotonic())
        return Decision(True, text=text)

    async def _compose(self, message: discord.Message, content: str, member, gp) -> str:
        s = self.speech_settings
        options = TextOptions(emoji=s.emoji, links=s.links, read_spoilers=gp.read_spoilers,
                              max_chars=gp.max_message_chars)
        names = {u.id: u.display_name for u in message.mentions}
        body = speakable_content(content, message.guild, options, names)
        kinds = [attachment_kind(a.filename, a.content_type) for a in message.attachments]
        name = await self._spoken_name(message, member)
        sent = f"{name} sent {attachment_phrase(kinds)}" if kinds else ""
        if not body:
            return sent
        said = body
        if gp.xsaid and not self._same_author_recently(message.guild.id, message.author.id):
            said = f"{name} said, {body}"
        return f"{said}. {sent}" if sent else said

    async def _spoken_name(self, message: discord.Message, member) -> str:
        nick = await self.bot.settings.nickname(message.guild.id, message.author.id)
        raw = nick or (member.display_name if member is not None else message.author.display_name)
        options = TextOptions(emoji="skip", max_chars=40)
        return speakable_content(raw, None, options) or "someone"

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

    def message_deleted(self, guild_id: int | None, message_id: int) -> bool:
        if guild_id is None or self.bot.speech is None:
            return False
        return self.bot.speech.remove_message(guild_id, message_id)
