"""CatchUp: one notice per catch-up, when nothing more was skipped for QUIET_S or LONGEST_S after its first skip."""

from __future__ import annotations

import asyncio
import time

import pytest

from bot import catch_up
from bot.catch_up import CatchUp, notice


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catch_up, "QUIET_S", 0.4)
    monkeypatch.setattr(catch_up, "LONGEST_S", 1.0)


async def test_skips_close_together_are_told_once_when_quiet(quick: None) -> None:
    sent: list[tuple[int, str, float]] = []

    async def send(channel_id: int, text: str) -> None:
        sent.append((channel_id, text, time.monotonic()))

    told = CatchUp(send)
    started = time.monotonic()
    told.skipped(1, 10, 30.0)
    told.skipped(2, 20, 15.0)
    told.skipped(3, None, 15.0)  # nowhere to tell: not counted
    await asyncio.sleep(0.3)
    told.skipped(1, 11, 30.0)  # the notice goes where the first skip was
    assert (told.pending(1), told.pending(2), told.pending(3)) == (2, 1, 0)
    await asyncio.sleep(0.25)
    assert [s[:2] for s in sent] == [(20, notice(1, 15.0))]  # guild 2 quiet for 0.4 s; guild 1 not yet
    await asyncio.sleep(0.35)
    assert [s[:2] for s in sent] == [(20, notice(1, 15.0)), (10, notice(2, 30.0))]
    assert sent[1][2] - started == pytest.approx(0.7, abs=0.15)  # 0.4 s after its last skip
    assert told.pending(1) == 0
    await told.close()


async def test_a_backlog_that_lasts_is_told_at_the_longest(quick: None) -> None:
    sent: list[float] = []

    async def send(channel_id: int, text: str) -> None:
        sent.append(time.monotonic())

    told = CatchUp(send)
    started = time.monotonic()
    while time.monotonic() - started < 1.3:
        told.skipped(1, 10, 30.0)
        await asyncio.sleep(0.05)
    assert len(sent) == 1 and sent[0] - started == pytest.approx(1.0, abs=0.15)
    await told.close()
    await asyncio.sleep(0.6)
    assert len(sent) == 1  # closed: the rest is never told


async def test_a_failed_notice_is_logged_not_raised(quick: None, caplog: pytest.LogCaptureFixture) -> None:
    async def send(channel_id: int, text: str) -> None:
        raise RuntimeError("no such channel")

    told = CatchUp(send)
    told.skipped(1, 10, 30.0)
    await asyncio.sleep(0.6)
    assert "could not tell the catch-up of 1 messages" in caplog.text
    await told.close()
