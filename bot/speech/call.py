"""GuildCall: one guild's call, owned by SpeechService: its voice connection and the track whose turn it is."""

from __future__ import annotations

from dataclasses import dataclass

from bot.speech.connection import VoiceConnection
from bot.speech.track_handle import TrackHandle


@dataclass(eq=False)
class GuildCall:
    connection: VoiceConnection
    track: TrackHandle | None = None  # set by the guild's Player from an utterance's turn to its end

    def stop_track(self) -> bool:
        """Stop the track whose turn it is; False when there is none."""
        if self.track is None:
            return False
        self.track.stop()
        return True
