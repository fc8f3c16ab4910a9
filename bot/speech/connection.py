"""A guild's voice connection (the call): join with permission checks, move, leave, reconnect when dropped, and
the only code that sends on discord.py's VoiceClient (Opus frames, the speaking flag) for the voice driver.
A voice server refusing a client without end-to-end encryption (close 4017) is reported at once."""

from __future__ import annotations

import asyncio
import logging

import discord

from bot.errors import UserError
from bot.speech.e2ee import DAVE_REQUIRED_CLOSE, closed_with, may_speak, privacy_code

log = logging.getLogger(__name__)
NO_DAVE = ("Discord requires end-to-end encrypted voice (DAVE) in {channel}, and this bot's voice library did not "
           "offer it. The bot's host needs `davey` (installed by `pip install \"discord.py[voice]\"`).")


def check_can_join(channel: discord.VoiceChannel | discord.StageChannel) -> None:
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
    """Owns which channel the bot should be in for one guild and gets it there."""

    def __init__(self, client: discord.Client, guild_id: int, *, timeout: float = 20.0) -> None:
        self.client = client
        self.guild_id = guild_id
        self.timeout = timeout
        self.channel_id: int | None = None  # where we want to be; None after leave()
        self._lock = asyncio.Lock()

    @property
    def guild(self) -> discord.Guild | None:
        return self.client.get_guild(self.guild_id)

    @property
    def voice_client(self) -> discord.VoiceClient | None:
        guild = self.guild
        vc = guild.voice_client if guild else None
        return vc if isinstance(vc, discord.VoiceClient) else None

    def is_connected(self) -> bool:
        vc = self.voice_client
        return vc is not None and vc.is_connected()

    # -- the voice driver's side (its thread) ----------------------------------------------------
    def ready_to_send(self) -> bool:
        """Connected, and every frame sent now would be heard (the call's E2EE is ready, or nobody needs it)."""
        vc = self.voice_client
        return vc is not None and vc.is_connected() and may_speak(vc)

    def send_opus(self, packet: bytes) -> None:
        """One Opus frame: DAVE (davey), transport encryption (PyNaCl) and RTP by discord.py's VoiceClient."""
        vc = self.voice_client
        if vc is not None:
            vc.send_audio_packet(packet, encode=False)

    def set_speaking(self, speaking: bool) -> None:
        """The speaking flag Discord shows (sent from the event loop)."""
        vc = self.voice_client
        if vc is None or vc.ws is None:
            return
        state = discord.SpeakingState.voice if speaking else discord.SpeakingState.none
        asyncio.run_coroutine_threadsafe(vc.ws.speak(state), self.client.loop)

    @property
    def privacy_code(self) -> str | None:
        """The call's voice privacy code (compare it with the one your Discord client shows); None before E2EE."""
        return privacy_code(self.voice_client)

    @property
    def channel(self) -> discord.abc.GuildChannel | None:
        vc = self.voice_client
        return vc.channel if vc is not None else None

    async def join(self, channel: discord.VoiceChannel | discord.StageChannel) -> discord.VoiceClient:
        check_can_join(channel)
        async with self._lock:
            self.channel_id = channel.id
            vc = self.voice_client
            if vc is not None and vc.is_connected():
                if vc.channel.id != channel.id:
                    await vc.move_to(channel, timeout=self.timeout)
                return vc
            if vc is not None:
                await vc.disconnect(force=True)
            try:
                return await self._connect(channel)
            except asyncio.TimeoutError:
                raise UserError(f"I could not connect to {channel.mention} in time. Try again.") from None
            except discord.ClientException as exc:
                raise UserError(f"I could not connect to {channel.mention}: {exc}") from None

    async def _connect(self, channel: discord.VoiceChannel | discord.StageChannel) -> discord.VoiceClient:
        """channel.connect, except that a 4017 close (no DAVE offered) ends it at once: discord.py would retry
        for the whole timeout, and no retry can succeed."""
        task = asyncio.ensure_future(channel.connect(timeout=self.timeout, self_deaf=True, reconnect=True))
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=0.05)
                if done:
                    return task.result()
                if closed_with(self.voice_client) == DAVE_REQUIRED_CLOSE:
                    break
        except asyncio.CancelledError:
            task.cancel()
            raise
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        vc = self.voice_client
        if vc is not None:
            await vc.disconnect(force=True)
        log.error("guild %s: voice server closed with 4017: this client does not offer DAVE (is davey installed?)",
                  self.guild_id)
        raise UserError(NO_DAVE.format(channel=channel.mention))

    async def ensure(self) -> discord.VoiceClient | None:
        """The connected voice client, reconnecting to the wanted channel if the connection dropped."""
        vc = self.voice_client
        if vc is not None and vc.is_connected():
            return vc
        if self.channel_id is None or self.guild is None:
            return None
        channel = self.guild.get_channel(self.channel_id)
        if not isinstance(channel, (discord.VoiceChannel, discord.StageChannel)):
            return None
        if vc is None:
            return None  # discord.py removes its VoiceClient only on a real disconnect (a kick): no rejoin
        deadline = asyncio.get_running_loop().time() + 5.0  # discord.py may still be reconnecting by itself
        while asyncio.get_running_loop().time() < deadline and self.voice_client is vc:
            if vc.is_connected():
                return vc
            await asyncio.sleep(0.1)
        if self.voice_client is None or self.channel_id is None:
            return None  # it gave up, or we were disconnected meanwhile
        try:
            log.info("guild %s: reconnecting to voice channel %s", self.guild_id, channel.id)
            return await self.join(channel)
        except UserError as exc:
            log.warning("guild %s: reconnect failed: %s", self.guild_id, exc)
            return None

    def followed_move(self, channel_id: int) -> None:
        """Discord (or an admin) moved the bot: the wanted channel is where it now is."""
        self.channel_id = channel_id

    def dropped(self) -> None:
        """The bot was disconnected for good (kicked, channel deleted): want no channel until asked again."""
        self.channel_id = None

    async def leave(self) -> bool:
        async with self._lock:
            self.channel_id = None
            vc = self.voice_client
            if vc is None:
                return False
            await vc.disconnect(force=True)
            return True
