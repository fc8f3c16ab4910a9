"""TrackHandle: one stop for the utterance whose turn it is: the driver's track while it plays, else its source."""

from __future__ import annotations

import asyncio

from bot.speech.playback.driver import End
from bot.speech.playback.source import StreamingSource
from bot.speech.playback.track_handle import TrackHandle


class FakeTrack:
    def __init__(self) -> None:
        self.end: End | None = None
        self.stopped = False
        self.done: asyncio.Future[End] = asyncio.get_running_loop().create_future()

    def stop(self) -> None:
        self.stopped = True


async def test_stop_before_it_plays_closes_the_source():
    handle = TrackHandle(StreamingSource())
    handle.stop()
    assert handle.source.closed


async def test_stop_while_it_plays_stops_the_track_only_and_after_its_end_closes_the_rest():
    handle = TrackHandle(StreamingSource())
    track = FakeTrack()
    playing = asyncio.create_task(handle.play(track))
    await asyncio.sleep(0)
    handle.stop()
    assert track.stopped and not handle.source.closed  # the driver ends it and frees the buffer
    track.end = End.GAVE_WAY
    track.done.set_result(End.GAVE_WAY)
    assert await playing is End.GAVE_WAY and handle.track is None
    handle.stop()  # its rest, still buffered after giving way
    assert handle.source.closed


async def test_give_way_reaches_the_source():
    handle = TrackHandle(StreamingSource())
    handle.give_way()
    assert handle.source.giving_way
