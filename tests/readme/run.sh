#!/usr/bin/env bash
# The README's shell steps, run as a newcomer would type them: every ```sh block after the
# two set-up commands (which are this suite itself), line by line, against a fresh database.
# Only the database name and the two ports are swapped (8080 and 9099 may be taken here); a
# line that starts something in the background (`... &`) is followed by a wait for its port,
# as a person waits before typing the next line. Between the steps, the README's Rust quick
# start (core/examples/quick_start.rs, the README's copy kept equal by a core test) runs as
# "your first worker".
#
# Checks what the README promises: the job POST answers 202 and the row turns `processed`
# with its id in `jobs_done`; the same X-Job-Id again is a duplicate; the push event reaches
# the receiver with `x-source: orders`, the spoofed `X-SOURCE` replaced.
#
# Needs: QUEUEBOX_TEST_DATABASE_URL (a PostgreSQL superuser URL), QUEUEBOX_BIN, psql, curl, python3.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${QUEUEBOX_TEST_DATABASE_URL:?}" "${QUEUEBOX_BIN:?}"
admin_url=$QUEUEBOX_TEST_DATABASE_URL bin=$QUEUEBOX_BIN
# The relay reads every QUEUEBOX_* variable as configuration (and refuses unknown ones): a
# newcomer's shell has none of the test suite's.
unset QUEUEBOX_TEST_DATABASE_URL QUEUEBOX_BIN
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "README shell steps: FAILED: $*" >&2; for f in "$work"/*.log; do [ -e "$f" ] && { echo "--- $f"; tail -20 "$f"; }; done >&2; exit 1; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { # wait_port <port> [pid]: until the port answers, or the process exits
  for _ in $(seq 1 300); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    [ -z "${2:-}" ] || kill -0 "$2" 2>/dev/null || fail "the process meant to listen on port $1 exited"
    sleep 0.05
  done
  fail "nothing listens on port $1 after 15 s"
}
until_sql() { # until_sql <expected> <query>: polls for up to 20 s
  for _ in $(seq 1 400); do [ "$(psql "$db" -tAc "$2")" = "$1" ] && return 0; sleep 0.05; done
  fail "expected '$1' from: $2 (got '$(psql "$db" -tAc "$2")')"
}

# The README's ```sh blocks; the first is the two set-up commands.
mapfile -d '' blocks < <(python3 -c 'import re, sys; sys.stdout.write("".join(b + "\0" for b in re.findall(r"^```sh\n(.*?)^```$", open("README.md").read(), re.S | re.M)))')
[ "${#blocks[@]}" -eq 4 ] || fail "README.md has ${#blocks[@]} sh blocks; this test knows 4 (set-up, from here on, the first job, push)"
[[ ${blocks[0]} == *scripts/demo.sh* && ${blocks[0]} == *scripts/test.sh* ]] || fail "the first sh block is not the two set-up commands"

psql "$admin_url" -qc "DROP DATABASE IF EXISTS queuebox_readme WITH (FORCE)" -qc "CREATE DATABASE queuebox_readme"
http_port=$(free_port)
receiver_port=$(free_port)
# The README's relay.yml reads these; the README leaves them at their defaults (8080, 9099).
export QB_DEMO_PORT=$http_port QB_DEMO_RECEIVER=http://127.0.0.1:$receiver_port
ln -sfn "$bin" "$work/queuebox"

# Runs one README block line by line in this shell (so `export` carries over), with the swaps.
run_block() {
  local line
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    line=${line//postgres:\/\/postgres@127.0.0.1:55432\/queuebox_demo/${admin_url%/*}/queuebox_readme}
    line=${line//:8080\//:$http_port/}
    line=${line//target\/debug\/queuebox/$work/queuebox}
    echo "+ $line"
    if [[ $line =~ \&[[:space:]]*$ ]]; then
      eval "${line%&*} >>\"\$work/relay.log\" 2>&1 &"
      pids+=($!)
      wait_port "$http_port" "$!"
    else
      eval "$line" >>"$work/out.log" 2>&1 || fail "the README line failed: $line"
      tail -1 "$work/out.log"
    fi
  done <<<"$1"
}

# 1. From here on: DATABASE_URL, migrate, the handlers' table.
run_block "${blocks[1]}"
db=$DATABASE_URL
[[ $db == */queuebox_readme ]] || fail "the README's export did not set DATABASE_URL to the swapped URL: $db"
until_sql "1" "SELECT count(*) FROM information_schema.tables WHERE table_name = 'jobs_done'"

# 2. Your first worker: the README's Rust quick start, built as `cargo run --example` would.
cargo build --quiet -p queuebox-core --example quick_start
DATABASE_URL=$db "${CARGO_TARGET_DIR:-target}/debug/examples/quick_start" >"$work/worker.log" 2>&1 &
pids+=($!)
python3 examples/relay-receiver.py "$receiver_port" >"$work/receiver.log" 2>&1 &
pids+=($!)
wait_port "$receiver_port"

# The relay, the job's POST, the psql look.
run_block "${blocks[2]}"
grep -q '"messageId"' "$work/out.log" || fail "the job POST printed no messageId (202 Accepted's body)"
until_sql "processed" "SELECT state FROM inbox WHERE source = 'jobs' AND idempotency_key = 'job-1'"
until_sql "1" "SELECT count(*) FROM jobs_done j JOIN inbox i ON i.id = j.id WHERE i.idempotency_key = 'job-1'"
again=$(curl -s -w ' %{http_code}' -H 'X-Job-Id: job-1' -d '{"task":"resize"}' "http://127.0.0.1:$http_port/inbox/jobs")
[[ $again == *'"status":"duplicate"'*' 200' ]] || fail "the same X-Job-Id again answered '$again', not the README's 200 {\"status\":\"duplicate\"}"

# 4. A push source: the event reaches the receiver with the relay's own x-source.
run_block "${blocks[3]}"
for _ in $(seq 1 400); do grep -q 'evt-1' "$work/receiver.log" && break; sleep 0.05; done
grep 'evt-1' "$work/receiver.log" | python3 -c '
import json, sys
d = json.loads(sys.stdin.readline())
h = {k.lower(): v for k, v in d["headers"].items()}
assert h.get("x-source") == "orders", h
assert d["body"]["orderId"] == "o-42", d
' || fail "the receiver did not get evt-1 with x-source: orders"
echo "README shell steps: passed (3 blocks, $(grep -c '^' "$work/out.log") output lines; job processed, duplicate refused, push delivered with x-source replaced)"
