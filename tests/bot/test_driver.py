"""The voice driver's Track: Opus encoded ahead sent in order, frame for frame; a give-way drops what's ahead; stats."""

from __future__ import annotations

import asyncio

from bot.speech.playback.driver import End, Track
from bot.speech.playback.play_stats import PlayStats
from bot.speech.playback.source import StreamingSource
from engine.base import FRAME_BYTES, AudioChunk
from tests.sinks import FakeSink as Sink


async def segments(*lengths: int):
    value = 0
    for seg, n in enumerate(lengths):
        for _ in range(n):
            value += 1
            yield AudioChunk(bytes([value]) * FRAME_BYTES, 48_000, 2, segment=seg)


def encoder(log: list[int]):
    def encode(pcm: bytes) -> bytes:  # stands for Opus: the frame's value, and each call in order
        log.append(pcm[0])
        return b"opus" + pcm[:1]
    return encode


def play(track: Track, ahead: int) -> End:
    while True:
        end = track.step(0.0)
        if end is not None:
            return end
        track.encode_ahead(ahead)


async def test_frames_encoded_ahead_are_sent_in_order_and_each_encoded_once():
    src = StreamingSource(max_frames=100)
    src.start(segments(30))
    await asyncio.wait_for(src.producer, 5)
    sink, encoded = Sink(), []
    track = Track(src, sink, encoder(encoded), 1.0, asyncio.get_running_loop())
    assert play(track, 7) is End.FINISHED
    assert sink.sent == [b"opus" + bytes([v]) for v in range(1, 31)]
    assert encoded == list(range(1, 31)) and src.frames_read == 30 and src.buffered_frames == 0
    assert track.stats.buffered_at_start == 30 and [n for _, n in track.stats.spans] == [30]


async def test_giving_way_drops_what_was_encoded_ahead_and_the_rest_plays_from_the_boundary():
    src = StreamingSource(max_frames=100)
    src.start(segments(5, 5))
    await asyncio.wait_for(src.producer, 5)
    src.give_way()
    sink, encoded = Sink(), []
    stats = PlayStats()
    track = Track(src, sink, encoder(encoded), 1.0, asyncio.get_running_loop(), stats)
    track.step(0.0)  # the first frame is heard: it goes on to the boundary
    assert play(track, 8) is End.GAVE_WAY and src.yielded
    assert sink.sent == [b"opus" + bytes([v]) for v in range(1, 6)] and src.buffered_frames == 5
    src.resume()
    rest = Sink()
    assert play(Track(src, rest, encoder([]), 1.0, asyncio.get_running_loop(), stats), 8) is End.FINISHED
    assert rest.sent == [b"opus" + bytes([v]) for v in range(6, 11)]
    assert [n for _, n in stats.spans] == [5, 5]  # the utterance's stats, across both tracks


async def test_underrun_silence_is_sent_but_not_counted_as_played():
    rest = asyncio.Event()

    async def slow():
        yield AudioChunk(b"\x01" * FRAME_BYTES, 48_000, 2)
        await rest.wait()  # the rest is still being made: the buffer runs dry

    src = StreamingSource(max_frames=100)
    src.start(slow())
    await asyncio.wait_for(src.first_frame_ready.wait(), 5)
    sink = Sink()
    track = Track(src, sink, encoder([]), 1.0, asyncio.get_running_loop())
    assert track.step(0.0) is None and track.step(0.0) is None
    assert len(sink.sent) == 2 and src.underruns == 1 and [n for _, n in track.stats.spans] == [1]
    rest.set()
    await asyncio.wait_for(src.producer, 5)
    assert track.step(0.0) is End.FINISHED


async def test_a_ducking_call_shapes_each_frame_before_encoding_and_encodes_little_ahead():
    from bot.speech.playback.ducking import AHEAD, Ducking
    src = StreamingSource(max_frames=100)
    src.start(segments(30))
    await asyncio.wait_for(src.producer, 5)
    sink, encoded = Sink(), []
    sink.ducking = Ducking(depth_db=20)
    track = Track(src, sink, encoder(encoded), 1.0, asyncio.get_running_loop())
    track.step(0.0)
    track.encode_ahead(25)
    assert len(encoded) == 1 + AHEAD                    # its level may change within AHEAD frames
    sink.ducking.heard(7, float("inf"))                 # a member speaking from now on
    assert play(track, 25) is End.FINISHED
    assert len(sink.sent) == 30 and encoded[:1 + AHEAD] == [1, 2, 3]
    assert encoded[-1] == round(30 * 0.1)               # the last frames were sent 20 dB down
