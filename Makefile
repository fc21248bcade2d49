# Headwater developer entry points.
#   make start [ARGS="--data-dir data --port 6544"]   run the server
#   make test  [PYTEST_ARGS="-k jdbc"]                 full test suite (CI runs this)
#   make lint                                          ruff
.PHONY: start test lint setup

SHELL := /bin/bash
PY := .venv/bin/python
ARGS ?=
PYTEST_ARGS ?=
# A test (setup + call + teardown) running longer than TEST_TIMEOUT seconds dumps every
# thread's stack and ends the run with a failure (pytest's faulthandler, no plugin).
TEST_TIMEOUT ?= 600
# Hard limit for the whole run, below CI's 90 minutes.
TEST_TOTAL_TIMEOUT ?= 4800
# Test modules run on this many pytest-xdist workers at once, a module on one worker
# (its server and JVM stay one per module); most of a module's time is waiting for a
# JVM, a server or an epoch, so two halve the suite on 2 cores. 0: one process.
TEST_WORKERS ?= 2

setup:
	scripts/setup.sh

start:
	scripts/setup.sh --server-only
	.venv/bin/headwater start $(ARGS)

test:
	scripts/setup.sh
	@rc=0; timeout --signal=TERM --kill-after=30 $(TEST_TOTAL_TIMEOUT) \
	    $(PY) -m pytest -x -q --durations=40 -n $(TEST_WORKERS) --dist loadfile \
	    -o faulthandler_timeout=$(TEST_TIMEOUT) -o faulthandler_exit_on_timeout=true \
	    $(PYTEST_ARGS) || rc=$$?; \
	case $$rc in \
	    0) ;; \
	    5) echo "make test: FAILED: pytest collected no tests" >&2 ;; \
	    124|137) echo "make test: FAILED: run exceeded $(TEST_TOTAL_TIMEOUT)s" >&2 ;; \
	    *) echo "make test: FAILED (pytest exit $$rc; a test over $(TEST_TIMEOUT)s prints Timeout and the stacks above)" >&2 ;; \
	esac; \
	exit $$rc

lint:
	scripts/setup.sh --venv-only
	.venv/bin/ruff check .
