"""Shared fixtures: a fresh SQLite database per test and a session-wide PostgreSQL server."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from tests import pg_server


@pytest.fixture(scope="session")
def pg_base_url():
    server, reason = pg_server.start()
    if server is None:
        pytest.skip(f"PostgreSQL tests skipped: {reason}")
    yield server.url
    server.stop()


@pytest.fixture
def pg_url(pg_base_url):
    """A fresh, empty PostgreSQL database for one test."""
    import asyncpg

    name = "t_" + uuid.uuid4().hex[:12]
    dsn = pg_base_url.replace("postgresql+asyncpg://", "postgresql://")

    async def admin(sql: str) -> None:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(admin(f'CREATE DATABASE "{name}"'))
    yield pg_base_url.rsplit("/", 1)[0] + "/" + name
    asyncio.run(admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
def sqlite_url(tmp_path):
    return f"sqlite+aiosqlite:///{tmp_path / 'voicebot.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request):
    """Each storage test runs on a SQLite file and on a real PostgreSQL server."""
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_url")
    return request.getfixturevalue("pg_url")
