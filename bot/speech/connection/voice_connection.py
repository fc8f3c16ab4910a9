"""VoiceConnection: a guild's voice connection, with CallEvents (call_events.py: its state from voice
events) and VoiceSink (voice_sink.py: the driver's side) the only code touching discord.py's VoiceClient."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import discord

from bot.errors import UserError
from bot.speech.connection.call_events import CallEvents
from bot.speech.connection.connection_state import LIVE, ConnectionState
from bot.speech.connection.e2ee import e2ee_expected, privacy_code
from bot.speech.connection.member_audio import MemberAudio
from bot.speech.connection.voice_client import ObservedVoiceClient
from bot.speech.connection.voice_receive import ReceiveCounts, VoiceReceive
from bot.speech.connection.voice_sink import VoiceSink
from bot.speech.playback.ducking import Ducking

log = logging.getLogger(__name__)
NO_DAVE = ("Discord requires end-to-end encrypted voice (DAVE) in {channel}, and this bot's voice library did not "
           "offer it. The bot's host needs `davey` (installed by `pip install \"discord.py[voice]\"`).")
RECONNECT_GRACE_S = 5.0  # how long discord.py may take to reconnect or move by itself before we connect afresh
S = ConnectionState
VoiceChannel = discord.VoiceChannel | discord.StageChannel


def check_can_join(channel: VoiceChannel) -> None:
    """Raise a UserError naming what is missing when the bot cannot connect to or speak in `channel`."""
    me = channel.guild.me
    perms = channel.permissions_for(me)
    if not perms.connect:
        raise UserError(f"I don't have permission to connect to {channel.mention}. Ask an admin to allow Connect.")
    if not perms.speak:
        raise UserError(f"I don't have permission to speak in {channel.mention}. Ask an admin to allow Speak.")
    limit = getattr(channel, "user_limit", 0)
    if limit and len(channel.members) >= limit and me not in channel.members and not perms.move_members:
        raise UserError(f"{channel.mention} is full.")


class VoiceConnection:
    """Owns which channel the bot should be in for one guild, gets it there, and says where the call stands.

    Join with permission checks, move, leave, reconnect when dropped; its ConnectionState is its CallEvents' (driven
    by the events of ObservedVoiceClient (voice_client.py) and the guild's voice states); its `sink` is
    the voice driver's (Opus frames, the speaking flag). A voice server refusing a client without end-to-end
    encryption (close 4017) is reported at once.
    """

    def __init__(self, client: discord.Client, guild_id: int, *, timeout: float = 20.0,
                 on_state: Callable[[ConnectionState, ConnectionState], None] | None = None,
                 voice_client_cls: Callable[..., ObservedVoiceClient] = ObservedVoiceClient,
                 receive_counts: ReceiveCounts | None = None) -> None:
        self.client = client
        self.guild_id = guild_id
        self.timeout = timeout
        self.events = CallEvents(guild_id, on_state)  # where the call stands, from voice events
        self._voice_client_cls = voice_client_cls
        self._lock = asyncio.Lock()
        self.ducking = Ducking()  # the bot's level while members speak (its depth: the guild's setting)
        self.sink = VoiceSink(lambda: self.events.vc, client, timeout, self.ducking)  # the voice driver's side
        self.receive = VoiceReceive(receive_counts or ReceiveCounts(), self._is_bot)  # who speaks in the call
        self.receive.listen(self.ducking.heard)

    # -- state -----------------------------------------------------------------------------------
    @property
    def state(self) -> ConnectionState:
        return self.events.state

    @property
    def channel_id(self) -> int | None:
        """The channel the bot should be in; None after leave() or a drop."""
        return self.events.channel_id

    async def wait_for(self, *states: ConnectionState, timeout: float) -> bool:
        """Wait (at most `timeout` s, woken by events) until the state is one of `states`; False on timeout."""
        return await self.events.watch.wait_for(*states, timeout=timeout)

    def is_connected(self) -> bool:
        return self.events.is_connected()

    @property
    def channel(self) -> discord.abc.GuildChannel | None:
        vc = self.events.vc
        return vc.channel if vc is not None else None

    @property
    def privacy_code(self) -> str | None:
        """The call's voice privacy code (compare it with the one your Discord client shows); None before E2EE."""
        return privacy_code(self.events.vc)

    def members_changed(self) -> None:
        """Someone's voice state changed in this guild: whether listeners expect E2EE may have changed."""
        self.events.settle()

    # -- what the speaker and the commands call ---------------------------------------------------
    async def join(self, channel: VoiceChannel) -> None:
        check_can_join(channel)
        if channel.id == self.channel_id and await self._back_by_itself():
            return
        await self._join(channel)

    async def ensure(self) -> bool:
        """Connected to the wanted channel: waits for discord.py's own reconnect (or move), then rejoins. False
        when the bot is not wanted in a channel, was dropped (a kick is respected), or the rejoin failed."""
        if self.state in LIVE:
            return True
        if self.channel_id is None:
            return False
        if await self._back_by_itself():
            return True
        guild = self.client.get_guild(self.guild_id)
        channel = guild.get_channel(self.channel_id) if guild is not None else None
        if self.state not in (S.RECONNECTING, S.MOVED) or not isinstance(channel, VoiceChannel):
            return False
        log.info("guild %s: discord.py did not reconnect within %.0f s; rejoining channel %s", self.guild_id,
                 RECONNECT_GRACE_S, channel.id)
        try:
            await self._join(channel)
        except UserError as exc:
            log.warning("guild %s: reconnect failed: %s", self.guild_id, exc)
            return False
        return self.state in LIVE

    async def wait_e2ee(self, timeout: float) -> bool:
        """Wait (at most `timeout` s) until frames sent now would be heard (E2EE_READY); False otherwise."""
        self.events.settle()
        if not await self.wait_for(S.E2EE_READY, S.DROPPED, S.DISCONNECTED, timeout=timeout):
            self.events.settle()  # one last look: a DAVE group joined by a binary MLS message alone announces nothing
        return self.state is S.E2EE_READY

    async def wait_privacy_code(self, timeout: float) -> str | None:
        """The privacy code once E2EE is ready (waiting at most `timeout` s); None when nobody else is in the call."""
        vc = self.events.vc
        if vc is not None and e2ee_expected(vc):
            await self.wait_e2ee(timeout)
        return self.privacy_code

    async def leave(self) -> bool:
        async with self._lock:
            self.events.channel_id = None
            self.events.watch.set(S.DISCONNECTED)  # before discord.py's cleanup, so its removal reads as ours
            vc = self.events.vc
            if vc is None:
                return False
            await vc.disconnect(force=True)
            return True

    # -- connecting ------------------------------------------------------------------------------
    async def _back_by_itself(self) -> bool:
        """While discord.py reconnects, follows a move or another join runs, wait (bounded) for it to finish."""
        if self.state in (S.RECONNECTING, S.MOVED, S.CONNECTING):
            await self.wait_for(*LIVE, S.DROPPED, S.DISCONNECTED, timeout=RECONNECT_GRACE_S)
        return self.state in LIVE

    async def _join(self, channel: VoiceChannel) -> None:
        async with self._lock:
            self.events.channel_id = channel.id
            vc = self.events.vc
            if vc is not None and vc.is_connected() and vc.channel.id == channel.id:
                self.events.settle(force=True)
                return
            self.events.watch.set(S.CONNECTING)
            try:
                if vc is not None and vc.is_connected():
                    await vc.move_to(channel, timeout=RECONNECT_GRACE_S)  # on timeout discord.py only logs
                    if not vc.is_connected():
                        # discord.py 2.7's socket reader can sit up to 30 s on the old UDP socket after a recent
                        # IP discovery, so the moved connection's discovery is not read: a new VoiceClient is
                        log.warning("guild %s: the move to %s did not finish in %.0f s; connecting afresh",
                                    self.guild_id, channel.id, RECONNECT_GRACE_S)
                if vc is None or not vc.is_connected():
                    if vc is not None:
                        await vc.disconnect(force=True)
                    await self._connect_once_more(channel)
            except BaseException as exc:
                self.events.channel_id = None
                self.events.watch.set(S.DISCONNECTED)
                if isinstance(exc, asyncio.TimeoutError):
                    raise UserError(f"I could not connect to {channel.mention} in time. Try again.") from None
                if isinstance(exc, discord.ClientException):
                    raise UserError(f"I could not connect to {channel.mention}: {exc}") from None
                raise
            self.events.watch.set(self.events.from_facts())

    async def _connect_once_more(self, channel: VoiceChannel) -> None:
        """_connect, and once more after its handshake timed out: a voice update lost in discord.py's connect flow
        (the race voice_client.py closes was one; the load bench's setup still lost about 1 join in 500 with 50
        guilds joining at once) leaves it waiting for the timeout, and a fresh attempt gets new ones."""
        try:
            await self._connect(channel)
        except asyncio.TimeoutError:
            log.warning("guild %s: the voice handshake with %s timed out; trying once more", self.guild_id, channel.id)
            if self.events.vc is not None:
                await self.events.vc.disconnect(force=True)
            await self._connect(channel)

    async def _connect(self, channel: VoiceChannel) -> None:
        """channel.connect with our VoiceClient, except that a 4017 close (no DAVE offered) ends it at once:
        discord.py would retry for the whole timeout, and no retry can succeed."""
        self.events.refused = refused = asyncio.get_running_loop().create_future()
        # not shown deafened: Discord sends a self-deafened member every member's audio all the same, and the bot
        # listens to who speaks (README, Privacy); the icon would tell members otherwise
        task = asyncio.ensure_future(channel.connect(timeout=self.timeout, self_deaf=False, reconnect=True,
                                                     cls=self._new_voice_client))
        try:
            await asyncio.wait({task, refused}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            self.events.refused = None
        if task.done():
            task.result()
            return
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        if self.events.vc is not None:
            await self.events.vc.disconnect(force=True)
        log.error("guild %s: voice server closed with 4017: this client does not offer DAVE (is davey installed?)",
                  self.guild_id)
        raise UserError(NO_DAVE.format(channel=channel.mention))

    def _new_voice_client(self, client: discord.Client, channel: discord.abc.Connectable) -> ObservedVoiceClient:
        self.receive.clear()  # a new voice session: its members' SSRCs are announced again
        self.events.vc = self._voice_client_cls(client, channel, listener=self.events.on_voice_event,
                                                receive=self.receive)
        return self.events.vc

    def record(self, user_id: int, max_s: float, decoder: Callable[[], Any] | None = None) -> MemberAudio:
        """Start keeping `user_id`'s voice (they consented): their packets alone are opened and decoded, up to
        `max_s` seconds, until `stop_recording`."""
        audio = MemberAudio(user_id, lambda: self.events.vc.call_keys() if self.events.vc is not None else None,
                            self.receive.counts, max_s=max_s, **({"decoder": decoder} if decoder else {}))
        self.receive.take(user_id, audio.packet)
        return audio

    def stop_recording(self, user_id: int) -> None:
        self.receive.release(user_id)

    def _is_bot(self, user_id: int) -> bool:
        """This bot or another: their audio never ducks the bot."""
        guild = self.client.get_guild(self.guild_id)
        member = guild.get_member(user_id) if guild is not None else None
        user = member or self.client.get_user(user_id)
        return user_id == getattr(self.client.user, "id", None) or bool(user is not None and user.bot)
