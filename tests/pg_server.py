"""Starts a throwaway PostgreSQL server on loopback for the test session (or uses VOICEBOT_TEST_PG_URL)."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass


@dataclass
class PgServer:
    url: str  # postgresql+asyncpg://...
    stop: callable


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bin_dir() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def start() -> tuple[PgServer | None, str]:
    """A running server and '' or None and the reason none could be started."""
    if os.environ.get("VOICEBOT_TEST_PG_URL"):
        return PgServer(os.environ["VOICEBOT_TEST_PG_URL"], lambda: None), ""
    bindir = _bin_dir()
    if bindir is None:
        return None, "PostgreSQL is not installed (apt-get install postgresql) and VOICEBOT_TEST_PG_URL is unset"
    run_as: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return None, "running as root and there is no 'postgres' user to run the server"
        run_as = ["runuser", "-u", "postgres", "--"]
    base = tempfile.mkdtemp(prefix="voicebot-pg-")
    os.chmod(base, 0o777)
    data = os.path.join(base, "data")
    port = _free_port()
    env = {**os.environ, "LC_ALL": "C"}
    try:
        subprocess.run([*run_as, f"{bindir}/initdb", "-D", data, "-A", "trust", "-U", "postgres"],
                       check=True, capture_output=True, env=env, timeout=120)
        subprocess.run(
            [*run_as, f"{bindir}/pg_ctl", "-D", data, "-l", os.path.join(base, "log"), "-w", "-t", "60", "-o",
             f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off", "start"],
            check=True, capture_output=True, env=env, timeout=90,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        shutil.rmtree(base, ignore_errors=True)
        detail = getattr(exc, "stderr", b"") or b""
        return None, f"could not start PostgreSQL: {exc} {detail.decode(errors='replace')[-300:]}"

    def stop() -> None:
        subprocess.run([*run_as, f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "stop"],
                       capture_output=True, timeout=60)
        shutil.rmtree(base, ignore_errors=True)

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.2)
    return PgServer(f"postgresql+asyncpg://postgres@127.0.0.1:{port}/postgres", stop), ""
