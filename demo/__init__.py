"""The bot against the local Discord stand-in (sandbox/): `run_bot.py --sandbox`, e2e tests and benchmarks."""
