"""The /say path counted (docs/architecture.md, "The main path"): one /say with a mention, traced from
SpeechService.say(order) to StreamingEngine.stream. Not part of the suite; run it by name:

    .venv/bin/python -m pytest -q -s tests/e2e/trace_say_path.py

A stop is a call of the project's code (bot/, engine/, plugins/) handed the order, its Request or Utterance, or its
text (a string with the marker word), in the say's task or a synthesis task; a return is the path entering again a
module it had left. Prints the stops, the modules in the path's order, and both counts (every call, and only the
calls between modules)."""

from __future__ import annotations

import asyncio
import inspect
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
MARK = "zebra"
PROJECT = tuple(str(ROOT / d) + "/" for d in ("bot", "engine", "plugins"))
SYNTHESIS_TASKS = ("StreamingSource._fill", "feed")  # a source's producer (now, and before feed.py was folded in)


def _carried(value: object, order: object) -> bool:
    if value is order:
        return True
    if isinstance(value, str):
        return MARK in value
    request = getattr(value, "request", value)
    return type(value).__name__ in ("Request", "Utterance", "SayOrder") and MARK in (getattr(request, "text", "") or "")


def _handed(frame, order: object) -> bool:
    info = inspect.getargvalues(frame)
    names = [n for n in info.args if n != "self"] + [n for n in (info.varargs, info.keywords) if n]
    values = []
    for name in names:
        value = info.locals.get(name)
        values.extend(value if isinstance(value, (tuple, list)) else [value])
    return any(_carried(v, order) for v in values)


def _returns(path: list[str]) -> int:
    return sum(1 for i, module in enumerate(path) if module in path[:i])


def _path(stops: list[tuple[str, str, str]]) -> list[str]:
    path = [stops[0][1]]
    for caller, callee, _ in stops[1:]:
        if caller != path[-1]:
            path.append(caller)
        if callee != path[-1]:
            path.append(callee)
    return path


async def test_trace_the_say_path(sb, demo, bot):
    it = await sb.slash(demo.alice, demo.general, "join")
    await it.wait_text(timeout=30)
    stops: list[tuple[str, str, str]] = []
    state: dict = {"say": None, "said": False, "done": False}
    seen: set = set()

    def rel(path: str) -> str:
        return str(Path(path).relative_to(ROOT)) if path.startswith(str(ROOT)) else "?"

    def on_path() -> bool:
        task = asyncio.current_task()
        if task is None:
            return False
        if task is state["task"]:
            return not state["said"]  # after say returned, the cog's reply is not on the path
        return getattr(task.get_coro(), "__qualname__", "") in SYNTHESIS_TASKS

    def profile(frame, event, arg):
        if state["done"]:
            return
        if event == "return" and frame is state["say"] and type(arg).__name__ == "Utterance":
            state["said"] = True  # (a coroutine's other returns are its suspensions)
            return
        code = frame.f_code
        if event != "call" or not code.co_filename.startswith(PROJECT) or frame in seen:
            return  # not project code, or a coroutine resumed rather than called
        seen.add(frame)
        if state["say"] is None:
            if code.co_qualname == "SpeechService.say":
                state.update(say=frame, order=frame.f_locals.get("order"), task=asyncio.current_task())
                stops.append(("-", rel(code.co_filename), code.co_qualname))
            return
        if not on_path() or not _handed(frame, state["order"]):
            return
        stops.append((rel(frame.f_back.f_code.co_filename), rel(code.co_filename), code.co_qualname))
        state["done"] = code.co_qualname == "StreamingEngine.stream"

    sys.setprofile(profile)
    try:
        it = await sb.slash(demo.alice, demo.general, "say", text=f"A {MARK} said hello to <@{demo.alice.id}>.")
        await it.wait_text(timeout=30)
        for _ in range(600):
            if state["done"]:
                break
            await asyncio.sleep(0.05)
    finally:
        sys.setprofile(None)
    assert state["done"], "the synthesis never reached the engine's stream"
    across = [s for s in stops[1:] if s[0] != s[1]]
    path, across_path = _path(stops), _path(stops[:1] + across)
    print(f"\nstops {len(stops) - 1}, returns {_returns(path)}, modules {len(set(path))}; between modules: "
          f"stops {len(across)}, returns {_returns(across_path)}")
    for caller, callee, name in stops:
        print(f"  {caller:28} -> {callee:28} {name}")
    print("path:", " > ".join(path))
