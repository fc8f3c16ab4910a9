"""SpeechService (bot.speech): one speaker and one voice connection per guild; follows, leaves when alone."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import discord

from bot.config import SpeechSettings
from bot.speech.connection import VoiceConnection
from bot.speech.speaker import GuildSpeaker, Outcome, Request, Utterance, frames_of

log = logging.getLogger(__name__)
ALONE_GRACE_S = 2.0
DISCONNECT_GRACE_S = 1.0  # how long a real voice disconnect may take to remove discord.py's VoiceClient


class SpeechService:
    """What plugins call to speak: join, leave, enqueue, skip, stop, queue."""

    def __init__(self, client: discord.Client, engine, settings: SpeechSettings) -> None:
        self.client = client
        self.engine = engine
        self.settings = settings
        self.speakers: dict[int, GuildSpeaker] = {}
        self.listeners: list[Callable[[int, Utterance, Outcome], None]] = []
        self._alone_checks: dict[int, asyncio.TimerHandle] = {}
        client.add_listener(self._on_voice_state_update, "on_voice_state_update")

    def speaker(self, guild_id: int) -> GuildSpeaker:
        sp = self.speakers.get(guild_id)
        if sp is None:
            s = self.settings
            sp = GuildSpeaker(
                guild_id, self.engine, VoiceConnection(self.client, guild_id),
                queue_max=s.queue_max, per_guild=s.per_guild, lookahead=s.lookahead,
                buffer_frames=frames_of(s.buffer_s), idle_leave_s=s.idle_leave_s,
                preroll_s=s.busy_preroll_s, preroll_wait_s=s.busy_preroll_wait_s, e2ee_wait_s=s.e2ee_wait_s,
                on_utterance=lambda utt, outcome, g=guild_id: self._report(g, utt, outcome),
                encoder={"application": "voip", "bitrate": s.opus_bitrate, "fec": s.opus_fec,
                         "signal_type": "voice"},
            )
            self.speakers[guild_id] = sp
        return sp

    def _report(self, guild_id: int, utt: Utterance, outcome: Outcome) -> None:
        r = utt.request
        info = getattr(self.engine, "info", None)
        log.info(
            "utterance request=%s guild=%s kind=%s backend=%s outcome=%s ttfa=%s audio_s=%.2f synth_s=%.2f "
            "chars=%d underruns=%d prerolled=%d",
            r.request_id, guild_id, r.kind, info.name if info else "?", outcome.value,
            f"{utt.ttfa:.3f}" if utt.ttfa is not None else "-", utt.audio_seconds, utt.synth_seconds,
            len(r.text), utt.source.underruns if utt.source is not None else 0, utt.prerolled,
        )
        for listener in self.listeners:
            try:
                listener(guild_id, utt, outcome)
            except Exception:
                log.exception("speech listener failed")

    def is_connected(self, guild_id: int) -> bool:
        sp = self.speakers.get(guild_id)
        if sp is not None:
            return sp.connection.is_connected()
        guild = self.client.get_guild(guild_id)
        return bool(guild and guild.voice_client and guild.voice_client.is_connected())

    def voice_channel(self, guild_id: int) -> discord.abc.GuildChannel | None:
        return self.speaker(guild_id).connection.channel

    async def join(self, channel: discord.VoiceChannel | discord.StageChannel) -> discord.VoiceClient:
        return await self.speaker(channel.guild.id).connection.join(channel)

    async def leave(self, guild_id: int) -> bool:
        sp = self.speakers.get(guild_id)
        if sp is None:
            return False
        sp.stop()
        return await sp.connection.leave()

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
        speakers = list(self.speakers.values())
        await asyncio.gather(*(sp.close() for sp in speakers), return_exceptions=True)
        for sp in speakers:
            vc = sp.connection.voice_client
            if vc is not None:
                try:
                    await asyncio.wait_for(vc.disconnect(force=True), 5)
                except Exception:
                    pass

    # -- voice state -----------------------------------------------------------------------------
    async def _on_voice_state_update(self, member: discord.Member, before: discord.VoiceState,
                                     after: discord.VoiceState) -> None:
        guild_id = member.guild.id
        sp = self.speakers.get(guild_id)
        if sp is None:
            return
        me = member.guild.me
        if me is not None and member.id == me.id:
            if after.channel is None and sp.connection.channel_id is not None and before.channel is not None:
                if await self._voice_client_removed(sp):
                    log.info("guild %s: disconnected from voice by Discord or an admin; queue cleared", guild_id)
                    sp.connection.channel_id = None
                    sp.stop()
                else:
                    log.info("guild %s: voice connection dropped; discord.py is reconnecting", guild_id)
            elif after.channel is not None and sp.connection.channel_id not in (None, after.channel.id):
                log.info("guild %s: moved to channel %s; following", guild_id, after.channel.id)
                sp.connection.channel_id = after.channel.id
        if self.settings.leave_when_alone:
            self._schedule_alone_check(guild_id)

    async def _voice_client_removed(self, sp: GuildSpeaker) -> bool:
        """Whether leaving the channel was a real disconnect (a kick, the channel deleted) rather than
        discord.py's own reconnect after the voice websocket closed (it leaves and rejoins, keeping its
        VoiceClient). A real disconnect removes the VoiceClient within moments; wait that long to see."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DISCONNECT_GRACE_S
        while True:
            vc = sp.connection.voice_client
            if vc is None:
                return True
            if vc.is_connected() or loop.time() >= deadline:
                return False
            await asyncio.sleep(0.05)

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
        sp = self.speakers.get(guild_id)
        channel = sp.connection.channel if sp else None
        if channel is None:
            return
        if not any(not m.bot for m in channel.members):
            log.info("guild %s: alone in %s, leaving", guild_id, channel.id)
            await self.leave(guild_id)
