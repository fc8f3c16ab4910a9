"""End-to-end encrypted voice (DAVE): when listeners expect E2EE, bounded waits for discord.py's readiness, the privacy code.

discord.py 2.7 runs the DAVE transitions itself (``VoiceConnectionState``) but sends plain Opus while its DAVE
session is not ready (``can_encrypt``), and listeners drop those frames. The bot only waits and reports.
"""

from __future__ import annotations

import asyncio

import discord

DAVE_REQUIRED_CLOSE = 4017  # voice close code: the client did not offer DAVE
POLL_S = 0.01


def _state(vc: discord.VoiceClient):
    return getattr(vc, "_connection", None)  # discord.py's VoiceConnectionState (no public readiness flag)


def e2ee_expected(vc: discord.VoiceClient) -> bool:
    """The call uses DAVE and someone else is in the channel to hear it: plain frames would be dropped."""
    state = _state(vc)
    channel = vc.channel
    if state is None or not state.dave_protocol_version or channel is None:
        return False
    me = vc.user.id if vc.user else None
    return any(uid != me for uid in getattr(channel, "voice_states", {}))  # works without the member cache


def e2ee_ready(vc: discord.VoiceClient) -> bool:
    state = _state(vc)
    return bool(state is not None and state.can_encrypt)


def may_speak(vc: discord.VoiceClient) -> bool:
    """Every frame sent now would reach listeners: E2EE is ready, or nobody needs it."""
    return e2ee_ready(vc) or not e2ee_expected(vc)


async def wait_e2ee(vc: discord.VoiceClient, timeout: float) -> bool:
    """Wait (at most `timeout` s) until frames sent now would be heard; False on timeout."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not may_speak(vc):
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(POLL_S)
    return True


def privacy_code(vc: discord.VoiceClient | None) -> str | None:
    """The voice privacy code, grouped in fives as Discord clients show it (None without an E2EE group)."""
    code = vc.voice_privacy_code if vc is not None and e2ee_ready(vc) else None
    return " ".join(code[i:i + 5] for i in range(0, len(code), 5)) if code else None


async def wait_privacy_code(vc: discord.VoiceClient, timeout: float) -> str | None:
    """The privacy code once E2EE is ready (waiting at most `timeout` s); None when nobody else is in the call."""
    if e2ee_expected(vc):
        await wait_e2ee(vc, timeout)
    return privacy_code(vc)


def closed_with(vc: discord.VoiceClient | None) -> int | None:
    """The close code of the voice websocket, if the voice server closed it."""
    state = _state(vc) if vc is not None else None
    ws = getattr(getattr(state, "ws", None), "ws", None)
    return getattr(ws, "close_code", None)
