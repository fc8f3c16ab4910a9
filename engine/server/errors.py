"""The engine server's errors, answered as OpenAI answers them: a status and {"error": {...}}."""

from __future__ import annotations

from aiohttp import web


class ApiError(Exception):
    """An error answered as OpenAI does: status plus {"error": {...}}."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 code: str | None = None, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.code, self.param = status, message, type, code, param

    def response(self) -> web.Response:
        body = {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}
        return web.json_response(body, status=self.status)


def too_large(limit: int) -> ApiError:
    return ApiError(413, f"The request body is larger than {limit} bytes.", code="request_too_large")
