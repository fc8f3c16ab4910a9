"""Engine server API keys: read once, validated, compared in constant time; each key is a tenant."""

from __future__ import annotations

import hashlib
import hmac

from engine.base import EngineError

OPEN_TENANT = ""  # the one tenant of a server without keys (loopback only)


def parse_keys(value: str | None, source: str) -> tuple[str, ...]:
    """The comma-separated keys in `value`; none when it is blank. A blank key among others, or a key
    with spaces or control characters, is an EngineError naming `source` (never the key)."""
    if value is None or not value.strip():
        return ()
    keys = [k.strip() for k in value.split(",")]
    if not all(keys):
        raise EngineError(f"{source} has an empty key: give one or more comma-separated keys, none blank")
    if any(ch.isspace() or not ch.isprintable() for k in keys for ch in k):
        raise EngineError(f"{source} has a key with spaces or control characters")
    return tuple(dict.fromkeys(keys))


def tenant_id(key: str) -> str:
    """A key's tenant: a fingerprint that can be stored and logged (the key itself never is)."""
    return "t" + hashlib.sha256(key.encode()).hexdigest()[:16]


class Tenants:
    """The server's keys. `tenant_of(token)` compares the token with every key in constant time."""

    def __init__(self, keys: tuple[str, ...]) -> None:
        self._keys = tuple((k.encode(), tenant_id(k)) for k in keys)

    @property
    def required(self) -> bool:
        return bool(self._keys)

    def tenant_of(self, token: str | None) -> str | None:
        """The token's tenant; OPEN_TENANT when there are no keys; None when it matches no key."""
        if not self._keys:
            return OPEN_TENANT
        presented = (token or "").encode()
        found = None
        for key, tenant in self._keys:  # no early exit: the time does not say which key matched
            if hmac.compare_digest(presented, key):
                found = tenant
        return found


def voice_id_for_tenant(base_id: str, tenant: str) -> str:
    """A registered voice's id within its tenant: the same clip uploaded by two tenants is two voices."""
    if tenant == OPEN_TENANT:
        return base_id
    return "v" + hashlib.sha256(f"{tenant}:{base_id}".encode()).hexdigest()[:16]
