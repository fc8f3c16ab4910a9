"""The remote backend's feature blob: the server's voice id plus the clip and transcript that were uploaded.

Why the clip is in the blob: a fleet of engine servers shares no voice state, so whoever speaks a voice
must be able to give it to a server that lacks it. The blob is all a backend gets of a registered voice
(engine.base.VoiceProfile), for the bot, the CLI's profile files and benchmarks alike; carrying the clip
here keeps that contract and needs nothing from the bot's storage at speaking time. The cost: the FLAC
(at most 30 s of 16 kHz mono, about 0.5 MB) is stored a second time, in the voice's features.

Format: `REMOTE_MAGIC`, one line of JSON `{"id", "transcript", "flac_bytes"}`, then the FLAC itself.
A blob of the first kind (the id alone, ASCII) is still read: it has no clip to upload again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

REMOTE_MAGIC = b"voicebot-remote-voice/1\n"


@dataclass(frozen=True)
class RemoteVoice:
    voice_id: str
    flac: bytes = b""  # empty for an id-only blob
    transcript: str = ""

    def to_blob(self) -> bytes:
        head = {"id": self.voice_id, "transcript": self.transcript, "flac_bytes": len(self.flac)}
        return REMOTE_MAGIC + json.dumps(head, ensure_ascii=True).encode("ascii") + b"\n" + self.flac

    @classmethod
    def from_blob(cls, blob: bytes) -> RemoteVoice | None:
        """The voice in a blob; None when it is empty or damaged."""
        if not blob.startswith(REMOTE_MAGIC):
            vid = blob.decode("ascii", "replace").strip()
            return cls(vid) if vid and vid.isascii() and vid.isprintable() and len(vid) <= 200 else None
        line, sep, flac = blob[len(REMOTE_MAGIC):].partition(b"\n")
        try:
            head = json.loads(line)
            vid, transcript, size = head["id"], head["transcript"], head["flac_bytes"]
        except (ValueError, KeyError, TypeError):
            return None
        if not sep or not isinstance(vid, str) or not vid or not isinstance(transcript, str) or size != len(flac):
            return None
        return cls(vid, flac, transcript)
