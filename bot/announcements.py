"""Announcer: "NAME joined" and "NAME left" said in the bot's voice channel (the server's `announce`), a burst said
once it is over as one sentence ("3 people joined"), one announcement waiting at a time, never naming or counting
who opted out."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

import discord

from bot import guild_options
from bot.config import Settings
from bot.languages import AUTO, LanguageService
from bot.prefs import PrefsService
from bot.readout import spoken_name
from bot.speech.queue.utterance import Outcome, Utterance
from bot.speech.service import SpeechService
from bot.speech.text.say import Join, Refusal, SayOrder

log = logging.getLogger(__name__)
QUIET_S = 2.0  # a burst is said once nobody came or went for this long
LONGEST_S = 10.0  # or this long after its first, while a raid goes on
MAX_TRACKED = 1_000  # members followed in one burst; a raid beyond this is not counted further
# (one joined, one left, N joined, N left) per language; a language not here is announced in English
PHRASES: dict[str, tuple[str, str, str, str]] = {
    "en": ("{} joined", "{} left", "{} people joined", "{} people left"),
    "ja": ("{}さんが参加しました", "{}さんが退出しました", "{}人が参加しました", "{}人が退出しました"),
    "zh": ("{}加入了", "{}离开了", "{}人加入了", "{}人离开了"),
    "ko": ("{}님이 들어왔습니다", "{}님이 나갔습니다", "{}명이 들어왔습니다", "{}명이 나갔습니다"),
    "es": ("{} entró", "{} salió", "entraron {} personas", "salieron {} personas"),
    "fr": ("{} a rejoint le salon", "{} a quitté le salon", "{} personnes ont rejoint le salon",
           "{} personnes ont quitté le salon"),
    "it": ("entra {}", "esce {}", "entrano {} persone", "escono {} persone"),
    "pt": ("{} entrou", "{} saiu", "{} pessoas entraram", "{} pessoas saíram"),
    "de": ("{} ist beigetreten", "{} ist gegangen", "{} Personen sind beigetreten", "{} Personen sind gegangen"),
    "hi": ("{} शामिल हुए", "{} चले गए", "{} लोग शामिल हुए", "{} लोग चले गए"),
}


def sentence(joined: list[str], left: list[str], language: str) -> str:
    """What is said for a burst: each side by name when one person, else counted; "" when nobody came or went."""
    one_in, one_out, many_in, many_out = PHRASES.get(language.partition("-")[0], PHRASES["en"])
    parts = [(one if len(names) == 1 else many).format(names[0] if len(names) == 1 else len(names))
             for names, one, many in ((joined, one_in, many_in), (left, one_out, many_out)) if names]
    return ". ".join(parts)


@dataclass
class _Burst:
    """One guild's comings and goings not yet said: per member, whether they were in before their first change."""

    channel_id: int
    changes: dict[int, tuple[bool, discord.Member]] = field(default_factory=dict)
    first_at: float = 0.0  # the loop's time of the first change not yet said
    timer: asyncio.TimerHandle | None = None
    busy: bool = False  # an announcement is being made or waits to be heard: the next waits for it
    waiting: Utterance | None = None  # that announcement, once queued


class Announcer:
    """Follows voice states in the bot's channel of each guild that turned `announce` on (bot.readout's plugin)."""

    def __init__(self, client: discord.Client, speech: SpeechService, prefs: PrefsService, config: Settings,
                 languages: LanguageService) -> None:
        self.client = client
        self.speech = speech
        self.prefs = prefs
        self.config = config
        self.languages = languages
        self._bursts: dict[int, _Burst] = {}
        self._locks: dict[int, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task] = set()

    async def voice_state(self, member: discord.Member, before: discord.VoiceState,
                          after: discord.VoiceState) -> None:
        """A member's voice state changed while the bot is in a channel: noted with whether they were in it before
        their first change of the burst. Only `before` is read: discord.py's `after` is the live state, already
        changed again when updates come fast; who is in at the end is read from the channel when it is said."""
        channel = self.speech.voice_channel(member.guild.id)
        if member.bot or channel is None:
            return
        was_in = before.channel is not None and before.channel.id == channel.id
        async with self._locks.setdefault(member.guild.id, asyncio.Lock()):  # in the order they came
            if (await self.prefs.guild(member.guild.id)).announce_voice:
                self._note(member, channel.id, was_in)

    def _note(self, member: discord.Member, channel_id: int, was_in: bool) -> None:
        burst = self._bursts.get(member.guild.id)
        if burst is None or burst.channel_id != channel_id:
            self._drop(member.guild.id)
            burst = self._bursts[member.guild.id] = _Burst(channel_id)
        first = burst.changes.get(member.id)
        if first is None and len(burst.changes) >= MAX_TRACKED:
            return
        if not burst.changes:
            burst.first_at = asyncio.get_running_loop().time()
        burst.changes[member.id] = (first[0] if first else was_in, member)
        self._schedule(member.guild.id, burst)

    def _schedule(self, guild_id: int, burst: _Burst) -> None:
        """Say the burst once it is quiet (or at its longest); while an announcement is being made or waits to be
        heard, the next is made when it ends."""
        if burst.busy or not burst.changes:
            return
        if burst.timer is not None:
            burst.timer.cancel()
        loop = asyncio.get_running_loop()
        burst.timer = loop.call_later(min(QUIET_S, burst.first_at + LONGEST_S - loop.time()), self._start, guild_id)

    def on_utterance(self, guild_id: int, utt: Utterance, outcome: Outcome) -> None:
        """The guild's announcement ended (a speech listener): what came meanwhile is said next."""
        burst = self._bursts.get(guild_id)
        if burst is not None and burst.waiting is utt:
            burst.waiting, burst.busy = None, False
            self._schedule(guild_id, burst)

    def _start(self, guild_id: int) -> None:
        task = asyncio.get_running_loop().create_task(self._announce(guild_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _announce(self, guild_id: int) -> None:
        burst = self._bursts.get(guild_id)
        guild = self.client.get_guild(guild_id)
        if burst is None or guild is None:
            return
        burst.timer, burst.busy = None, True
        changes, burst.changes = burst.changes, {}
        channel = self.speech.voice_channel(guild_id)
        try:
            if channel is not None and channel.id == burst.channel_id:
                text = await self._sentence(guild, changes, set(getattr(channel, "voice_states", {})))
                if text:
                    burst.waiting = await self.speech.say(SayOrder(
                        guild=guild, author=guild.me, text=text, kind="readout", join=Join.NEVER, cut_long=True,
                        label="announcement"))
        except Refusal as exc:  # not in a channel any more, the queue full, too late: nothing to catch up on
            log.info("guild %s: announcement not said: %s", guild_id, exc.reason.value)
        except Exception:
            log.exception("guild %s: announcement failed", guild_id)
        if burst.waiting is None:  # nothing queued: what came meanwhile is said once quiet
            burst.busy = False
            if self._bursts.get(guild_id) is burst:  # not dropped meanwhile (the bot moved)
                self._schedule(guild_id, burst)

    async def _sentence(self, guild: discord.Guild, changes: dict[int, tuple[bool, discord.Member]],
                        present: set[int]) -> str:
        """The burst's net comings and goings (who was in before and who is in now, `present`) in the guild's
        language, without members who opted out."""
        joined: list[discord.Member] = []
        left: list[discord.Member] = []
        for member_id, (was_in, member) in changes.items():
            now_in = member_id in present
            if was_in != now_in and not (await self.prefs.user(member_id)).opted_out:
                (joined if now_in else left).append(member)
        gp = guild_options.effective(await self.prefs.guild(guild.id), self.config)
        language = gp.language if gp.language and gp.language != AUTO else self.languages.default_language
        return sentence(await self._names(guild, joined), await self._names(guild, left), language)

    async def _names(self, guild: discord.Guild, members: list[discord.Member]) -> list[str]:
        """One member's spoken name; several are only counted, so their names are not looked up."""
        if len(members) == 1:
            return [await spoken_name(self.prefs, guild.id, members[0])]
        return [m.display_name for m in members]

    def _drop(self, guild_id: int) -> None:
        burst = self._bursts.pop(guild_id, None)
        if burst is not None and burst.timer is not None:
            burst.timer.cancel()

    def close(self) -> None:
        for guild_id in list(self._bursts):
            self._drop(guild_id)
        for task in self._tasks:
            task.cancel()
