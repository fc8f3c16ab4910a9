"""Scale-out parts as real processes on 127.0.0.1: engine servers (`python -m engine serve`), nginx, bot processes.

Every start is bounded by a timeout and every part has `stop()`; use them with `async with`.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 180.0
NGINX_CONF = """\
{user}worker_processes 1;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log {prefix}/access.log;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    upstream engines {{
        least_conn;
{servers}
        keepalive 16;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://engines;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;                       # speech streams as it is synthesized
            proxy_request_buffering off;
            client_body_buffer_size 12m;               # uploads stay in memory
            client_max_body_size 11m;                  # max_upload_bytes plus multipart overhead
            proxy_read_timeout 60s;
            proxy_next_upstream error timeout non_idempotent;  # nothing sent yet: speech and uploads repeat safely
            add_header X-Upstream $upstream_addr always;
            add_header X-Fleet-Generation {generation} always;
        }}
    }}
}}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nginx_binary() -> str | None:
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)


async def _stop(proc: asyncio.subprocess.Process, sig: int = signal.SIGTERM, timeout: float = 20.0) -> None:
    if proc.returncode is None:
        proc.send_signal(sig)
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except asyncio.TimeoutError:
            proc.kill()
            await asyncio.wait_for(proc.wait(), 10)


class EngineServer:
    """`python -m engine serve` (Piper, one worker) with its own voices folder."""

    def __init__(self, proc: asyncio.subprocess.Process, url: str, folder: Path) -> None:
        self.proc, self.url, self.folder = proc, url, folder
        self.port = int(url.rsplit(":", 1)[1])

    @classmethod
    async def start(cls, folder: Path, *, cpus: set[int] | None = None) -> EngineServer:
        """Started and warmed up; `cpus`: the CPUs it may run on (as one GPU each would be its own)."""
        folder.mkdir(parents=True, exist_ok=True)
        log = open(folder / "server.log", "wb")
        port = free_port()
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "engine", "serve", "--backend", "piper", "--port", str(port), "--workers", "1",
                "--max-concurrency", "1",
                "--voices-dir", str(folder / "voices"), cwd=ROOT, stdin=asyncio.subprocess.DEVNULL,
                stdout=log, stderr=asyncio.subprocess.PIPE,
                preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
        finally:
            log.close()
        try:
            assert proc.stderr is not None
            line = (await asyncio.wait_for(proc.stderr.readline(), START_TIMEOUT_S)).decode(errors="replace")
            found = re.search(r"engine server on (\S+)", line)
            if not found:
                raise RuntimeError(f"the engine server did not start: {line}{(await proc.stderr.read(4000)).decode()}")
        except BaseException:
            await _stop(proc, signal.SIGKILL)
            raise
        asyncio.ensure_future(_drain(proc.stderr, folder / "server.err"))
        return cls(proc, found[1], folder)

    async def status(self) -> dict:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as s:
            async with s.get(self.url + "/v1/status") as resp:
                return await resp.json()

    async def voice_ids(self) -> set[str]:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as s:
            async with s.get(self.url + "/v1/voices") as resp:
                return {v["id"] for v in (await resp.json())["data"]}

    async def speech_requests(self) -> float:
        """Speech requests this server has answered 200 (its /metrics)."""
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as s:
            async with s.get(self.url + "/metrics") as resp:
                text = await resp.text()
        found = re.search(r'^engine_server_requests_total\{route="/v1/audio/speech",status="200"\} (\S+)$', text, re.M)
        return float(found[1]) if found else 0.0

    def cpu_seconds(self) -> float:
        """CPU time (user + system) the server process has used so far (Linux /proc)."""
        fields = (Path("/proc") / str(self.proc.pid) / "stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    async def kill(self) -> None:
        await _stop(self.proc, signal.SIGKILL)

    async def stop(self) -> None:
        await _stop(self.proc)


async def _drain(stream: asyncio.StreamReader, path: Path) -> None:
    with open(path, "ab") as out:
        while chunk := await stream.read(65_536):
            out.write(chunk)
            out.flush()


class Nginx:
    """Debian's nginx in the foreground, on a loopback port, with a config in `prefix` (no system service)."""

    def __init__(self, prefix: Path, servers: list[EngineServer]) -> None:
        self.prefix, self.servers = prefix, servers
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.generation = 0
        self.proc: asyncio.subprocess.Process | None = None

    def _write(self, down: set[int]) -> None:
        self.generation += 1
        lines = [f"        server 127.0.0.1:{s.port}{' down' if i in down else ''} max_fails=1 fail_timeout=30s;"
                 for i, s in enumerate(self.servers)]
        user = "user root root;\n" if os.geteuid() == 0 else ""
        (self.prefix / "nginx.conf").write_text(NGINX_CONF.format(
            user=user, prefix=self.prefix, port=self.port, servers="\n".join(lines), generation=self.generation))

    async def start(self) -> Nginx:
        binary = nginx_binary()
        if binary is None:
            raise RuntimeError("nginx is not installed (scripts/setup.sh test installs it)")
        self.prefix.mkdir(parents=True, exist_ok=True)
        self._write(set())
        self.proc = await asyncio.create_subprocess_exec(
            binary, "-p", str(self.prefix), "-c", str(self.prefix / "nginx.conf"), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        await self._wait_generation()
        return self

    async def only(self, index: int | None) -> None:
        """Send everything to server `index` (the others marked down), or None: to all; waits for the reload."""
        assert self.proc is not None
        self._write(set() if index is None else {i for i in range(len(self.servers)) if i != index})
        self.proc.send_signal(signal.SIGHUP)
        await self._wait_generation()

    async def _wait_generation(self) -> None:
        """Until a new connection is answered under the config just written (bounded)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while True:
            try:
                async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True),
                                                 timeout=aiohttp.ClientTimeout(total=5)) as s:
                    async with s.get(self.url + "/healthz") as resp:
                        if resp.headers.get("X-Fleet-Generation") == str(self.generation):
                            return
            except (aiohttp.ClientError, asyncio.TimeoutError):
                pass
            if self.proc is not None and self.proc.returncode is not None:
                raise RuntimeError(f"nginx exited: {(self.prefix / 'error.log').read_text(errors='replace')[-2000:]}")
            if loop.time() > deadline:
                logged = (self.prefix / "error.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"nginx did not load its config: {logged}")
            await asyncio.sleep(0.1)

    async def stop(self) -> None:
        if self.proc is not None:
            await _stop(self.proc, signal.SIGQUIT)


class BotProcess:
    """The bot in its own process (tests/e2e/fleet_bot.py), against the sandbox `sb` of this process."""

    RUNNER = ROOT / "tests" / "e2e" / "fleet_bot.py"

    def __init__(self, proc: subprocess.Popen, log: Path, web_port: int) -> None:
        self.proc, self.log, self.web_port = proc, log, web_port

    @classmethod
    def spawn(cls, sb, log: Path, *, db_url: str, shard_ids: list[int], shard_count: int,
              engine_url: str) -> BotProcess:
        from sandbox.client import env as sandbox_env

        port = free_port()
        env = os.environ | sandbox_env(sb) | {
            "FLEET_DB_URL": db_url, "FLEET_SHARD_IDS": ",".join(map(str, shard_ids)),
            "FLEET_SHARD_COUNT": str(shard_count), "FLEET_ENGINE_URL": engine_url, "FLEET_WEB_PORT": str(port)}
        with open(log, "ab") as err:
            proc = subprocess.Popen([sys.executable, str(cls.RUNNER)], cwd=ROOT, env=env, stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=err)
        return cls(proc, log, port)

    async def ready(self) -> None:
        assert self.proc.stdout is not None
        try:
            line = await asyncio.wait_for(asyncio.to_thread(self.proc.stdout.readline), START_TIMEOUT_S)
        except asyncio.TimeoutError:
            line = b""
        if line.strip() != b"READY":
            raise RuntimeError(f"bot process did not start: {self.log.read_text(errors='replace')[-3000:]}")

    async def health(self) -> dict:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as s:
            async with s.get(f"http://127.0.0.1:{self.web_port}/healthz") as resp:
                return await resp.json()

    async def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                await asyncio.to_thread(self.proc.wait, 40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                await asyncio.to_thread(self.proc.wait, 10)
