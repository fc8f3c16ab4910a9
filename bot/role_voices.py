"""A server's voice per role (the role_voice setting), stored as JSON text: role id -> [voice, its name]; a voice is
a stock voice's name or the id of a registered voice shared with the server."""

from __future__ import annotations

import json
from collections.abc import Iterable

MAX_ROLES = 10  # roles with a voice in one server (at their longest they fill most of the column's 1000 characters)


def parse(stored: str) -> dict[int, tuple[str, str]]:
    """The stored mapping as role id -> (voice, its name); nothing for an empty or unreadable value."""
    try:
        raw = json.loads(stored) if stored else {}
    except ValueError:
        return {}
    return {int(role): (str(v[0]), str(v[1])) for role, v in raw.items()} if isinstance(raw, dict) else {}


def format_mapping(mapping: dict[int, tuple[str, str]]) -> str:
    return json.dumps({str(role): list(v) for role, v in sorted(mapping.items())}, ensure_ascii=False,
                      separators=(",", ":")) if mapping else ""


def shown(stored: str) -> str:
    """How /settings show says it: each role and its voice's name."""
    return ", ".join(f"<@&{role}> {name}" for role, (_, name) in parse(stored).items()) or "none"


def voice_of(stored: str, role_ids: Iterable[int]) -> str | None:
    """The voice of the first of `role_ids` (highest role first) that has one."""
    mapping = parse(stored)
    return next((mapping[r][0] for r in role_ids if r in mapping), None)
