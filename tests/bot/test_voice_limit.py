"""The per-user voice limit holds for registrations that run at once (real engine, real SQLite)."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from bot.errors import UserError
from bot.storage import voices_repo as repo
from tests.bot.test_voice_service import service  # noqa: F401 - a fixture
from tests.e2e.test_voices import FIT, espeak_clip

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]


async def test_concurrent_registrations_stop_at_the_limit(service) -> None:  # noqa: F811
    service.settings = dataclasses.replace(service.settings, max_per_user=2)
    clip = await asyncio.to_thread(espeak_clip)
    results = await asyncio.gather(
        *(service.register(7, f"voice {n}", clip, FIT) for n in range(6)), return_exceptions=True
    )
    refused = [r for r in results if isinstance(r, UserError)]
    assert len(refused) == 4 and all("the most allowed" in str(r) for r in refused), results
    assert await repo.count_owned(service.db, 7) == 2
