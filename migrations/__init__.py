"""Alembic migrations for the bot database."""
