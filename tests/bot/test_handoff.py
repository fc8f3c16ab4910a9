"""FrameHandoff: bounded, FIFO, the reader's wake-up when it frees a full buffer, give-way at a boundary, close."""

from __future__ import annotations

from bot.speech.playback.handoff import FrameHandoff


def test_bounded_fifo_wakes_the_producer_when_a_full_buffer_frees_a_place():
    freed: list[int] = []
    h = FrameHandoff(3, lambda: freed.append(h.buffered))
    assert all(h.put(bytes([i])) for i in range(3)) and not h.put(b"x") and h.written == 3
    assert h.upcoming(1, 5) == [b"\x01", b"\x02"]
    assert h.take() == b"\x00" and freed == [2]  # taken from a full buffer: the producer may go on
    assert h.take() == b"\x01" and freed == [2]
    assert h.take() == b"\x02" and h.take() is None  # nothing yet: the reader plays silence
    h.finish()
    assert h.take() == b"" and h.taken == 3


def test_gives_way_only_at_a_boundary_after_a_frame_was_taken_then_resumes():
    h = FrameHandoff(10, lambda: None)
    h.put(b"a")
    h.mark_boundary()
    h.put(b"b")
    h.give_way()
    assert h.frames_to_boundary() == 1
    assert h.take() == b"a" and h.take() == b"" and h.yielded and h.buffered == 1
    h.resume()
    assert h.take() == b"b" and not h.yielded


def test_close_drops_everything_once():
    h = FrameHandoff(10, lambda: None)
    h.put(b"a")
    assert h.close() and not h.close()
    assert h.buffered == 0 and h.take() == b"" and not h.put(b"b")
