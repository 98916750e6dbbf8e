#!/usr/bin/env bash
# The README's test command: installs and starts what the tests need, then runs every
# part in scripts/test.d/ in name order (each part owns one component: Rust, C ABI, Go,
# C#, Node, Python, brokers). Exits non-zero if any part fails.
set -uo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
# shellcheck source=scripts/postgres.sh
source scripts/postgres.sh start
set +e  # postgres.sh sets -e; a failing part must not stop the others
export QUEUEBOX_TEST_DATABASE_URL
# The relay links librdkafka (Kafka source/destination): every part that builds it needs it.
bash scripts/brokers.sh deps
pass=0; fail=0; notrun=0; failed=(); skipped=()
only="${QB_TEST_ONLY:-}"
# Each part's output is also kept, so the end of the run can repeat why each failed part
# failed: CI keeps only the end of a long log, where a part's own failure report (a fuzz
# find, a build error) is otherwise buried under the parts that ran after it.
logs="$(mktemp -d)"
for part in scripts/test.d/*.sh; do
  [ -n "$only" ] && [[ "$part" != *"$only"* ]] && continue
  # CI (.ci/run): the last parts' builds start here, at idle priority, on the cores that the
  # parts from 20-brokers on leave free (scripts/warm-builds.sh); never for a subset of the
  # parts (QB_TEST_ONLY), and if they fail to start, their parts build as before.
  if [ -n "${QB_WARM_BUILDS:-}" ] && [ -z "$only" ] && [[ "$part" == */20-* ]]; then
    bash scripts/warm-builds.sh start || echo "=== the warm builds did not start; their parts build"
  fi
  echo "=== test part $part"
  t0=$(date +%s)
  log="$logs/$(basename "$part").log"
  : > "$log"
  # Exit status 77 (automake's "skipped") means the part could not run here (a server it
  # needs is not configured): counted as not run, never as passed.
  bash "$part" > >(tee -a "$log") 2> >(tee -a "$log" >&2)
  status=$?
  if [ "$status" -eq 0 ]; then
    pass=$((pass+1))
  elif [ "$status" -eq 77 ]; then
    notrun=$((notrun+1)); skipped+=("$part")
  else
    fail=$((fail+1)); failed+=("$part")
  fi
  # The part's test databases are dropped, so they never add up over the run.
  bash scripts/postgres.sh clean || echo "=== could not drop the test databases after $part"
  # The disk left after each part, and the biggest users: a full disk fails builds with
  # messages that name anything.
  echo "=== test part $part finished in $(( $(date +%s) - t0 ))s ($(df -h --output=avail . | tail -1 | tr -d ' ') free;" \
    "$(du -sh "${CARGO_TARGET_DIR:-target}" fuzz/target "$QB_PG_DIR" 2>/dev/null | awk '{printf "%s %s  ", $2, $1}'))"
done
[ -n "${QB_WARM_BUILDS:-}" ] && bash scripts/warm-builds.sh stop
for part in "${failed[@]}"; do
  echo "=== why $part failed (its last 40 lines):"
  tail -n 40 "$logs/$(basename "$part").log"
done
rm -rf "$logs"
[ ${#failed[@]} -gt 0 ] && echo "failed parts: ${failed[*]}"
[ ${#skipped[@]} -gt 0 ] && echo "parts NOT RUN: ${skipped[*]}"
echo "parts: $pass passed, $fail failed, $notrun not run"
[ "$fail" -eq 0 ]
