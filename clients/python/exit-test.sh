#!/usr/bin/env bash
# The interpreter-exit test at full size: 500 short programs with live workers, 16 at a time
# (CI runs 100 of them inside 41-python: tests/test_exit.py). Needs the 41-python venv
# (bash scripts/test.d/41-python.sh builds it) and QUEUEBOX_TEST_DATABASE_URL.
set -euo pipefail
cd "$(dirname "$0")"
QB_EXIT_RUNS="${QB_EXIT_RUNS:-500}" QB_EXIT_PARALLEL="${QB_EXIT_PARALLEL:-16}" \
  ../../.venv/python-client/bin/python -m pytest -q -s tests/test_exit.py
