"""Database engine and sessions (SQLite in WAL mode by default, any async SQLAlchemy URL), and upgrades."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

from sqlalchemy import CursorResult, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.pool import NullPool

log = logging.getLogger(__name__)
MIGRATIONS = Path(__file__).resolve().parent.parent.parent / "migrations"


class StorageError(Exception):
    """The database cannot be opened or upgraded; the message names the URL without its password."""


def safe_url(url: str) -> str:
    """The URL with any password hidden, for logs and error messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - only for the log line
        return "<unparseable database URL>"


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()


def create_engine(url: str, *, echo: bool = False) -> AsyncEngine:
    """An async engine; for SQLite the file's folder is created and WAL and foreign keys are on."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(url, echo=echo)
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    return create_async_engine(url, echo=echo, pool_pre_ping=True)


class Database:
    """Owns the engine and hands out sessions."""

    def __init__(self, url: str, *, echo: bool = False) -> None:
        self.url = url
        self.engine = create_engine(url, echo=echo)
        self.sessions: async_sessionmaker[AsyncSession] = async_sessionmaker(
            self.engine, expire_on_commit=False
        )

    async def connect(self) -> None:
        """Open the first pooled connection now (startup), not on the first user's request."""
        async with self.engine.connect() as conn:
            await conn.execute(text("SELECT 1"))

    async def close(self) -> None:
        await self.engine.dispose()


def _alembic_config(url: str):
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    cfg.attributes["configure_logging"] = False
    return cfg


def upgrade_sync(url: str, revision: str = "head") -> None:
    """Bring the schema to `revision` (blocking; runs its own event loop for async drivers)."""
    from alembic import command

    if make_url(url).get_backend_name() == "sqlite":
        db = make_url(url).database
        if db and db != ":memory:":
            Path(db).parent.mkdir(parents=True, exist_ok=True)
    command.upgrade(_alembic_config(url), revision)


def downgrade_sync(url: str, revision: str = "base") -> None:
    from alembic import command

    command.downgrade(_alembic_config(url), revision)


# pg_advisory_lock key of schema upgrades: bot processes starting at once upgrade one after another
MIGRATION_LOCK_KEY = 0x766F_6963_6562_6F74 & 0x7FFF_FFFF_FFFF_FFFF  # "voicebot"
MIGRATION_LOCK_TIMEOUT_S = 300.0


@contextlib.asynccontextmanager
async def migration_lock(url: str, timeout_s: float = MIGRATION_LOCK_TIMEOUT_S) -> AsyncIterator[None]:
    """On PostgreSQL, hold the database's migration advisory lock (waiting at most `timeout_s`) while the
    block runs; the lock goes with the connection if this process dies. SQLite is one process: no lock."""
    if make_url(url).get_backend_name() != "postgresql":
        yield
        return
    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            await conn.execute(text(f"SET lock_timeout = '{int(timeout_s * 1000)}ms'"))
            await conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
            await conn.commit()  # a session lock: it outlives the transaction that took it
            try:
                yield
            finally:
                await conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": MIGRATION_LOCK_KEY})
                await conn.commit()
    finally:
        await engine.dispose()


async def upgrade(url: str, revision: str = "head") -> None:
    """Upgrade off the event loop, one process at a time (migration_lock); errors become a StorageError
    with a password-free URL."""
    try:
        async with migration_lock(url):
            await asyncio.to_thread(upgrade_sync, url, revision)
    except Exception as exc:
        raise StorageError(f"database {safe_url(url)} could not be upgraded: {exc}") from exc


def rowcount(result: Any) -> int:
    """The rows an UPDATE or DELETE touched (its CursorResult's rowcount)."""
    return int(cast(CursorResult, result).rowcount)
