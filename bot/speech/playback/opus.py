"""The voice driver's Opus encoder: discord.py's, at a chosen complexity (the encoder's effort per frame)."""

from __future__ import annotations

import discord

from bot.speech.connection.discord_internals import set_encoder_complexity

SAMPLES_PER_FRAME = 960  # 20 ms at 48 kHz


def voice_encoder(options: dict, complexity: int):
    """A function PCM frame (48 kHz stereo s16, 20 ms) -> Opus packet, with its own encoder state (one per track)."""
    encoder = discord.opus.Encoder(**options)
    set_encoder_complexity(encoder, complexity)  # discord.py has no setter for it
    return lambda pcm: encoder.encode(pcm, SAMPLES_PER_FRAME)
