"""describe(): the user-facing line for expected failures; a database that is locked or read-only is one."""

from __future__ import annotations

import sqlite3

from discord import app_commands
from sqlalchemy.exc import OperationalError

from bot.errors import DATABASE_BUSY, UserError, describe


def test_database_locked_or_read_only_gets_a_clear_line_not_a_bug_report():
    for message in ("database is locked", "attempt to write a readonly database"):
        error = OperationalError("UPDATE guild_settings ...", {}, sqlite3.OperationalError(message))
        assert describe(error) == DATABASE_BUSY
    wrapped = app_commands.CommandInvokeError.__new__(app_commands.CommandInvokeError)
    wrapped.original = OperationalError("SELECT 1", {}, sqlite3.OperationalError("database is locked"))
    assert describe(wrapped) == DATABASE_BUSY
    assert "nothing was changed" in DATABASE_BUSY and "Try again" in DATABASE_BUSY


def test_user_errors_pass_through_and_bugs_stay_unexplained():
    assert describe(UserError("Join a voice channel first.")) == "Join a voice channel first."
    assert describe(RuntimeError("boom")) is None
