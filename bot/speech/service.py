"""SpeechService (bot.speech): per guild a voice connection and, once something is said, a speaker playing through
it (both owned here); follows, leaves when alone."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import discord

from bot import guild_options
from bot.config import Settings
from bot.errors import UserError
from bot.prefs import PrefsService
from bot.storage.settings_repo import GuildPrefs
from bot.speech.audio_file import AudioFiles
from bot.speech.connection import VoiceConnection
from bot.speech.connection_state import ConnectionState
from bot.speech.driver import VoiceDriver
from bot.speech.pacing import Pacer
from bot.speech.discord_text import fetch_mentioned_members, mentioned_user_ids
from bot.speech.say import Join, Reason, Refusal, SayOrder, author_channel, check_in_channel, spoken_text
from bot.speech.speaker import GuildSpeaker, frames_of
from bot.speech.utterance import Outcome, QueueFull, Request, Utterance
from engine.base import Engine, Voice

if TYPE_CHECKING:
    from bot.dictionary import DictionaryService
    from bot.languages import LanguageService
    from bot.voices import VoiceService

log = logging.getLogger(__name__)
ALONE_GRACE_S = 2.0
# Opus in its full-band (CELT) mode: at 64 kbps on this project's voice ~3x cheaper per frame than "voip"/"voice"
# (SILK or hybrid: 117 vs 325 us per 20 ms frame) and closer to the synthesized waveform (SNR 23 vs 12 dB)
OPUS_OPTIONS = {"application": "audio", "signal_type": "auto"}


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
        self.connections: dict[int, VoiceConnection] = {}  # made on a guild's first join or say
        self.speakers: dict[int, GuildSpeaker] = {}  # made on a guild's first say
        self.pacer = Pacer()  # audio length estimates, shared by every guild's speaker
        s = settings.speech  # one sender for every guild's playback
        self.driver = VoiceDriver(OPUS_OPTIONS | {"bitrate": s.opus_bitrate, "fec": s.opus_fec},
                                  complexity=s.opus_complexity)
        self.files = AudioFiles(engine)
        self.listeners: list[Callable[[int, Utterance, Outcome], None]] = []
        self._alone_checks: dict[int, asyncio.TimerHandle] = {}
        client.add_listener(self._on_voice_state_update, "on_voice_state_update")

    def connection(self, guild_id: int) -> VoiceConnection:
        """The guild's voice connection (made, not joined, on first use)."""
        conn = self.connections.get(guild_id)
        if conn is None:
            conn = VoiceConnection(self.client, guild_id, on_state=lambda _, now, g=guild_id: self._connection_is(g, now))
            self.connections[guild_id] = conn
        return conn

    def speaker(self, guild_id: int) -> GuildSpeaker:
        sp = self.speakers.get(guild_id)
        if sp is None:
            s = self.settings
            sp = GuildSpeaker(
                guild_id, self.engine, self.connection(guild_id),
                queue_max=s.queue_max, per_guild=s.per_guild, lookahead=s.lookahead,
                buffer_frames=frames_of(s.buffer_s), idle_leave_s=s.idle_leave_s,
                pacer=self.pacer, e2ee_wait_s=s.e2ee_wait_s,
                on_utterance=lambda utt, outcome, g=guild_id: self._report(g, utt, outcome),
                driver=self.driver,
                catch_up=s.catch_up_speed,
            )
            self.speakers[guild_id] = sp
        return sp

    def _report(self, guild_id: int, utt: Utterance, outcome: Outcome) -> None:
        r = utt.request
        info = self.engine.info
        log.info(
            "utterance request=%s guild=%s kind=%s backend=%s outcome=%s ttfa=%s audio_s=%.2f synth_s=%.2f "
            "chars=%d underruns=%d held_s=%.2f",
            r.request_id, guild_id, r.kind, info.name, outcome.value,
            f"{utt.ttfa:.3f}" if utt.ttfa is not None else "-", utt.audio_seconds, utt.synth_seconds,
            len(r.text), utt.source.underruns if utt.source is not None else 0, utt.held_s,
        )
        for listener in self.listeners:
            try:
                listener(guild_id, utt, outcome)
            except Exception:
                log.exception("speech listener failed")

    def is_connected(self, guild_id: int) -> bool:
        conn = self.connections.get(guild_id)
        return conn is not None and conn.is_connected()

    def voice_connections(self) -> int:
        """How many guilds' voice connections are up now."""
        return sum(conn.is_connected() for conn in self.connections.values())

    def voice_channel(self, guild_id: int) -> discord.abc.GuildChannel | None:
        conn = self.connections.get(guild_id)
        return conn.channel if conn is not None else None

    async def join(self, channel: discord.VoiceChannel | discord.StageChannel) -> VoiceConnection:
        connection = self.connection(channel.guild.id)
        await connection.join(channel)
        return connection

    async def leave(self, guild_id: int) -> bool:
        conn = self.connections.get(guild_id)
        if conn is None:
            return False
        self.stop(guild_id)
        return await conn.leave()

    async def say(self, order: SayOrder) -> Utterance:
        """Queue what the order asks for, or raise a Refusal saying why not (bot/speech/say.py).

        Order of checks: what is spoken (cleaned; empty or over the limit is refused), the voice, then where
        (joining when the order allows: nothing is joined for an order refused anyway) and who may
        (require_voice), the caller's admission, the queue bound."""
        guild = order.guild
        gp, text, voice = await self._what(order)
        await self._place(order, gp)
        if order.admit is not None and not order.admit():
            raise Refusal(Reason.NOT_ADMITTED, "Not now.")
        request = Request(
            text=text, voice=voice, author_id=order.author.id, channel_id=order.channel_id,
            message_id=order.message_id, kind=order.kind, notify=order.notify, label=order.label or text[:80],
        )
        self._admit_in_time(order, request, gp.max_delay)
        try:
            return self.enqueue(guild.id, request, limit=gp.max_queue)
        except QueueFull as exc:
            raise Refusal(Reason.QUEUE_FULL, str(exc)) from None

    def _admit_in_time(self, order: SayOrder, request: Request, max_delay: float) -> None:
        """Readout must start within the guild's max_delay (then it is skipped to catch up); asked-for speech
        is refused with its wait when that is longer, and told the wait when it is long (order.expected_wait)."""
        speaker = self.speaker(order.guild.id)
        wait = speaker.expected_wait(request)
        order.expected_wait = wait
        behind = not speaker.idle  # with nothing ahead, skipping would not catch anything up
        if order.kind == "readout":
            request.start_by = request.created_at + max_delay
            if wait > max_delay and behind:
                raise Refusal(Reason.LATE, f"it could not be read within {max_delay:.0f} s")
        elif wait > max_delay and behind:
            raise Refusal(Reason.LATE, f"I'm busy here: that would start in about {wait:.0f} s, past this server's "
                                       f"limit of {max_delay:.0f} s. Try again in a little while.")

    async def render(self, order: SayOrder) -> bytes:
        """The order spoken into an Ogg/Opus file instead of a voice channel (/tts): the same text and voice
        as say gives it (cleaned, the dictionary, within the limit), bounded by the guild's queue bound."""
        gp, text, voice = await self._what(order)
        return await self.files.render(order.guild.id, text, voice, limit=gp.max_queue)

    async def _what(self, order: SayOrder) -> tuple[GuildPrefs, str, Voice]:
        """The guild's effective options, what is spoken and in which voice: the author's, or the one that
        speaks the message's language (bot/languages.py) (or a Refusal)."""
        guild = order.guild
        gp = guild_options.effective(await self.prefs.guild(guild.id), self.config)
        if order.names is None:
            order.names = await fetch_mentioned_members(order.text, guild)
        order.names.update(await self.prefs.spoken_names(guild.id, mentioned_user_ids(order.text)))  # their choice
        words = await self.dictionary.entries(guild.id) if self.dictionary is not None else {}
        text, body = spoken_text(order, self.settings, gp, words)
        voice = await self._voice(order)
        if self.languages is not None:
            voice = await self.languages.voice_for(body, voice, order.author.id, gp.language, gp.voices)
        return gp, text, voice

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
        return await self.voices.resolve((order.voice_of or order.author).id, order.guild.id, order.voice_name)

    def queued_text(self, guild_id: int, utt: Utterance, wait: float) -> str:
        """What the asker is told: speaking now, or queued, with the expected wait when it is long."""
        position = self.speaker(guild_id).position(utt)
        about = f" (starts in about {wait:.0f} s)" if wait > self.settings.say_notice_s else ""
        if position <= 1 and not about:
            return "Speaking."
        ahead = f"{position - 1} ahead of you" if position > 1 else "next"
        return f"Queued: {ahead}{about}."

    def enqueue(self, guild_id: int, request: Request, *, limit: int | None = None) -> Utterance:
        return self.speaker(guild_id).enqueue(request, limit=limit)

    def skip(self, guild_id: int) -> bool:
        sp = self.speakers.get(guild_id)
        return sp.skip() if sp else False

    def stop(self, guild_id: int) -> int:
        sp = self.speakers.get(guild_id)
        return sp.stop() if sp else 0

    def remove_message(self, guild_id: int, message_id: int) -> bool:
        sp = self.speakers.get(guild_id)
        return sp.remove_message(message_id) if sp else False

    def queue(self, guild_id: int) -> tuple[Utterance | None, list[Utterance]]:
        sp = self.speakers.get(guild_id)
        return (sp.current, sp.pending()) if sp else (None, [])

    @property
    def underruns(self) -> int:
        return sum(sp.underruns for sp in self.speakers.values())

    async def close(self) -> None:
        for handle in self._alone_checks.values():
            handle.cancel()
        await asyncio.gather(*(sp.close() for sp in self.speakers.values()), return_exceptions=True)
        await asyncio.to_thread(self.driver.close)
        for conn in list(self.connections.values()):
            try:
                await asyncio.wait_for(conn.leave(), 5)
            except Exception:
                pass

    # -- voice state -----------------------------------------------------------------------------
    def _connection_is(self, guild_id: int, state: ConnectionState) -> None:
        """A guild's connection changed state: dropped (kicked, the channel deleted) clears its queue."""
        sp = self.speakers.get(guild_id)
        if state is ConnectionState.DROPPED and sp is not None:
            log.info("guild %s: dropped from voice; queue cleared", guild_id)
            sp.stop()

    async def _on_voice_state_update(self, member: discord.Member, before: discord.VoiceState,
                                     after: discord.VoiceState) -> None:
        """Anyone's voice state (the bot's own reaches its VoiceConnection from discord.py): who else is in the call
        decides whether E2EE is expected, and whether the bot is alone."""
        guild_id = member.guild.id
        conn = self.connections.get(guild_id)
        if conn is None:
            return
        conn.members_changed()
        if self.settings.leave_when_alone:
            self._schedule_alone_check(guild_id)

    def _schedule_alone_check(self, guild_id: int) -> None:
        old = self._alone_checks.pop(guild_id, None)
        if old is not None:
            old.cancel()
        loop = asyncio.get_running_loop()
        self._alone_checks[guild_id] = loop.call_later(
            ALONE_GRACE_S, lambda: loop.create_task(self._leave_if_alone(guild_id))
        )

    async def _leave_if_alone(self, guild_id: int) -> None:
        self._alone_checks.pop(guild_id, None)
        channel = self.voice_channel(guild_id)
        if channel is None:
            return
        if not any(not m.bot for m in channel.members):
            log.info("guild %s: alone in %s, leaving", guild_id, channel.id)
            await self.leave(guild_id)
