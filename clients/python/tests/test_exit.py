"""The interpreter exits cleanly with live workers: many short programs, each
starting workers on a busy source (or migrating) and ending at once, none may abort. The
native runtime is stopped at exit (bindings/python/src/rt.rs says why); before that, about 1
run in 15 aborted. QB_EXIT_RUNS sets how many programs run (default 100, in parallel
batches); clients/python/exit-test.sh runs 500."""

import os
import secrets
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from queuebox_inbox import BlockingDatabase

CHILD = Path(__file__).with_name("exit_child.py")
VARIANTS = ("daemon", "async", "cancel", "migrate")


def test_the_interpreter_exits_cleanly_with_live_workers(database_url):
    runs = int(os.environ.get("QB_EXIT_RUNS", "100"))
    source = f"exit_{secrets.token_hex(3)}"
    with BlockingDatabase.connect(database_url) as db:
        # Enough rows that the workers are claiming and completing when their programs end.
        db.execute(
            "INSERT INTO inbox (id, source, idempotency_key, payload, state, created_at, scheduled_at)"
            " SELECT gen_random_uuid(), $1, 'k' || g, '{}'::jsonb, 'pending', now(), now()"
            " FROM generate_series(1, $2) g",
            [source, runs * 200],
        )

    def one(i):
        p = subprocess.run(
            [sys.executable, str(CHILD), database_url, source, VARIANTS[i % len(VARIANTS)]],
            capture_output=True, text=True, timeout=60,
        )
        return i, p.returncode, p.stderr

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=int(os.environ.get("QB_EXIT_PARALLEL", "8"))) as pool:
        results = list(pool.map(one, range(runs)))
    took = time.monotonic() - started
    bad = [(VARIANTS[i % len(VARIANTS)], rc, err[-400:]) for i, rc, err in results if rc != 0 or "Fatal" in err or "FATAL" in err]
    print(f"exit test: {runs} interpreters, {len(bad)} bad, {took:.1f} s")
    assert not bad, f"{len(bad)} of {runs} programs did not exit cleanly, e.g. {bad[:3]}"
