"""A consenting member's packets opened (real PyNaCl AEAD, real Opus) and what cannot be opened or decoded dropped
and counted, never raised; a recording stops at its length."""

from __future__ import annotations

import math
import struct

import discord
import nacl.secret

from bot.speech.connection.member_audio import LOST_KEY_FRAMES, CallKeys, MemberAudio
from bot.speech.connection.voice_receive import ReceiveCounts

KEY = bytes(range(32))
KEYS = CallKeys("aead_xchacha20_poly1305_rtpsize", KEY, None)
TONE = struct.pack("<1920h", *(int(9000 * math.sin(i // 2 * 0.05)) for i in range(1920)))


def packet(frame: bytes, n: int = 1, key: bytes = KEY) -> bytes:
    """As the voice server relays it: RTP header with a one-word extension, AEAD with a 32-bit nonce counter."""
    header = struct.pack(">BBHII", 0x90, 0x78, n, 960 * n, 1001) + b"\xbe\xde\x00\x01"
    counter = struct.pack(">I", n)
    return header + nacl.secret.Aead(key).encrypt(bytes(4) + frame, header, counter + bytes(20)).ciphertext + counter


class Dave:
    """Stands for the bot's davey session: opens frames wrapped by `seal`, fails on others."""

    def decrypt(self, user_id: int, _media: object, frame: bytes) -> bytes:
        if not frame.startswith(b"E2EE") or user_id != 7:
            raise ValueError("no decryptor for this sender")
        return frame[4:]


def test_the_members_frames_are_opened_and_decoded():
    counts = ReceiveCounts()
    audio = MemberAudio(7, lambda: KEYS, counts)
    opus = discord.opus.Encoder().encode(TONE, 960)
    for n in range(3):
        audio.packet(packet(opus, n), 0.0)
    assert audio.frames == 3 and len(audio.pcm) == 3 * 3840 and counts.drops() == {}


def test_what_cannot_be_opened_or_decoded_is_dropped_and_counted():
    counts = ReceiveCounts()
    opus = discord.opus.Encoder().encode(TONE, 960)
    audio = MemberAudio(7, lambda: KEYS, counts)
    audio.packet(packet(opus, key=bytes(32)), 0.0)                      # another key
    audio.packet(packet(opus)[:14], 0.0)                                # cut short
    MemberAudio(7, lambda: None, counts).packet(packet(opus), 0.0)     # before the session description
    MemberAudio(7, lambda: CallKeys("xsalsa20_poly1305", KEY, None), counts).packet(packet(opus), 0.0)
    e2ee = MemberAudio(7, lambda: CallKeys(KEYS.mode, KEY, Dave()), counts)
    e2ee.packet(packet(opus), 0.0)                                     # not end-to-end encrypted for this key
    e2ee.packet(packet(b"E2EE" + opus), 0.0)
    audio.packet(packet(b"\xff" * 3), 0.0)                              # not Opus
    assert audio.frames == 0 and e2ee.frames == 1
    assert counts.drops() == {"transport_failed": 3, "no_keys": 1, "dave_failed": 1, "decode_failed": 1}


def test_a_recording_stops_at_its_length():
    audio = MemberAudio(7, lambda: KEYS, ReceiveCounts(), max_s=0.1)
    opus = discord.opus.Encoder().encode(TONE, 960)
    for n in range(8):
        audio.packet(packet(opus, n), 0.0)
    assert audio.frames == 5 and audio.full


def test_the_recorder_is_shown_speech_and_silence():
    audio = MemberAudio(7, lambda: KEYS, ReceiveCounts())
    encoder = discord.opus.Encoder()
    for n, pcm in enumerate([bytes(3840)] * 5 + [TONE] * 4):
        audio.packet(packet(encoder.encode(pcm, 960), n), 0.0)
    assert audio.frames == 9 and audio.speech_frames == 4


def test_a_key_the_bot_cannot_follow_is_noticed_and_one_it_can_forgets_the_failures():
    audio = MemberAudio(7, lambda: CallKeys(KEYS.mode, KEY, Dave()), ReceiveCounts())
    opus = discord.opus.Encoder().encode(TONE, 960)
    for n in range(LOST_KEY_FRAMES - 1):
        audio.packet(packet(opus, n), 0.0)                             # a frame under a key the bot has not
    audio.packet(packet(b"E2EE" + opus), 0.0)
    assert not audio.key_lost and audio.frames == 1
    for n in range(LOST_KEY_FRAMES):
        audio.packet(packet(opus, n), 0.0)
    assert audio.key_lost
