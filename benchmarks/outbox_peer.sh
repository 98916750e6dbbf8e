#!/usr/bin/env bash
# Outbox relay vs a peer outbox relay and the bare-SQL ceiling (issue 21, "The outbox relay"):
# pre-inserted outbox rows drained to NATS JetStream, same PostgreSQL, same NATS, same run.
#   queuebox : the real `queuebox` binary (release), default outbox settings (concurrency
#              unset: 64 publishes in flight to a broker, 8 before 2026-12-05 night;
#              batchSize unset: claims of 100 to 1,000 rows as the batches allow, a fixed
#              100 before 2026-12-05, late) except outbox.batchSize when a cell sets a
#              batch; one NATS destination (JetStream, acked) and a route for every topic.
#   peer     : benchmarks/outbox-peer -mode peer: LOOPS loops, each claims BATCH rows
#              FOR UPDATE SKIP LOCKED in a transaction, publishes them one at a time to
#              JetStream waiting for each ack, UPDATEs each sent, commits.
#   ceiling  : benchmarks/outbox-peer -mode ceiling: the same claim, no publish, the batch
#              marked sent in one UPDATE, LOOPS loops.
#   jsonly   : the broker alone, no database: ROWS messages like the peer's published to the
#              same stream asynchronously (at most 256 unacknowledged), timed by the program.
# peer@l<N> / ceiling@l<N> run them with N loops instead of LOOPS; peer@b<N> / ceiling@b<N>
# claim N rows whatever the cell's batch (e.g. the ceiling at QueueBox's adapted 1,000).
# Each drain gets a fresh database (migrated by the queuebox binary) and an empty stream.
# Rate = rows / (last row's sent mark (updated_at, database clock) - the moment the process
# was started): process start-up is inside every drain. A drain stops after LIMIT seconds.
# Database CPU per row = user + system time of the drainer's server backends (/proc, so the
# script must run on the database's machine), sampled every 0.5 s while it runs; process CPU
# per row = the drainer's own; NATS CPU per row = the nats-server's (ours alone) over the drain. Transactions per row from pg_stat_database.xact_commit minus
# the script's polls. Rounds rotate the order of the implementations.
# Usage: bash benchmarks/outbox_peer.sh
#   env: ROWS (100000) ROUNDS (3) CELLS ("0xauto": keys x batch, keys 0 = rows without a key;
#        batch "auto" leaves outbox.batchSize unset and gives the peer and the ceiling
#        AUTO_BATCH (100), a number sets it for everyone)
#        LOOPS (8: the peer's and the ceiling's loops, QueueBox's default concurrency)
#        IMPLS ("queuebox peer ceiling"; queuebox=<path> adds a labelled binary, e.g.
#        "before=/tmp/qb-old queuebox peer ceiling"; a trailing @c<N> sets outbox.concurrency,
#        "qbc64=target/release/queuebox@c64") LIMIT (240) TAG (the date)
#        QB_BIN (target/release/queuebox; not rebuilt here)
# Writes benchmarks/results/outbox-peer-<TAG>.json; the write-up is benchmarks/outbox.md.
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS="${ROWS:-100000}" ROUNDS="${ROUNDS:-3}" CELLS="${CELLS:-0xauto}" LOOPS="${LOOPS:-8}"
AUTO_BATCH="${AUTO_BATCH:-100}"
IMPLS="${IMPLS:-queuebox peer ceiling}" LIMIT="${LIMIT:-240}" TAG="${TAG:-$(date -u +%Y-%m-%d)}"
QB_BIN="$(realpath "${QB_BIN:-target/release/queuebox}")"
[ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH"

source scripts/postgres.sh start >/dev/null
server="${QUEUEBOX_TEST_DATABASE_URL%/*}"
# A NATS server of our own (port, store), so broker tests running meanwhile do not share it.
export QB_BROKERS_DIR="${QB_OUTBOX_PEER_NATS_DIR:-/tmp/qb-outbox-peer}" QB_NATS_PORT="${QB_OUTBOX_PEER_NATS_PORT:-54322}"
bash scripts/brokers.sh start nats >/dev/null
# Stopped on exit: left running it costs the next benchmark ~10 % of a core.
trap 'bash scripts/brokers.sh stop nats >/dev/null 2>&1 || true' EXIT
nats_url="nats://127.0.0.1:$QB_NATS_PORT"

work="target/outbox-peer"; mkdir -p "$work"
(cd benchmarks/outbox-peer && go build -o "../../$work/outbox-peer" .)
peer="$(realpath "$work/outbox-peer")"
raw="$work/drains-$TAG.tsv"; : >"$raw"

q() { psql "$1" -X -qtA -c "$2"; }

# backend_ticks <db> <pid...>: "pid ticks" of each live pid.
proc_ticks() {
  local p f
  for p in "$@"; do
    f=$(cat "/proc/$p/stat" 2>/dev/null) || continue
    f=${f##*) }; set -- $f
    echo "$p $(( ${12} + ${13} ))"
    shift $#
  done
}

# drain <label> <keys> <batch> <round>
drain() {
  local label=$1 keys=$2 batch=$3 round=$4 bin="$QB_BIN" kind=$1 conc="" path loops=$LOOPS
  case "$kind" in *@l*) loops="${kind##*@l}"; kind="${kind%@l*}" ;; esac
  case "$label" in
    *=*) path="${label#*=}"; label="${label%%=*}"; kind=queuebox
         case "$path" in *@c*) conc="${path##*@c}"; path="${path%@c*}" ;; esac
         bin="$(realpath "$path")" ;;
  esac
  local db="qb_opeer_$(head -c4 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  q "$server/postgres" "CREATE DATABASE $db" >/dev/null
  local url="$server/$db" cfg="$work/$db.yaml" port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  local batch_line="" set_batch="" peer_batch=$batch
  # A cell's number is everyone's batch; "auto" is QueueBox's default and the others' AUTO_BATCH.
  if [ "$batch" = auto ]; then peer_batch=$AUTO_BATCH; else set_batch=$batch; fi
  case "$kind" in *@b*) peer_batch="${kind##*@b}"; kind="${kind%@b*}" ;; esac
  if [ -n "$set_batch" ] || [ -n "$conc" ]; then
    batch_line="outbox:${set_batch:+
  batchSize: $set_batch}${conc:+
  concurrency: $conc}"
  fi
  cat >"$cfg" <<YAML
server:
  httpPort: $port
  bindAddress: 127.0.0.1
database:
  url: $url
$batch_line
inbox:
  relay:
    enabled: false
destinations:
  js:
    type: nats
    servers: $nats_url
    subject: qbbench.orders
routes:
  - topicPattern: '**'
    destination: js
YAML
  env -u QUEUEBOX_CONFIG_FILE RUST_LOG=error "$bin" --config "$cfg" migrate >/dev/null
  "$peer" -mode stream -nats "$nats_url"
  q "$url" "INSERT INTO outbox (topic, key, payload)
            SELECT 'orders', CASE WHEN $keys = 0 THEN NULL ELSE 'k' || (g % $keys) END,
                   jsonb_build_object('n', g, 'customer', 'c' || (g % 997), 'amount', g * 3)
              FROM generate_series(1, $ROWS) g" >/dev/null
  q "$url" "VACUUM ANALYZE outbox" >/dev/null
  q "$url" "CHECKPOINT" >/dev/null
  sleep 1.2  # our statements' stats are flushed
  local x0 load t0 t_end secs pid polls=0 sent=0 pids ticks_proc=0
  x0=$(q "$server/postgres" "SELECT xact_commit FROM pg_stat_database WHERE datname = '$db'")
  load=$(cut -d' ' -f1 /proc/loadavg)
  declare -A bt=()
  local nats0 nats1
  read -r _ nats0 < <(proc_ticks "$(cat "$QB_BROKERS_DIR/nats/server.pid")")
  t0=$(date +%s.%N)
  if [ "$kind" = jsonly ]; then
    read -r sent secs < <("$peer" -mode jsonly -nats "$nats_url" -n "$ROWS")
    t_end=$(python3 -c "print($t0 + $secs)")
  else
    case "$kind" in
      queuebox) env -u QUEUEBOX_CONFIG_FILE RUST_LOG=error "$bin" --config "$cfg" run >"$work/$db.log" 2>&1 & ;;
      peer) "$peer" -mode peer -db "$url" -nats "$nats_url" -batch "$peer_batch" -loops "$loops" >"$work/$db.log" 2>&1 & ;;
      ceiling) "$peer" -mode ceiling -db "$url" -batch "$peer_batch" -loops "$loops" >"$work/$db.log" 2>&1 & ;;
      *) echo "unknown implementation $kind" >&2; exit 2 ;;
    esac
    pid=$!
    while :; do
      sleep 0.5
      read -r sent pids < <(q "$url" "SELECT (SELECT count(*) FROM outbox WHERE state = 'sent'),
          (SELECT coalesce(string_agg(pid::text, ' '), '') FROM pg_stat_activity
            WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid())" | tr '|' ' ')
      polls=$((polls + 1))
      # shellcheck disable=SC2086
      while read -r p t; do [ -n "$p" ] && [ "${bt[$p]:-0}" -lt "$t" ] && bt[$p]=$t; done < <(proc_ticks $pids)
      read -r _ t < <(proc_ticks "$pid") && ticks_proc=$t
      if [ "$sent" -ge "$ROWS" ] || (( $(date +%s) - ${t0%.*} >= LIMIT )); then break; fi
    done
    kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
    t_end=$(q "$url" "SELECT extract(epoch FROM max(updated_at)) FROM outbox WHERE state = 'sent'")
    sent=$(q "$url" "SELECT count(*) FROM outbox WHERE state = 'sent'")
  fi
  read -r _ nats1 < <(proc_ticks "$(cat "$QB_BROKERS_DIR/nats/server.pid")")
  local msgs=0 db_ticks=0 v
  [ "$kind" != ceiling ] && msgs=$("$peer" -mode count -nats "$nats_url")
  for v in "${bt[@]}"; do db_ticks=$((db_ticks + v)); done
  sleep 1.2  # exited backends flush their stats
  local x1
  x1=$(q "$server/postgres" "SELECT xact_commit FROM pg_stat_database WHERE datname = '$db'")
  q "$server/postgres" "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
  rm -f "$cfg"; [ -s "$work/$db.log" ] || rm -f "$work/$db.log"
  # Polls: the loop's, plus the three end queries above.
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$keys" "$batch" "$round" \
    "$t0" "$t_end" "$sent" "$msgs" "$db_ticks" "$ticks_proc" "$((x1 - x0 - polls - 2))" "$load" "$((nats1 - nats0))" >>"$raw"
  python3 - "$label" "$keys" "$batch" "$round" "$t0" "$t_end" "$sent" "$msgs" "$db_ticks" "$ticks_proc" "$load" "$((nats1 - nats0))" <<'PY' >&2
import sys
l, k, b, r, t0, te, sent, msgs, dbt, pt, load, nt = sys.argv[1:]
s = float(te) - float(t0) if te else float("nan")
print(f"{l:>10} keys={k} batch={b} round={r}: {int(sent)/s:8.0f} rows/s ({sent} sent, {msgs} in stream, {s:.1f} s), "
      f"db cpu {int(dbt)*1e4/max(int(sent),1):.0f} us/row, process cpu {int(pt)*1e4/max(int(sent),1):.0f} us/row, "
      f"nats cpu {int(nt)*1e4/max(int(sent),1):.0f} us/row, load {load}")
PY
}

impls=($IMPLS)
for cell in $CELLS; do
  keys=${cell%x*} batch=${cell#*x}
  for ((r = 0; r < ROUNDS; r++)); do
    # Rotate: round r starts with implementation r mod n.
    for ((i = 0; i < ${#impls[@]}; i++)); do
      drain "${impls[$(( (i + r) % ${#impls[@]} ))]}" "$keys" "$batch" "$r"
    done
  done
done

out="benchmarks/results/outbox-peer-$TAG.json"
python3 - "$raw" "$out" "$ROWS" "$ROUNDS" "$LOOPS" "$LIMIT" "$IMPLS" "$(nproc)" "$AUTO_BATCH" <<'PY'
import json, statistics, sys, collections
raw, out, rows, rounds, loops, limit, impls, cpus, auto_batch = sys.argv[1:]
cells = collections.OrderedDict()
for line in open(raw):
    l, k, b, r, t0, te, sent, msgs, dbt, pt, xacts, load, nt = line.rstrip("\n").split("\t")
    sent = int(sent); secs = float(te) - float(t0)
    d = {"round": int(r), "rowsPerSecond": round(sent / secs), "sent": sent, "seconds": round(secs, 2),
         "messagesInStream": int(msgs), "dbCpuMicrosPerRow": round(int(dbt) * 1e4 / max(sent, 1)),
         "processCpuMicrosPerRow": round(int(pt) * 1e4 / max(sent, 1)),
         "natsCpuMicrosPerRow": round(int(nt) * 1e4 / max(sent, 1)),
         "xactsPerRow": round(max(int(xacts), 0) / max(sent, 1), 3), "loadAverage1m": float(load)}
    cells.setdefault((int(k), b if b == "auto" else int(b)), collections.OrderedDict()).setdefault(l, []).append(d)
result = []
for (k, b), by in cells.items():
    cell = {"keys": k, "batch": b}
    med = {}
    for l, ds in by.items():
        m = {f: statistics.median(d[f] for d in ds) for f in ("rowsPerSecond", "dbCpuMicrosPerRow", "processCpuMicrosPerRow", "natsCpuMicrosPerRow", "xactsPerRow")}
        med[l] = m["rowsPerSecond"]
        cell[l] = {**m, "rounds": ds}
    # Ratios of medians, and per round (same round = nearest in time).
    for a in med:
        for base in [x for x in med if x.startswith(("peer", "ceiling"))]:
            if a != base and base in med and not a.startswith(("peer", "ceiling", "jsonly")):
                cell[f"{a}Over{base.capitalize()}"] = round(med[a] / med[base], 2)
                cell[f"{a}Over{base.capitalize()}PerRound"] = [round(x["rowsPerSecond"] / y["rowsPerSecond"], 2)
                    for x, y in zip(sorted(by[a], key=lambda d: d["round"]), sorted(by[base], key=lambda d: d["round"]))]
    if "before" in med and "queuebox" in med:
        cell["queueboxOverBefore"] = round(med["queuebox"] / med["before"], 2)
        cell["queueboxOverBeforePerRound"] = [round(x["rowsPerSecond"] / y["rowsPerSecond"], 2)
            for x, y in zip(sorted(by["queuebox"], key=lambda d: d["round"]), sorted(by["before"], key=lambda d: d["round"]))]
    if "peer" in med and "ceiling" in med:
        cell["peerOverCeiling"] = round(med["peer"] / med["ceiling"], 2)
    result.append(cell)
    print(json.dumps({kk: v for kk, v in cell.items() if not isinstance(v, dict)}), file=sys.stderr)
loads = [d["loadAverage1m"] for by in cells.values() for ds in by.values() for d in ds]
doc = {"benchmark": "outbox relay drain to NATS JetStream: queuebox vs a Go peer relay vs the bare-SQL ceiling (issue 21)",
       "command": "bash benchmarks/outbox_peer.sh",
       "settings": {"rows": int(rows), "rounds": int(rounds), "statistic": "median", "loops": int(loops),
                    "secondsLimit": int(limit), "implementations": impls, "cpus": int(cpus),
                    "queuebox": "release binary, default outbox settings (batchSize unset: 100 to 1,000 rows per claim as the batches allow, a fixed 100 before 2026-12-05 late; concurrency unset: up to 64 publishes in flight, 8 before 2026-12-05 night) except batchSize when the cell's batch is a number; JetStream destination, acked",
                    "autoBatch": "cells with batch 'auto' leave QueueBox's batchSize unset; the peer and the ceiling claim %s rows" % auto_batch,
                    "peer": "benchmarks/outbox-peer -mode peer: loops x (BEGIN; SELECT batch FOR UPDATE SKIP LOCKED; per row: JetStream publish, await ack, UPDATE sent; COMMIT), Nats-Msg-Id = row id",
                    "ceiling": "benchmarks/outbox-peer -mode ceiling: loops x (BEGIN; same SELECT; one UPDATE sent WHERE id = ANY; COMMIT), no publish",
                    "jsonly": "benchmarks/outbox-peer -mode jsonly: the same messages published to JetStream asynchronously (256 unacknowledged at most), no database",
                    "rate": "rows / (max(updated_at) of sent rows - process start); jsonly: its own timer",
                    "natsCpu": "user+system time of the nats-server process (this benchmark's own) during the drain",
                    "dbCpu": "user+system time of the drainer's PostgreSQL backends (/proc), sampled every 0.5 s"},
       "loadAverage1m": {"min": min(loads), "max": max(loads), "mean": round(sum(loads) / len(loads), 2)},
       "cells": result}
open(out, "w").write(json.dumps(doc, indent=2) + "\n")
print("wrote " + out, file=sys.stderr)
PY
