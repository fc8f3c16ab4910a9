"""GuildCall: all of one guild's speech, owned by SpeechService: its voice connection, its speaker (queue, player,
look-ahead; made on the first say) and the track whose turn it is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.speech.connection.voice_connection import VoiceConnection
from bot.speech.playback.track_handle import TrackHandle

if TYPE_CHECKING:
    from bot.speech.queue.speaker import GuildSpeaker


@dataclass(eq=False)
class GuildCall:
    connection: VoiceConnection
    track: TrackHandle | None = None  # set by the guild's Player from an utterance's turn to its end
    speaker: GuildSpeaker | None = None  # the guild's queue played in turn, made on its first say

    def stop_track(self) -> bool:
        """Stop the track whose turn it is; False when there is none."""
        if self.track is None:
            return False
        self.track.stop()
        return True
