"""The voice driver's Opus encoder: discord.py's, set to encode mono (the engine's speech is mono) at a chosen effort."""

from __future__ import annotations

import discord

SAMPLES_PER_FRAME = 960  # 20 ms at 48 kHz
_SET_COMPLEXITY = 4010  # libopus OPUS_SET_COMPLEXITY_REQUEST
_SET_FORCE_CHANNELS = 4022  # libopus OPUS_SET_FORCE_CHANNELS_REQUEST


def voice_encoder(options: dict, complexity: int):
    """A function PCM frame (48 kHz stereo s16, 20 ms) -> Opus packet, with its own encoder state (one per track)."""
    encoder = discord.opus.Encoder(**options)
    ctl = discord.opus._lib.opus_encoder_ctl  # discord.py loads libopus; it exposes no setter for these two
    ctl(encoder._state, _SET_COMPLEXITY, complexity)
    ctl(encoder._state, _SET_FORCE_CHANNELS, 1)  # both channels carry the same speech: code it once
    return lambda pcm: encoder.encode(pcm, SAMPLES_PER_FRAME)
