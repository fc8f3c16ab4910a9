"""The discord.py internals the bot reads (bot/speech/connection/discord_internals.py): each test fails when an
upgrade of discord.py (the lock pins 2.7.1) moves or renames what the adapter reads."""

from __future__ import annotations

import asyncio
import math
import struct
from types import SimpleNamespace

import aiohttp
import discord
import pytest
from discord.gateway import DiscordVoiceWebSocket
from discord.voice_state import VoiceConnectionState

from bot.speech.connection.discord_internals import (
    connection_state,
    set_encoder_complexity,
    voice_packet,
    voice_ws_close_code,
)

NOISE = struct.pack("<1920h", *(int(12_000 * math.sin(i * i * 0.37)) for i in range(1920)))  # 20 ms stereo


def voice_client(cls: type[discord.VoiceClient] = discord.VoiceClient) -> discord.VoiceClient:
    client = discord.Client(intents=discord.Intents.none())
    channel = SimpleNamespace(id=10, guild=SimpleNamespace(id=1), _get_voice_client_key=lambda: (1, "guild_id"))
    return cls(client, channel)


def stop(vc: discord.VoiceClient) -> None:
    connection_state(vc)._socket_reader.stop()  # the reader thread every VoiceConnectionState starts


def test_encoder_complexity_reaches_libopus() -> None:
    def packet(complexity: int) -> bytes:
        encoder = discord.opus.Encoder(application="audio", bitrate=64, fec=False)
        set_encoder_complexity(encoder, complexity)
        return encoder.encode(NOISE, 960)

    assert packet(0) != packet(10)  # the encoder's effort changed what it made
    with pytest.raises(discord.opus.OpusError):  # libopus itself checked the value: the call reached it
        set_encoder_complexity(discord.opus.Encoder(), 11)


def test_connection_state_is_the_one_the_client_created() -> None:
    made: list[VoiceConnectionState] = []

    class Recording(discord.VoiceClient):
        def create_connection_state(self) -> VoiceConnectionState:
            made.append(super().create_connection_state())
            return made[-1]

    vc = voice_client(Recording)
    try:
        assert connection_state(vc) is made[0] and isinstance(made[0], VoiceConnectionState)
    finally:
        stop(vc)


async def test_voice_ws_close_code_is_the_websockets() -> None:
    vc = voice_client()
    state = connection_state(vc)
    try:
        assert voice_ws_close_code(state) is None  # no voice websocket yet
        socket = SimpleNamespace(close_code=None)
        state.ws = DiscordVoiceWebSocket(socket, asyncio.get_running_loop())  # type: ignore[arg-type]
        assert voice_ws_close_code(state) is None  # open
        socket.close_code = 4017
        assert voice_ws_close_code(state) == 4017
    finally:
        stop(vc)
    assert isinstance(aiohttp.ClientWebSocketResponse.close_code, property)


def test_voice_packet_is_an_encrypted_rtp_packet() -> None:
    vc = voice_client()
    state = connection_state(vc)
    try:
        state.mode, state.secret_key, state.ssrc = "aead_xchacha20_poly1305_rtpsize", [7] * 32, 0x1234
        vc.sequence, vc.timestamp = 5, 960
        packet = voice_packet(vc, b"opus frame")
    finally:
        stop(vc)
    assert packet[:12] == bytes([0x80, 0x78]) + struct.pack(">HII", 5, 960, 0x1234)
    assert b"opus frame" not in packet and len(packet) > 12 + len(b"opus frame")
