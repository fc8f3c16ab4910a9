"""VoiceSink: the voice driver's side of a guild's call (its thread): whether a frame sent now is heard, the frame
sent, the speaking flag; read from discord.py's VoiceClient as it is at each tick."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import discord

from bot.speech.connection.e2ee import may_speak
from bot.speech.connection.voice_client import ObservedVoiceClient
from bot.speech.playback.ducking import Ducking


class VoiceSink:
    """Where the voice driver sends a guild's frames (playback/driver.py's Sink); its VoiceConnection owns it."""

    def __init__(self, voice_client: Callable[[], ObservedVoiceClient | None], client: discord.Client,
                 timeout: float, ducking: Ducking | None = None) -> None:
        self._vc = voice_client  # the connection's VoiceClient now (None while it has none)
        self._client = client
        self.timeout = timeout  # how long a (re)connect may take
        self.ducking = ducking  # the call's level while members speak

    def is_connected(self) -> bool:
        vc = self._vc()
        return vc is not None and vc.is_connected()

    def ready_to_send(self) -> bool:
        """Connected, and every frame sent now would be heard. Read from discord.py's facts at each tick, not from
        the connection's state: the driver must not send the frame after a change that no event announced (an
        invalid commit)."""
        vc = self._vc()
        return vc is not None and vc.is_connected() and may_speak(vc)

    def send_opus(self, packet: bytes) -> None:
        """One Opus frame: DAVE (davey), transport encryption (PyNaCl) and RTP by discord.py's VoiceClient."""
        vc = self._vc()
        if vc is not None:
            vc.send_audio_packet(packet, encode=False)

    def set_speaking(self, speaking: bool) -> None:
        """The speaking flag Discord shows (sent from the event loop)."""
        vc = self._vc()
        if vc is None or vc.ws is None:
            return
        state = discord.SpeakingState.voice if speaking else discord.SpeakingState.none
        asyncio.run_coroutine_threadsafe(vc.ws.speak(state), self._client.loop)
