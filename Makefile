# The two commands of README.md: `make run` and `make test` (the suite, about 15 minutes on 2 cores);
# `make test-slow` runs the multi-process and smoke tests marked slow. CI runs both.
.PHONY: run test test-slow lint bench sandbox lock engine-gpu

run:
	@bash scripts/setup.sh run
	.venv/bin/python run_bot.py $(ARGS)

test:
	@bash scripts/setup.sh test
	.venv/bin/python -m pytest -q -m "not slow" $(ARGS)

lint:  # ruff (style, bugs, imports) and mypy (types), as CI runs them before the tests
	@bash scripts/setup.sh test
	.venv/bin/ruff check .
	.venv/bin/mypy

test-slow:
	@bash scripts/setup.sh test
	.venv/bin/python -m pytest -q -m slow $(ARGS)

sandbox:
	@bash scripts/setup.sh run
	.venv/bin/python run_bot.py --sandbox $(ARGS)

bench:
	@bash scripts/setup.sh test
	.venv/bin/python bench/engine.py
	.venv/bin/python bench/e2e.py
	.venv/bin/python bench/voices.py

lock:  # resolve pyproject.toml anew and rewrite requirements.lock (commit both together)
	@bash scripts/lock.sh

engine-gpu:  # .venv-gpu: the GPU engine server's own environment (CosyVoice's pins); COSYVOICE_DIR=clone (docs/gpu.md)
	@bash scripts/setup_gpu.sh
