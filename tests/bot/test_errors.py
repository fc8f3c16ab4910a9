"""describe(): the user-facing line for expected failures; a database that is locked or read-only is one."""

from __future__ import annotations

import sqlite3

from discord import app_commands
from sqlalchemy.exc import OperationalError

from bot.errors import DATABASE_BUSY, MESSAGE_MAX_CHARS, UserError, describe, messages


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


def test_lines_go_in_as_few_messages_as_fit_discords_limit():
    assert messages(["a", "b"]) == ["a\nb"]
    lines = [f"{i:03d} " + "x" * 96 for i in range(50)]  # 100 characters each
    sent = messages(lines)
    assert len(sent) == 3 and all(len(m) <= MESSAGE_MAX_CHARS for m in sent)
    assert "\n".join(sent) == "\n".join(lines)  # broken only between lines
    assert messages(["y" * 2500]) == ["y" * MESSAGE_MAX_CHARS]
    assert messages([]) == []
