"""Every discord.py internal the bot and its benches read, in one place; tests/bot/test_discord_internals.py pins it."""

from __future__ import annotations

from typing import Any

import discord
from discord.voice_state import VoiceConnectionState

_SET_COMPLEXITY = 4010  # libopus OPUS_SET_COMPLEXITY_REQUEST


def set_encoder_complexity(encoder: discord.opus.Encoder, complexity: int) -> None:
    """Set a discord.py Opus encoder's complexity (0-10): discord.py sets bitrate, band and signal type but has no
    setter for it, so libopus is asked through discord.py's loaded library and the encoder's state."""
    discord.opus._lib.opus_encoder_ctl(encoder._state, _SET_COMPLEXITY, complexity)


def voice_ws_close_code(state: VoiceConnectionState) -> int | None:
    """The close code of a connection state's voice websocket (aiohttp's), once the voice server or discord.py
    closed it; None while open or before there is one."""
    return getattr(getattr(state.ws, "ws", None), "close_code", None)


def connection_state(vc: discord.VoiceClient) -> VoiceConnectionState:
    """A VoiceClient's connection state (the object its `create_connection_state` made)."""
    return vc._connection


def voice_packet(vc: discord.VoiceClient, opus: bytes) -> Any:
    """An Opus frame as `send_audio_packet` sends it: DAVE-encrypted when the session can, RTP header, transport
    encryption (the benches time this part alone)."""
    return vc._get_voice_packet(opus)
