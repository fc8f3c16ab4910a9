"""TrackHandle: the one control of an utterance from its turn to its end: stop it, let it give way, await its end."""

from __future__ import annotations

from bot.speech.playback.driver import End, Track
from bot.speech.playback.source import StreamingSource


class TrackHandle:
    """Controls the utterance whose turn it is; the voice driver's Track once it plays (driver.py)."""

    def __init__(self, source: StreamingSource) -> None:
        self.source = source
        self.track: Track | None = None  # while the driver plays it

    def stop(self) -> None:
        """End it: a playing track at the driver's next tick (with the end-of-speech silence; the driver frees its
        buffer); one not playing yet at once (its synthesis cancelled, whoever waits on it woken)."""
        if self.track is not None and self.track.end is None:
            self.track.stop()
        else:  # not playing yet, or its track just ended (having given way: its rest is still buffered)
            self.source.close()

    def give_way(self) -> None:
        """Pause at the next segment boundary for asked-for speech (at once when nothing of it was heard)."""
        self.source.give_way()

    async def play(self, track: Track) -> End:
        """Wait for `track` (the driver playing this source) to end."""
        self.track = track
        try:
            return await track.done
        finally:
            self.track = None
