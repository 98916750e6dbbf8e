#!/usr/bin/env bash
# The Windows artifacts (x86_64-pc-windows-gnu, built by `scripts/package.sh windows`) run
# under Debian's wine (64-bit), against the test PostgreSQL and a receiver on loopback:
#   relay:  unpack queuebox-<v>-x86_64-pc-windows-gnu.zip in an empty directory,
#           `queuebox.exe migrate`, `queuebox.exe --config relay.example.yml run`, POST one
#           push message: the relay forwards it into the outbox and delivers it to a real
#           HTTP receiver (examples/relay-receiver.py) on 127.0.0.1; the receiver must get
#           the body and the outbox row must be sent. One pull message stays pending.
#   C:      unpack queuebox-c-<v>-x86_64-pc-windows-gnu.zip, build the C quick start
#           (tests/install/c/quickstart.c) with x86_64-w64-mingw32-gcc against the import
#           library (queuebox.dll beside the .exe, as Windows finds it) and against the
#           static library, run both: migrate, claim the row, business write, complete.
# Every .exe and .dll is also checked by scripts/pe-check.sh (Windows' own DLLs only).
# Usage: bash tests/platforms/windows.sh [DIST_DIR] (default dist/). Needs wine64 and
# mingw-w64 (scripts/test.d/53-windows.sh installs them) and QUEUEBOX_TEST_DATABASE_URL.
# Exit 77 (NOT RUN) when wine cannot start a Windows program here; any other failure is 1.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/install/lib.sh
dist=$(cd "${1:-$repo/dist}" && pwd)
version=$(grep -m1 -E '^version = "' Cargo.toml | sed -E 's/^version = "([^"]+)"$/\1/')
triple=x86_64-pc-windows-gnu
wine=/usr/lib/wine/wine64
relay_zip="$dist/relay/queuebox-$version-$triple.zip"
c_zip="$dist/c/queuebox-c-$version-$triple.zip"
for f in "$relay_zip" "$c_zip"; do
  [ -f "$f" ] || { echo "windows: $f is missing (bash scripts/package.sh windows)" >&2; exit 1; }
done
[ -x "$wine" ] || { echo "windows: NOT RUN: $wine is missing (Debian's wine64)"; exit 77; }

install_dir=$(install_workdir windows)
# A prefix of its own, so no state of another run (or of a developer's ~/.wine) is used;
# no Mono or Gecko install dialogs (mscoree, mshtml), no wine debug chatter.
export WINEPREFIX="$install_dir/prefix" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
relay_pid= recv_pid=
cleanup() {
  [ -n "$relay_pid" ] && kill "$relay_pid" 2>/dev/null
  [ -n "$recv_pid" ] && kill "$recv_pid" 2>/dev/null
  wait 2>/dev/null
  # Killed and waited for before the prefix is deleted, or it complains it cannot save it.
  wineserver -k 2>/dev/null || true
  wineserver -w 2>/dev/null || true
  install_cleanup
}
trap cleanup EXIT
t0=$(date +%s)
if ! out=$("$wine" cmd /c echo wine-ok 2>&1) || [[ "$out" != *wine-ok* ]]; then
  echo "windows: NOT RUN: wine could not start a Windows program here: $(echo "$out" | tail -3)"
  exit 77
fi
echo "windows: wine prefix ready in $(($(date +%s) - t0))s ($("$wine" --version 2>/dev/null))"
# Debian 12's wine 8 has no bcryptprimitives.dll, whose ProcessPrng Rust's std calls for random
# bytes (every Windows 10+ has it): without it no Rust program starts ("bcryptprimitives.dll
# not found", exit 53). A stand-in built from tests/platforms/bcryptprimitives.c goes into
# this prefix's system32 only, never into a package; skipped when wine has its own.
if ! ls /usr/lib/x86_64-linux-gnu/wine/x86_64-windows/bcryptprimitives.dll >/dev/null 2>&1; then
  x86_64-w64-mingw32-gcc -O2 -shared -Wall -Werror tests/platforms/bcryptprimitives.c -lbcrypt \
    -o "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll"
fi

relay_test() {
  local dir="$install_dir/relay" port recv_port got
  mkdir -p "$dir"
  python3 -m zipfile -e "$relay_zip" "$dir"
  dir="$dir/queuebox-$version-$triple"
  for f in queuebox.exe LICENSE relay.example.yml migrations/postgres/0001_create_outbox.sql; do
    [ -e "$dir/$f" ] || { echo "windows: the relay zip has no $f" >&2; return 1; }
  done
  bash "$repo/scripts/pe-check.sh" "$dir/queuebox.exe"
  cd "$dir"
  install_db relay
  port=$((20000 + RANDOM % 20000)); recv_port=$((port + 1))
  python3 "$repo/examples/relay-receiver.py" "$recv_port" >"$install_dir/receiver.log" &
  recv_pid=$!
  export QB_DEMO_DATABASE_URL="$install_db_url" QB_DEMO_PORT=$port QB_DEMO_RECEIVER="http://127.0.0.1:$recv_port"
  "$wine" queuebox.exe --version
  "$wine" queuebox.exe migrate --database-url "$install_db_url"
  "$wine" queuebox.exe --config relay.example.yml run >"$install_dir/relay.log" 2>&1 &
  relay_pid=$!
  for _ in $(seq 600); do curl -fs "http://127.0.0.1:$port/health/ready" >/dev/null && break; sleep 0.1; done
  curl -fsS -H 'Content-Type: application/json' -d '{"id":"win-1","type":"created","orderId":"o-1","total":42}' \
    "http://127.0.0.1:$port/inbox/orders"; echo
  curl -fsS -H 'X-Job-Id: win-2' -d '{"total": 7}' "http://127.0.0.1:$port/inbox/jobs"; echo
  got=""
  for _ in $(seq 300); do
    got=$(psql "$install_db_url" -X -tA -c "
      SELECT (SELECT string_agg(topic || ' ' || state, ',') FROM outbox)
          || ' / ' || (SELECT consumption || ' ' || state FROM inbox WHERE source = 'jobs' AND idempotency_key = 'win-2')")
    [ "$got" = "orders.created sent / pull pending" ] && grep -q '"orderId": "o-1"' "$install_dir/receiver.log" && break
    sleep 0.1
  done
  if [ "$got" != "orders.created sent / pull pending" ] || ! grep -q '"orderId": "o-1"' "$install_dir/receiver.log"; then
    echo "windows: relay: expected 'orders.created sent / pull pending' and the order at the receiver; got '$got', receiver: $(cat "$install_dir/receiver.log")" >&2
    tail -20 "$install_dir/relay.log" >&2
    return 1
  fi
  kill "$relay_pid"; wait "$relay_pid" 2>/dev/null || true; relay_pid=
  ffi_drop_db "$install_db_name"; install_db_name=
  echo "windows: queuebox.exe under wine migrated, stored a push and a pull message, and delivered the push one to the receiver: $(head -1 "$install_dir/receiver.log")"
  cd "$repo"
}

c_test() {
  local dir="$install_dir/c" kind exe
  mkdir -p "$dir"
  python3 -m zipfile -e "$c_zip" "$dir"
  dir="$dir/queuebox-c-$version-$triple"
  for f in include/queuebox.h bin/queuebox.dll lib/libqueuebox.dll.a lib/libqueuebox.a lib/queuebox.def lib/pkgconfig/queuebox.pc; do
    [ -e "$dir/$f" ] || { echo "windows: the C zip has no $f" >&2; return 1; }
  done
  bash "$repo/scripts/pe-check.sh" "$dir/bin/queuebox.dll" qb_version qb_runtime_new qb_worker_new_blocking
  mkdir -p "$dir/run"
  cp "$dir/bin/queuebox.dll" "$dir/run/"
  # With the import library (-lqueuebox: MinGW's ld takes libqueuebox.dll.a first; the DLL
  # beside the program, where Windows looks first), and statically with the Windows
  # libraries the package's queuebox.pc lists (Libs.private).
  x86_64-w64-mingw32-gcc -std=c11 -Wall -Werror -I"$dir/include" tests/install/c/quickstart.c \
    -o "$dir/run/quickstart-dll.exe" -L"$dir/lib" -lqueuebox
  # shellcheck disable=SC2046
  x86_64-w64-mingw32-gcc -std=c11 -Wall -Werror -I"$dir/include" tests/install/c/quickstart.c \
    -o "$dir/run/quickstart-static.exe" "$dir/lib/libqueuebox.a" \
    $(sed -n 's/^Libs.private: //p' "$dir/lib/pkgconfig/queuebox.pc") -static
  bash "$repo/scripts/pe-check.sh" "$dir/run/quickstart-static.exe"
  for kind in dll static; do
    exe="quickstart-$kind.exe"
    install_db "c_$kind"
    (cd "$dir/run" && "$wine" "$exe" migrate "$install_db_url")
    install_seed "$install_db_url"
    (cd "$dir/run" && "$wine" "$exe" work "$install_db_url")
    install_verify "$install_db_url" "windows-c-$kind"
    ffi_drop_db "$install_db_name"; install_db_name=
  done
}

relay_test
c_test
echo "windows: passed in $(($(date +%s) - t0))s"
