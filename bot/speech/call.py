"""GuildCall: all of one guild's speech, owned by SpeechService: its voice connection and its speaker (queue,
player, look-ahead; made on the first say), as Songbird's Call owns its Driver."""

from __future__ import annotations

from dataclasses import dataclass

from bot.speech.connection.voice_connection import VoiceConnection
from bot.speech.queue.speaker import GuildSpeaker


@dataclass(eq=False)
class GuildCall:
    connection: VoiceConnection
    speaker: GuildSpeaker | None = None  # the guild's queue played in turn, made on its first say
