"""End-to-end encrypted voice (DAVE): whether listeners expect E2EE, whether frames sent now are heard, privacy code."""

from __future__ import annotations

from typing import Any, Protocol

DAVE_REQUIRED_CLOSE = 4017  # voice close code: the client did not offer DAVE


class DaveFacts(Protocol):
    """What these checks read of a voice client (bot/speech/connection/voice_client.py's ObservedVoiceClient)."""

    @property
    def dave_protocol_version(self) -> int: ...

    @property
    def can_encrypt(self) -> bool: ...

    @property
    def voice_privacy_code(self) -> str | None: ...

    @property
    def channel(self) -> Any: ...

    @property
    def user(self) -> Any: ...


def e2ee_expected(vc: DaveFacts) -> bool:
    """The call uses DAVE and someone else is in the channel to hear it: plain frames would be dropped."""
    channel = vc.channel
    if not vc.dave_protocol_version or channel is None:
        return False
    me = vc.user.id if vc.user else None
    return any(uid != me for uid in getattr(channel, "voice_states", {}))  # works without the member cache


def may_speak(vc: DaveFacts) -> bool:
    """Every frame sent now would reach listeners: E2EE is ready, or nobody needs it. discord.py 2.7 runs the DAVE
    transitions itself but sends plain Opus while its DAVE session is not ready, and listeners drop those frames."""
    return vc.can_encrypt or not e2ee_expected(vc)


def privacy_code(vc: DaveFacts | None) -> str | None:
    """The voice privacy code, grouped in fives as Discord clients show it (None without an E2EE group)."""
    code = vc.voice_privacy_code if vc is not None and vc.can_encrypt else None
    return " ".join(code[i:i + 5] for i in range(0, len(code), 5)) if code else None
