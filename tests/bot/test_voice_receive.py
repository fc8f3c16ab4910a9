"""The receive path: SSRC -> member from the voice gateway's ops, packets' arrival read from RTP headers only, and
everything it cannot use dropped and counted."""

from __future__ import annotations

import struct

from bot.speech.connection.voice_receive import ReceiveCounts, VoiceReceive

ALICE, OTHER_BOT, ME = 11, 22, 99


def rtp(ssrc: int, payload_type: int = 0x78, body: bytes = b"\x01" * 40) -> bytes:
    return struct.pack(">BBHII", 0x90, payload_type, 1, 960, ssrc) + body


def receive() -> tuple[VoiceReceive, list[tuple[int, float]]]:
    heard: list[tuple[int, float]] = []
    r = VoiceReceive(ReceiveCounts(), is_bot=lambda uid: uid in (OTHER_BOT, ME))
    r.listen(lambda uid, at: heard.append((uid, at)))
    return r, heard


def test_speaking_maps_an_ssrc_to_its_member_and_their_packets_are_heard():
    r, heard = receive()
    r.ws_message({"op": 5, "d": {"user_id": str(ALICE), "ssrc": 1001, "speaking": 1}})
    r.datagram(rtp(1001))
    r.datagram(rtp(1001, payload_type=0x78 | 0x80))  # the marker bit set: still audio
    assert [uid for uid, _ in heard] == [ALICE, ALICE]
    assert r.counts.packets == 2 and not r.counts.dropped


def test_a_member_who_leaves_is_unmapped_and_a_new_ssrc_replaces_the_old():
    r, heard = receive()
    r.ws_message({"op": 11, "d": {"user_ids": [str(ALICE)]}})
    assert r.present == {ALICE}
    r.ws_message({"op": 5, "d": {"user_id": str(ALICE), "ssrc": 1001, "speaking": 1}})
    r.ws_message({"op": 5, "d": {"user_id": str(ALICE), "ssrc": 1002, "speaking": 1}})
    assert r.member_of(1001) is None and r.member_of(1002) == ALICE
    r.ws_message({"op": 13, "d": {"user_id": str(ALICE)}})
    r.datagram(rtp(1002))
    assert heard == [] and r.counts.dropped == {"unknown_ssrc": 1} and r.present == set()


def test_the_older_client_connect_names_the_ssrc():
    r, heard = receive()
    r.ws_message({"op": 12, "d": {"user_id": str(ALICE), "audio_ssrc": 1003, "video_ssrc": 0}})
    r.datagram(rtp(1003))
    assert [uid for uid, _ in heard] == [ALICE]


def test_bots_are_never_listened_to():
    r, heard = receive()
    r.ws_message({"op": 5, "d": {"user_id": str(OTHER_BOT), "ssrc": 2001, "speaking": 1}})
    r.datagram(rtp(2001))
    assert heard == [] and r.counts.packets == 0 and not r.counts.dropped


def test_what_is_not_member_audio_is_dropped_and_counted_never_raised():
    r, heard = receive()
    r.ws_message({"op": 5, "d": {"user_id": str(ALICE), "ssrc": 1001, "speaking": 1}})
    r.datagram(b"")
    r.datagram(b"\x80\x78\x00")                          # shorter than a header
    r.datagram(b"\x40" + rtp(1001)[1:])                  # RTP version 1
    r.datagram(struct.pack(">BBHI", 0x81, 201, 7, 1001) + bytes(24))   # RTCP receiver report
    r.datagram(rtp(4242))                                # an SSRC no SPEAKING named
    r.datagram(struct.pack(">HHI", 2, 70, 1) + bytes(66))  # discord.py's own IP discovery reply: not counted
    for bad in ({"op": 5, "d": None}, {"op": 5, "d": {"ssrc": "x", "user_id": "1"}}, {"op": 13, "d": []},
                {"op": 11, "d": {"user_ids": None}}):
        r.ws_message(bad)
    assert heard == [] and r.counts.packets == 0
    assert r.counts.dropped == {"malformed": 3, "rtcp": 1, "unknown_ssrc": 1, "bad_op": 4}


def test_a_failing_listener_is_counted_and_the_others_still_hear():
    r, heard = receive()

    def broken(uid: int, at: float) -> None:
        raise RuntimeError("boom")

    r.listen(broken)
    r.ws_message({"op": 5, "d": {"user_id": str(ALICE), "ssrc": 1001, "speaking": 1}})
    r.datagram(rtp(1001))
    assert len(heard) == 1 and r.counts.dropped == {"failed": 1}


def test_counts_are_shared_by_the_guilds():
    counts = ReceiveCounts()
    a, b = VoiceReceive(counts, is_bot=lambda _: False), VoiceReceive(counts, is_bot=lambda _: False)
    for r in (a, b):
        r.ws_message({"op": 5, "d": {"user_id": str(ALICE), "ssrc": 1001, "speaking": 1}})
        r.datagram(rtp(1001))
    a.datagram(rtp(5))
    assert counts.packets == 2 and counts.drops() == {"unknown_ssrc": 1}


def test_only_the_taken_members_whole_packets_are_handed_over_until_released():
    r, _ = receive()
    taken: list[bytes] = []
    for uid, ssrc in ((ALICE, 1001), (33, 1002)):
        r.ws_message({"op": 5, "d": {"user_id": str(uid), "ssrc": ssrc, "speaking": 1}})
    r.take(ALICE, lambda data, at: taken.append(data))
    r.datagram(rtp(1001))
    r.datagram(rtp(1002))
    r.release(ALICE)
    r.datagram(rtp(1001))
    assert taken == [rtp(1001)] and r.counts.packets == 3
