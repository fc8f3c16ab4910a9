"""Pointing an unmodified discord.py client at a sandbox (in-process, or in a subprocess via environment)."""
from __future__ import annotations

import os
import ssl
from typing import TYPE_CHECKING, Callable

import aiohttp
import yarl

if TYPE_CHECKING:
    from .world import World

ENV_API = "SANDBOX_API_URL"
ENV_GATEWAY = "SANDBOX_GATEWAY_URL"
ENV_CA = "SANDBOX_CA_PEM"
ENV_TOKEN = "SANDBOX_TOKEN"

_ORIGINAL: dict = {}


def _apply(api_url: str, gateway_url: str) -> None:
    import discord.gateway
    import discord.http
    _ORIGINAL.setdefault("base", discord.http.Route.BASE)
    _ORIGINAL.setdefault("gateway", discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY)
    discord.http.Route.BASE = api_url
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway_url)


def _connector_factory(ca_pem: str) -> Callable[[], aiohttp.TCPConnector]:
    def make() -> aiohttp.TCPConnector:
        ctx = ssl.create_default_context(cafile=ca_pem)
        return aiohttp.TCPConnector(ssl=ctx, limit=0)  # as discord.py's own: no cap (one ws per voice connection)
    return make


def point_discord_at(sb: "World") -> Callable[[], aiohttp.TCPConnector]:
    """Set ``discord.http.Route.BASE`` and ``DiscordWebSocket.DEFAULT_GATEWAY`` to the sandbox and return a
    factory of ``aiohttp.TCPConnector`` trusting the sandbox CA. Call the factory inside the running loop and
    pass it as ``commands.Bot(..., connector=make_connector())``: the voice websocket is TLS.
    Alternative without ``connector=``: export ``SSL_CERT_FILE=sb.ca_pem_path`` before aiohttp is imported
    (a subprocess bot; see ``env``)."""
    _apply(sb.api_url, sb.gateway_url)
    return _connector_factory(sb.ca_pem_path)


def restore_discord() -> None:
    """Undo ``point_discord_at``."""
    import discord.gateway
    import discord.http
    if "base" in _ORIGINAL:
        discord.http.Route.BASE = _ORIGINAL.pop("base")
    if "gateway" in _ORIGINAL:
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = _ORIGINAL.pop("gateway")


def env(sb: "World") -> dict:
    """Environment for a bot subprocess: ``point_discord_at_env()`` there reads it. Includes SSL_CERT_FILE."""
    return {ENV_API: sb.api_url, ENV_GATEWAY: sb.gateway_url, ENV_CA: sb.ca_pem_path, ENV_TOKEN: sb.token,
            "SSL_CERT_FILE": sb.ca_pem_path}


def point_discord_at_env() -> Callable[[], aiohttp.TCPConnector]:
    """In a subprocess started with ``env(sb)``: the same as ``point_discord_at``, from the environment."""
    _apply(os.environ[ENV_API], os.environ[ENV_GATEWAY])
    return _connector_factory(os.environ[ENV_CA])
