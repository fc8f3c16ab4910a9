"""Schema upgrades from several bot processes at once, on a real PostgreSQL: one at a time, all succeed."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import pytest

from bot.storage.database import MIGRATION_LOCK_KEY, migration_lock

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(180)]
UPGRADE = "import asyncio, sys; from bot.storage.database import upgrade; asyncio.run(upgrade(sys.argv[1]))"


async def _waiting_for_lock(dsn: str) -> int:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:  # an advisory lock on a bigint key is (classid, objid) = (high 32 bits, low 32 bits)
        return await conn.fetchval(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND classid::bigint = $1 "
            "AND objid::bigint = $2", MIGRATION_LOCK_KEY >> 32, MIGRATION_LOCK_KEY & 0xFFFF_FFFF)
    finally:
        await conn.close()


async def _tables(dsn: str) -> tuple[set[str], list[str]]:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        tables = {r[0] for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
        versions = ([r[0] for r in await conn.fetch("SELECT version_num FROM alembic_version")]
                    if "alembic_version" in tables else [])
        return tables, versions
    finally:
        await conn.close()


async def test_two_processes_upgrading_at_once_take_turns(pg_url) -> None:
    from alembic.script import ScriptDirectory

    from bot.storage.database import _alembic_config

    head = ScriptDirectory.from_config(_alembic_config(pg_url)).get_current_head()
    dsn = pg_url.replace("postgresql+asyncpg://", "postgresql://")
    procs: list[subprocess.Popen] = []
    try:
        async with migration_lock(pg_url):  # this test is the process upgrading first
            procs = [subprocess.Popen([sys.executable, "-c", UPGRADE, pg_url],
                                      stderr=subprocess.PIPE) for _ in range(2)]
            deadline = time.monotonic() + 90
            while await _waiting_for_lock(dsn) < 2:  # both wait on the lock, neither touches the schema
                assert all(p.poll() is None for p in procs), [p.stderr.read() for p in procs if p.poll() is not None]
                assert time.monotonic() < deadline, "the upgrades never waited for the migration lock"
                await asyncio.sleep(0.1)
            assert (await _tables(dsn))[0] == set()
        codes = [await asyncio.to_thread(p.wait, 90) for p in procs]
        assert codes == [0, 0], [p.stderr.read().decode()[-2000:] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
    tables, versions = await _tables(dsn)
    assert versions == [head] and {"voices", "alembic_version"} <= tables
