"""python -m bench.load [--plan over|under|quick] ...: a load plan against the bot, its goals printed."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from pathlib import Path

from bench.load.drive import run
from bench.load.report import report
from bench.load.traffic import PLANS, QUICK, Dump


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="A load plan against the bot")
    ap.add_argument("--plan", choices=sorted(PLANS), default="over")
    ap.add_argument("--quick", action="store_true", help="the CI smoke plan (same as --plan quick)")
    ap.add_argument("--guilds", type=int)
    ap.add_argument("--users", type=int)
    ap.add_argument("--window", type=float, help="seconds over which the actions are sent")
    ap.add_argument("--factor", type=float, help="offered speech as a multiple of the measured capacity")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--talkers", type=int, help="members of the first guild talking in the call all along")
    ap.add_argument("--dump", type=Path, help="write each guild's items, talk spurts and bot messages here (JSON)")
    args = ap.parse_args(argv)
    Dump.entries = [] if args.dump else None
    plan = QUICK if args.quick else PLANS[args.plan]
    changes = {k: v for k, v in {"guilds": args.guilds, "users": args.users, "window_s": args.window,
                                 "factor": args.factor, "seed": args.seed,
                                 "talkers": args.talkers}.items() if v is not None}
    result = asyncio.run(run(dataclasses.replace(plan, **changes)))
    if args.dump:
        args.dump.write_text(json.dumps(Dump.entries, indent=1))
    return report(result)


if __name__ == "__main__":
    sys.exit(main())
