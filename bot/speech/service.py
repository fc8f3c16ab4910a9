"""SpeechService (bot.speech): per guild one GuildCall (its voice connection and, once something is said, its
speaker), the one owner of that guild's speech; follows, leaves when alone."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

import discord

from bot import guild_options
from bot.config import Settings
from bot.errors import UserError
from bot.prefs import PrefsService
from bot.speech.audio_file import AudioFiles
from bot.speech.call import GuildCall
from bot.speech.connection.connection_state import ConnectionState
from bot.speech.connection.presence import Presence
from bot.speech.connection.voice_connection import VoiceConnection
from bot.speech.connection.voice_receive import ReceiveCounts
from bot.speech.playback.driver import VoiceDriver
from bot.speech.queue.pacing import Pacer
from bot.speech.queue.speaker import GuildSpeaker, frames_of
from bot.speech.queue.utterance import Late, Outcome, QueueFull, Request, Utterance
from bot.speech.text.say import (
    Join,
    Reason,
    Refusal,
    SayOrder,
    author_channel,
    check_in_channel,
    late,
    queued_text,
    spoken,
    spoken_text,
)
from bot.storage.settings_repo import GuildPrefs
from engine.base import Engine, Voice

if TYPE_CHECKING:
    from bot.dictionary import DictionaryService, Rules
    from bot.languages import LanguageService
    from bot.voices import VoiceService

log = logging.getLogger(__name__)
# Opus in its full-band (CELT) mode: at 64 kbps on this project's voice ~3x cheaper per frame than "voip"/"voice"
# (SILK or hybrid: 117 vs 325 us per 20 ms frame) and closer to the synthesized waveform (SNR 23 vs 12 dB)
OPUS_OPTIONS = {"application": "audio", "signal_type": "auto"}
Ending = Literal["stop", "left"]  # why a guild's speech was ended: /stop, or the bot left its voice channel


def tell(hooks: list[Callable[..., None]], *args: object) -> None:
    """Call each hook with `args`; one that fails is logged, and the others are still told."""
    for hook in hooks:
        try:
            hook(*args)
        except Exception:
            log.exception("speech hook failed")


class SpeechService:
    """What plugins call to speak: join, leave, enqueue, skip, stop, queue."""

    def __init__(self, client: discord.Client, engine: Engine, settings: Settings, *, prefs: PrefsService,
                 voices: VoiceService | None, dictionary: DictionaryService | None = None,
                 languages: LanguageService | None = None) -> None:
        self.client = client
        self.engine = engine
        self.config = settings
        self.settings = settings.speech
        self.prefs = prefs
        self.voices = voices
        self.dictionary = dictionary
        self.languages = languages
        self.calls: dict[int, GuildCall] = {}  # each guild's speech, made on its first join or say
        # audio length estimates, shared by every guild's speaker
        self.pacer = Pacer()
        s = settings.speech  # one sender for every guild's playback
        self.driver = VoiceDriver(OPUS_OPTIONS | {"bitrate": s.opus_bitrate, "fec": s.opus_fec},
                                  complexity=s.opus_complexity)
        self.files = AudioFiles(engine)
        self.received = ReceiveCounts()  # every call's receive path: packets heard and dropped (/metrics)
        self.listeners: list[Callable[[int, Utterance, Outcome], None]] = []
        self.on_end: list[Callable[[int, Ending], None]] = []  # told when a guild's speech is stopped or left
        self.presence = Presence(client, leave_when_alone=self.settings.leave_when_alone,
                                 connection=self._connection, leave=self.leave)

    def call(self, guild_id: int) -> GuildCall:
        """The guild's call (its connection made, not joined, on first use)."""
        call = self.calls.get(guild_id)
        if call is None:
            conn = VoiceConnection(self.client, guild_id, receive_counts=self.received,
                                   on_state=lambda _, now, g=guild_id: self._connection_is(g, now))
            call = self.calls[guild_id] = GuildCall(conn)
        return call

    def connection(self, guild_id: int) -> VoiceConnection:
        """The guild's voice connection (made, not joined, on first use)."""
        return self.call(guild_id).connection

    def _connection(self, guild_id: int) -> VoiceConnection | None:
        call = self.calls.get(guild_id)
        return call.connection if call is not None else None

    def speaker(self, guild_id: int) -> GuildSpeaker:
        """The guild's speaker (made on first use, with its call)."""
        call = self.call(guild_id)
        sp = call.speaker
        if sp is None:
            s = self.settings
            sp = call.speaker = GuildSpeaker(
                guild_id, self.engine, call.connection,
                queue_max=s.queue_max, per_guild=s.per_guild, lookahead=s.lookahead,
                buffer_frames=frames_of(s.buffer_s), idle_leave_s=s.idle_leave_s,
                pacer=self.pacer, e2ee_wait_s=s.e2ee_wait_s, driver=self.driver, catch_up=s.catch_up_speed,
                on_utterance=lambda utt, outcome, g=guild_id: self._report(g, utt, outcome),
            )
        return sp

    def speakers(self) -> dict[int, GuildSpeaker]:
        """The guilds that have said something, and their speakers."""
        return {g: call.speaker for g, call in self.calls.items() if call.speaker is not None}

    def _speaker(self, guild_id: int) -> GuildSpeaker | None:
        call = self.calls.get(guild_id)
        return call.speaker if call is not None else None

    def _report(self, guild_id: int, utt: Utterance, outcome: Outcome) -> None:
        log.info("utterance request=%s guild=%s backend=%s %s", utt.request.request_id, guild_id,
                 self.engine.info.name, utt.describe(outcome))
        tell(self.listeners, guild_id, utt, outcome)

    def is_connected(self, guild_id: int) -> bool:
        conn = self._connection(guild_id)
        return conn is not None and conn.is_connected()

    def voice_connections(self) -> int:
        """How many guilds' voice connections are up now."""
        return sum(call.connection.is_connected() for call in self.calls.values())

    def voice_channel(self, guild_id: int) -> discord.abc.GuildChannel | None:
        conn = self._connection(guild_id)
        return conn.channel if conn is not None else None

    async def join(self, channel: discord.VoiceChannel | discord.StageChannel) -> VoiceConnection:
        connection = self.connection(channel.guild.id)
        await connection.join(channel)
        return connection

    async def leave(self, guild_id: int) -> bool:
        conn = self._connection(guild_id)
        if conn is None:
            return False
        tell(self.on_end, guild_id, "left")
        self.stop(guild_id)
        return await conn.leave()

    async def say(self, order: SayOrder) -> Utterance:
        """Queue what the order asks for, or raise a Refusal saying why not (bot/speech/text/say.py).

        Order of checks: the asker's voice, what is spoken (cleaned; empty or over the limit is refused) and the
        voice for its language, then where (joining when the order allows: nothing is joined for an order refused
        anyway) and who may (require_voice), the caller's admission, then the queue's (SpeechQueue.admit): its
        expected wait within the guild's max_delay, the queue bound."""
        gp, text, voice = await self._what(order)
        await self._place(order, gp)
        if order.admit is not None and not order.admit():
            raise Refusal(Reason.NOT_ADMITTED, "Not now.")
        request = Request(
            text=text, voice=voice, author_id=order.author.id, channel_id=order.channel_id,
            message_id=order.message_id, kind=order.kind, notify=order.notify, label=order.label or text[:80],
        )
        try:
            return self.speaker(order.guild.id).enqueue(request, limit=gp.max_queue, max_delay=gp.max_delay)
        except Late as exc:
            raise late(order, exc.wait, gp.max_delay) from None
        except QueueFull as exc:
            raise Refusal(Reason.QUEUE_FULL, str(exc)) from None

    async def render(self, order: SayOrder) -> bytes:
        """The order spoken into an Ogg/Opus file instead of a voice channel (/tts): the same text and voice
        as say gives it (cleaned, the dictionary, within the limit), bounded by the guild's queue bound."""
        gp, text, voice = await self._what(order)
        return await self.files.render(order.guild.id, text, voice, limit=gp.max_queue)

    async def _what(self, order: SayOrder) -> tuple[GuildPrefs, str, Voice]:
        """The guild's effective options, what is spoken and in which voice (bot/speech/text/say.py spoken), or a
        Refusal."""
        gp = await self._prefs(order)
        self.call(order.guild.id).connection.ducking.depth_db = gp.ducking  # a changed setting holds from this order on
        text, voice = await spoken(order, self.settings, gp, await self._voice(order), rules=await self._rules(order),
                                   chosen=functools.partial(self.prefs.spoken_names, order.guild.id),
                                   languages=self.languages)
        return gp, text, voice

    async def text_of(self, order: SayOrder) -> str:
        """What would be spoken for `order` (/dictionary test): its words as say gives them, or a Refusal."""
        text, _ = await spoken_text(order, self.settings, await self._prefs(order), await self._rules(order),
                                    functools.partial(self.prefs.spoken_names, order.guild.id))
        return text

    async def _prefs(self, order: SayOrder) -> GuildPrefs:
        return guild_options.effective(await self.prefs.guild(order.guild.id), self.config)

    async def _rules(self, order: SayOrder) -> Rules | None:
        """The pronunciations for the order's author here (theirs, the server's, the operator's)."""
        if self.dictionary is None:
            return None
        return await self.dictionary.rules(order.guild.id, order.author.id)

    async def _place(self, order: SayOrder, gp: GuildPrefs) -> None:
        """Be in a voice channel the order may use, joining the author's when allowed."""
        guild_id = order.guild.id
        if not self.is_connected(guild_id):
            target = author_channel(order.author)
            if order.join is Join.NEVER:
                raise Refusal(Reason.NOT_CONNECTED, "I'm not in a voice channel here; use /join first.")
            if order.join is Join.AUTOJOIN and not gp.autojoin:
                raise Refusal(Reason.NOT_CONNECTED, "I'm not in a voice channel here; use /join first.")
            if target is None:
                raise Refusal(Reason.NOT_CONNECTED, "Join a voice channel first (or use /join), then try again.")
            try:
                await self.join(target)
            except UserError as exc:
                raise Refusal(Reason.JOIN_FAILED, str(exc)) from None
        check_in_channel(order.author, self.voice_channel(guild_id), gp.require_in_voice)

    async def _voice(self, order: SayOrder) -> Voice:
        if self.voices is None:
            if order.voice_name:
                raise UserError("Custom voices are not available on this bot.")
            return Voice()
        speaker = order.voice_of or order.author
        roles = [r.id for r in reversed(getattr(speaker, "roles", []))]  # highest first: a role's voice (role_voice)
        return await self.voices.resolve(speaker.id, order.guild.id, order.voice_name, roles)

    def queued_text(self, guild_id: int, utt: Utterance) -> str:
        """What the asker is told: speaking now, or queued, with the expected wait when it is long."""
        return queued_text(self.speaker(guild_id).position(utt), utt.expected_wait, self.settings.say_notice_s)

    def skip(self, guild_id: int) -> bool:
        return (sp := self._speaker(guild_id)) is not None and sp.skip()

    def stop(self, guild_id: int) -> int:
        tell(self.on_end, guild_id, "stop")
        return sp.stop() if (sp := self._speaker(guild_id)) else 0

    def remove_message(self, guild_id: int, message_id: int) -> bool:
        return (sp := self._speaker(guild_id)) is not None and sp.remove_message(message_id)

    def queue(self, guild_id: int) -> tuple[Utterance | None, list[Utterance]]:
        return (sp.current, sp.pending()) if (sp := self._speaker(guild_id)) else (None, [])

    @property
    def underruns(self) -> int:
        return sum(sp.underruns for sp in self.speakers().values())

    async def close(self) -> None:
        self.presence.close()
        await asyncio.gather(*(sp.close() for sp in self.speakers().values()), return_exceptions=True)
        await asyncio.to_thread(self.driver.close)
        for call in list(self.calls.values()):
            try:
                await asyncio.wait_for(call.connection.leave(), 5)
            except Exception:  # noqa: BLE001 - leaving on shutdown: nothing left to tell
                pass

    # -- voice state -----------------------------------------------------------------------------
    def _connection_is(self, guild_id: int, state: ConnectionState) -> None:
        """A guild's connection changed state: dropped (kicked, the channel deleted) clears its queue."""
        if state is ConnectionState.DROPPED:
            tell(self.on_end, guild_id, "left")
        sp = self._speaker(guild_id)
        if state is ConnectionState.DROPPED and sp is not None:
            log.info("guild %s: dropped from voice; queue cleared", guild_id)
            sp.stop()
