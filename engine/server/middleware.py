"""The engine server's middlewares: every error answered OpenAI-shaped and counted; API keys checked, tenant set."""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from aiohttp import web

from engine.server.auth import Tenants
from engine.server.errors import ApiError, too_large
from engine.server.metrics import ServerMetrics

log = logging.getLogger(__name__)

OPEN_PATHS = frozenset({"/healthz"})
TENANT = web.RequestKey("tenant", str)  # set by the auth middleware on every authenticated request
METRICS = web.AppKey("metrics", ServerMetrics)
TENANTS = web.AppKey("tenants", Tenants)
UPLOAD_LIMIT = web.AppKey("upload_limit", int)  # the largest body aiohttp reads (client_max_size)


def bearer(request: web.Request) -> str | None:
    auth = request.headers.get("Authorization", "")
    scheme, _, token = auth.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def client_key(request: web.Request) -> str:
    """The scheduler key of a request: its token's fingerprint, else the peer address."""
    token = bearer(request)
    if token:
        return "key:" + hashlib.sha256(token.encode()).hexdigest()[:12]
    return "addr:" + (request.remote or "unknown")


@web.middleware
async def errors(request: web.Request, handler: Any) -> web.StreamResponse:
    metrics = request.app[METRICS]
    route = request.match_info.route.resource.canonical if request.match_info.route.resource else "other"
    try:
        resp = await handler(request)
    except ApiError as exc:
        resp = exc.response()
        metrics.errors.labels(exc.code or exc.type).inc()
    except web.HTTPException as exc:
        if exc.status == 413:
            err = too_large(request.app[UPLOAD_LIMIT])
        else:
            err = ApiError(exc.status, exc.reason, code=str(exc.status))
        resp = err.response()
        metrics.errors.labels(err.code).inc()
    except ConnectionError as exc:  # the client hung up while sending: one line, no traceback
        log.info("client %s went away during %s %s (%s)", request.remote, request.method, request.path,
                 type(exc).__name__)
        metrics.errors.labels("client_gone").inc()
        resp = web.Response(status=499)  # nginx's "client closed request"; nobody reads it
    except Exception:  # a bug before any byte was sent: still an OpenAI-shaped 500
        log.exception("request %s %s failed", request.method, request.path)
        resp = ApiError(500, "The voice server failed; see its log.", type="server_error",
                        code="internal_error").response()
        metrics.errors.labels("internal_error").inc()
    metrics.requests.labels(route, str(resp.status)).inc()
    return resp


@web.middleware
async def auth(request: web.Request, handler: Any) -> web.StreamResponse:
    if request.path not in OPEN_PATHS:
        tenant = request.app[TENANTS].tenant_of(bearer(request))
        if tenant is None:
            raise ApiError(401, "Incorrect or missing API key: send 'Authorization: Bearer <key>'.",
                           code="invalid_api_key")
        request[TENANT] = tenant
    return await handler(request)
