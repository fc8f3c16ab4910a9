"""Fails (exit 1, one line per problem) when requirements.lock, pyproject.toml and the installed venv disagree.

Checks: every dependency of pyproject.toml (and its test extra) is locked at a version its range admits;
every locked package is needed by pyproject.toml's dependencies, directly or through another package;
everything they need is locked; what is installed is exactly what is locked.
Run with the venv's Python after setup: `.venv/bin/python scripts/check_lock.py`.
"""

from __future__ import annotations

import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
TOOLS = {"pip"}  # installed by setup.sh itself, needed by no package


def read_lock(path: Path) -> dict[str, str]:
    pins: dict[str, str] = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        if not sep or not version:
            raise SystemExit(f"check_lock: {path.name}:{n}: expected NAME==VERSION, got {line!r}")
        pins[canonicalize_name(name)] = version.strip()
    return pins


def project_requirements(path: Path, extras: tuple[str, ...] = ("test",)) -> list[Requirement]:
    project = tomllib.loads(path.read_text())["project"]
    reqs = [Requirement(r) for r in project.get("dependencies", [])]
    for extra in extras:
        reqs += [Requirement(r) for r in project.get("optional-dependencies", {}).get(extra, [])]
    return reqs


def _applies(req: Requirement, extras: set[str]) -> bool:
    if req.marker is None:
        return True
    return any(req.marker.evaluate({"extra": e}) for e in (extras or {""}))


def needed_closure(roots: list[Requirement]) -> dict[str, set[str]]:
    """name -> extras asked for, over the installed packages' own metadata."""
    wanted: dict[str, set[str]] = {}
    todo = [(r, {""}) for r in roots]
    while todo:
        req, parent_extras = todo.pop()
        if not _applies(req, parent_extras):
            continue
        name = canonicalize_name(req.name)
        extras = set(req.extras)
        known = wanted.get(name)
        if known is not None and extras <= known:
            continue
        wanted[name] = (known or set()) | extras
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # reported by the caller as not installed
        for sub in dist.requires or []:
            todo.append((Requirement(sub), wanted[name] | {""}))
    return wanted


def problems(lock_path: Path = ROOT / "requirements.lock", pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    pins = read_lock(lock_path)
    roots = project_requirements(pyproject)
    out: list[str] = []
    for req in roots:
        name = canonicalize_name(req.name)
        if name not in pins:
            out.append(f"{req.name}: in pyproject.toml but not in requirements.lock (run `make lock`)")
        elif not req.specifier.contains(Version(pins[name]), prereleases=True):
            out.append(f"{req.name}: locked at {pins[name]}, outside pyproject.toml's range {req.specifier}")
    needed = needed_closure(roots)
    for name in sorted(set(pins) - set(needed) - TOOLS):
        out.append(f"{name}: in requirements.lock but nothing in pyproject.toml needs it")
    for name in sorted(set(needed) - set(pins)):
        out.append(f"{name}: needed by pyproject.toml's dependencies but not in requirements.lock")
    for name, version in sorted(pins.items()):
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            out.append(f"{name}: locked at {version} but not installed")
            continue
        if Version(installed) != Version(version):
            out.append(f"{name}: installed {installed}, locked {version}")
    return out


def main() -> int:
    found = problems()
    for line in found:
        print(f"check_lock: {line}", file=sys.stderr)
    if found:
        return 1
    count = len(read_lock(ROOT / "requirements.lock"))
    print(f"check_lock: requirements.lock agrees with pyproject.toml and the venv ({count} packages)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
