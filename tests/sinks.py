"""A test double for a guild call's VoiceSink (what the voice driver sends to): it keeps every packet sent."""

from __future__ import annotations


class FakeSink:
    timeout = 1.0
    ducking = None

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def ready_to_send(self) -> bool:
        return True

    def is_connected(self) -> bool:
        return True

    def send_opus(self, packet: bytes) -> None:
        self.sent.append(packet)

    def set_speaking(self, speaking: bool) -> None:
        pass
