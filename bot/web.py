"""aiohttp side server of the bot: /healthz and Prometheus /metrics."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

if TYPE_CHECKING:
    import discord

    from bot.metrics import BotMetrics

log = logging.getLogger(__name__)


def create_app(bot: discord.Client, metrics: BotMetrics) -> web.Application:
    async def healthz(_request: web.Request) -> web.Response:
        ready = bot.is_ready() and not bot.is_closed()
        body = {"status": "ok" if ready else "starting", "guilds": len(bot.guilds),
                "voice_connections": metrics.speech.voice_connections(),
                "latency_ms": round(bot.latency * 1000, 1) if bot.latency == bot.latency else None}
        return web.json_response(body, status=200 if ready else 503)

    async def metrics_route(_request: web.Request) -> web.Response:
        return web.Response(body=metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics_route)
    return app


class WebServer:
    def __init__(self, bot: discord.Client, metrics: BotMetrics, host: str, port: int) -> None:
        self.bot = bot
        self.metrics = metrics
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> int:
        self._runner = web.AppRunner(create_app(self.bot, self.metrics), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        port = site._server.sockets[0].getsockname()[1] if site._server and site._server.sockets else self.port
        log.info("web: /healthz and /metrics on http://%s:%s", self.host, port)
        self.port = port
        return port

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
