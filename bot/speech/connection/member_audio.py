"""MemberAudio: one consenting member's voice from the call: only their packets are transport-decrypted, DAVE-decrypted
with their key and Opus-decoded (for a voice recorded in the call); nobody else's is touched."""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import davey
import discord
import nacl.exceptions
import nacl.secret
import numpy as np

from bot.speech.connection.voice_receive import ReceiveCounts

RTPSIZE_MODE = "aead_xchacha20_poly1305_rtpsize"  # the mode discord.py 2.7 chooses (its first supported)
FRAME_S = 0.020
SPEECH_DBFS = -45.0  # a decoded frame louder than this (RMS, dB of full scale) is shown as speech, else silence
LOST_KEY_FRAMES = 50  # this many of the member's frames in a row that DAVE cannot open: their key is lost to us


@dataclass(frozen=True)
class CallKeys:
    """What opening a packet of the call takes, read at each packet (a new session or epoch changes them)."""

    mode: str
    secret_key: bytes
    dave: Any  # the bot's davey.DaveSession; None in a call without end-to-end encryption


def open_transport(keys: CallKeys, packet: bytes) -> bytes:
    """The frame inside an RTP packet in the rtpsize AEAD mode: the header (and its extension's preamble) is the AAD,
    a 32-bit nonce counter ends the packet, the extension's body comes first in the plaintext."""
    if keys.mode != RTPSIZE_MODE:
        raise ValueError(f"cannot open {keys.mode!r} packets")
    has_ext = bool(packet[0] & 0x10)
    aad = 12 + 4 * (packet[0] & 0x0F) + (4 if has_ext else 0)
    if len(packet) < aad + 4:
        raise ValueError("a packet shorter than its header")
    plain = nacl.secret.Aead(keys.secret_key).decrypt(packet[aad:-4], packet[:aad], packet[-4:] + bytes(20))
    return plain[4 * struct.unpack_from(">H", packet, aad - 2)[0]:] if has_ext else plain


class MemberAudio:
    """48 kHz stereo PCM of one member's frames, as they arrive, up to `max_s`; a packet it cannot open or decode
    is dropped and counted (ReceiveCounts), never raised. Called on the receive path's thread (VoiceReceive.take)."""

    def __init__(self, user_id: int, keys: Callable[[], CallKeys | None], counts: ReceiveCounts, *,
                 max_s: float = 30.0, decoder: Callable[[], Any] = discord.opus.Decoder) -> None:
        self.user_id = user_id
        self.pcm = bytearray()
        self.frames = 0
        self.speech_frames = 0  # frames louder than SPEECH_DBFS (what the recorder is shown)
        self.failed_in_row = 0  # the member's frames DAVE could not open since the last one it could
        self.max_frames = round(max_s / FRAME_S)
        self._keys = keys
        self._counts = counts
        self._new_decoder = decoder
        self._decoder: Any = None  # made on the member's first frame: one decoder, theirs

    @property
    def full(self) -> bool:
        return self.frames >= self.max_frames

    @property
    def key_lost(self) -> bool:
        """The call's end-to-end encryption moved on to keys the bot cannot open this member's frames with."""
        return self.failed_in_row >= LOST_KEY_FRAMES

    def packet(self, data: bytes, _at: float) -> None:
        if self.full:
            return
        keys = self._keys()
        if keys is None:
            self._counts.drop("no_keys")
            return
        try:
            frame = open_transport(keys, data)
        except (ValueError, nacl.exceptions.CryptoError):
            self._counts.drop("transport_failed")
            return
        if keys.dave is not None:
            opened: bytes | None
            try:
                opened = keys.dave.decrypt(self.user_id, davey.MediaType.audio, frame)
            except Exception:  # noqa: BLE001 - no key for this sender (a new epoch the bot cannot follow yet)
                opened = None
            if opened is None:
                self.failed_in_row += 1
                self._counts.drop("dave_failed")
                return
            self.failed_in_row = 0
            frame = opened
        if self._decoder is None:
            self._decoder = self._new_decoder()
        try:
            pcm = self._decoder.decode(frame, fec=False)
        except discord.opus.OpusError:
            self._counts.drop("decode_failed")
            return
        self.pcm += pcm
        self.frames += 1
        self.speech_frames += is_speech(pcm)

    def forget(self) -> None:
        """Drop what was kept (after registration, or when the recording ended without one); keep nothing more."""
        self.max_frames = 0
        self.pcm = bytearray()


def is_speech(pcm: bytes) -> bool:
    """A decoded frame (s16 samples) loud enough to be shown as speech."""
    samples = np.frombuffer(pcm, dtype="<i2").astype(np.float64)
    return bool(len(samples) and 10 * np.log10(np.mean(samples ** 2) / 32768.0 ** 2 + 1e-12) > SPEECH_DBFS)
