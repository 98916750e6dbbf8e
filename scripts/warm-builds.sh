#!/usr/bin/env bash
# Builds that late test parts need, started early in the background at idle CPU priority, so
# that they run on the cores the waiting-heavy parts leave free (brokers starting, receivers
# and chaos tests sleeping). CI's clock is what this saves: a fresh machine builds the Go
# deployment tools (minutes) and the Windows tree (the longest build after packaging) cold.
#
#   start   scripts/test.sh runs this before 20-brokers when QB_WARM_BUILDS=1 (.ci/run sets
#           it) and every part runs. In the foreground it installs the Debian packages the
#           builds need (so that the background never holds apt's lock while a part runs
#           apt-get), then starts in the background, with SCHED_IDLE and the idle I/O class:
#             deploy   52-deploy.sh --build-tools (helm, kubecheck, rulecheck)
#             windows  53-windows.sh --build (the MinGW build of the C library and the relay)
#   stop    scripts/test.sh runs this at its end: stops what is still running.
#
# Each build takes a lock that its part takes too, so a part that comes while its build still
# runs waits for it (which then has the cores to itself) and finds the build done: cargo and
# go reuse what was built. A warm build that fails fails nothing; its part builds again and
# reports. The log: $CARGO_TARGET_DIR/warm-builds.log.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-$PWD/target}
mkdir -p "$target"
pidfile=$target/warm-builds.pid
log=$target/warm-builds.log

case "${1:-}" in
  start)
    : "${QUEUEBOX_TEST_DATABASE_URL:?run through scripts/test.sh (it starts PostgreSQL)}"
    source bindings/c/tests/ffi-env.sh
    # What 53-windows --build needs; its wine comes later, in the part itself.
    ffi_need_apt x86_64-w64-mingw32-gcc gcc-mingw-w64-x86-64-posix || true
    ffi_need_apt x86_64-w64-mingw32-objdump binutils-mingw-w64-x86-64 || true
    rustup target list --installed | grep -qx x86_64-pc-windows-gnu || rustup target add x86_64-pc-windows-gnu
    : > "$log"
    # SCHED_IDLE where the machine allows it (a container may not), else only nice 19.
    idle=(nice -n 19)
    chrt --idle 0 true 2>/dev/null && idle=(chrt --idle 0 "${idle[@]}")
    ionice -c 3 true 2>/dev/null && idle=(ionice -c 3 "${idle[@]}")
    setsid "${idle[@]}" bash "$0" run >>"$log" 2>&1 </dev/null &
    echo $! > "$pidfile"
    echo "warm-builds: started (pid $!, ${idle[*]}; log $log)"
    ;;
  run)
    for b in "deploy scripts/test.d/52-deploy.sh --build-tools" "windows scripts/test.d/53-windows.sh --build"; do
      set -- $b
      t0=$(date +%s)
      echo "warm-builds: $1 started at $(date -u +%T)"
      if bash "$2" "$3"; then
        echo "warm-builds: $1 built in $(($(date +%s) - t0))s"
      else
        echo "warm-builds: $1 FAILED after $(($(date +%s) - t0))s (its part builds again)"
      fi
    done
    ;;
  stop)
    [ -f "$pidfile" ] || exit 0
    pid=$(cat "$pidfile"); rm -f "$pidfile"
    if kill -0 "$pid" 2>/dev/null; then
      echo "warm-builds: stopping what still runs (pid $pid)"
      kill -- -"$pid" 2>/dev/null || true
    fi
    grep '^warm-builds:' "$log" 2>/dev/null || true
    ;;
  *)
    echo "usage: scripts/warm-builds.sh start|stop" >&2; exit 2 ;;
esac
