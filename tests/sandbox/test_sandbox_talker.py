"""A sandbox member speaks into the bot's call: the bot's real discord.py client receives SPEAKING, who is in the
call, and RTP packets it can transport-decrypt (PyNaCl), DAVE-decrypt (its own davey session) and Opus-decode."""
from __future__ import annotations

import asyncio
import struct
import threading

import davey
import discord
import nacl.secret
import numpy as np
import pytest

from bot.speech.connection.discord_internals import connection_state
from sandbox.talker import wav_frames
from tests.audio_util import aligned_correlation, wav_bytes

pytestmark = pytest.mark.e2e


def speech_wav(seconds: float = 1.0, rate: int = 24000) -> bytes:
    """A mono 24 kHz WAV of a gliding tone (resampled by the sandbox to the call's 48 kHz stereo)."""
    t = np.arange(int(seconds * rate)) / rate
    signal = 0.3 * np.sin(2 * np.pi * (300 + 200 * t) * t) * np.minimum(1.0, t * 20)
    return wav_bytes(signal, rate)


def transport_decrypt(key: bytes, packet: bytes) -> bytes:
    """aead_xchacha20_poly1305_rtpsize as a receiving client undoes it: the frame after the header extension."""
    has_ext = packet[0] & 0x10
    aad = 12 + (4 if has_ext else 0)
    plain = nacl.secret.Aead(key).decrypt(packet[aad:-4], packet[:aad], packet[-4:] + bytes(20))
    return plain[4 * struct.unpack_from(">H", packet, 14)[0]:] if has_ext else plain


async def joined(sb, demo) -> None:
    """The bot in alice's voice channel, its E2EE group ready."""
    it = await sb.slash(demo.alice, demo.general, "tone", seconds=0.2, stay=True)
    await asyncio.wait_for(it.wait_followup(), 30)
    await sb.wait_dave_ready(demo.guild)


async def test_a_member_speaks_dave_encrypted_opus_the_bot_can_decode(sb, demo, bot):
    await joined(sb, demo)
    vc = bot.get_guild(demo.guild.id).voice_client
    state = connection_state(vc)
    packets: list[bytes] = []
    lock = threading.Lock()

    def heard(data: bytes) -> None:
        with lock:
            packets.append(data)

    state.add_socket_listener(heard)
    wav = speech_wav()
    talk = sb.speak(demo.alice, wav, demo.guild)
    await talk.wait(timeout=10)
    await asyncio.sleep(0.2)
    state.remove_socket_listener(heard)

    said = [o.d for o in sb.voice_log if o.direction == "out" and o.op == 5]
    assert said == [{"user_id": str(demo.alice.id), "ssrc": talk.ssrc, "speaking": 1}]
    connects = [o.d for o in sb.voice_log if o.direction == "out" and o.op == 11]
    assert {"user_ids": [str(demo.alice.id)]} in connects       # who was in the call when the bot connected

    frames = wav_frames(wav)
    assert len(talk.sent_at) == len(frames) + 5 and talk.encrypted == len(talk.sent_at)
    ours = [p for p in packets if len(p) >= 12 and struct.unpack_from(">I", p, 8)[0] == talk.ssrc]
    assert len(ours) == len(talk.sent_at)
    decoder = discord.opus.Decoder()
    pcm = b""
    key = bytes(vc.secret_key)
    for packet in ours:
        frame = state.dave_session.decrypt(demo.alice.id, davey.MediaType.audio, transport_decrypt(key, packet))
        assert frame is not None
        pcm += decoder.decode(frame, fec=False)
    assert aligned_correlation(pcm, b"".join(frames)) > 0.9


async def test_the_bot_hears_members_come_and_go(sb, demo, bot):
    await joined(sb, demo)
    bob = sb.user("bob")
    await sb.user_joins_voice(bob, demo.voice)
    await sb.user_leaves_voice(bob, demo.guild)
    await sb._signal.wait_for(lambda: any(o.op == 13 for o in sb.voice_log if o.direction == "out"), 5, "op 13")
    out = [(o.op, o.d) for o in sb.voice_log if o.direction == "out" and o.op in (11, 13)]
    assert (11, {"user_ids": [str(bob.id)]}) in out and (13, {"user_id": str(bob.id)}) in out


def test_wav_frames_resample_to_48k_stereo():
    frames = wav_frames(speech_wav(0.5, 24000))
    assert len(frames) == 25 and all(len(f) == 3840 for f in frames)
    left, right = np.frombuffer(b"".join(frames), dtype="<i2").reshape(-1, 2).T
    assert (left == right).all() and np.abs(left).max() > 9000
