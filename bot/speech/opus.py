"""The voice driver's Opus encoder: discord.py's, at a chosen complexity (the encoder's effort per frame)."""

from __future__ import annotations

import discord

SAMPLES_PER_FRAME = 960  # 20 ms at 48 kHz
_SET_COMPLEXITY = 4010  # libopus OPUS_SET_COMPLEXITY_REQUEST


def voice_encoder(options: dict, complexity: int):
    """A function PCM frame (48 kHz stereo s16, 20 ms) -> Opus packet, with its own encoder state (one per track)."""
    encoder = discord.opus.Encoder(**options)
    # discord.py loads libopus and sets bitrate, band and signal type; it has no setter for the complexity
    discord.opus._lib.opus_encoder_ctl(encoder._state, _SET_COMPLEXITY, complexity)
    return lambda pcm: encoder.encode(pcm, SAMPLES_PER_FRAME)
