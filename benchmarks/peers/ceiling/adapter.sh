#!/usr/bin/env bash
# The bare-SQL ceiling as a peers adapter (issue 21): pgbench runs claim_complete.sql (a plain
# SKIP LOCKED claim of a batch, then one UPDATE completing it) with CONC clients on QueueBox's
# own inbox table, with the batch the QueueBox adapter's worker uses (the core's default for
# CONC handlers, or QB_BATCH; `queuebox-peers-bench batch CONC`). Same CLI as the other
# adapters, drain and enqueue only (see harness.py):
#   drain URL N CONC | enqueue URL N
# Migrations and rows come from the QueueBox adapter's `enqueue` (same schema, same rows).
# Timed from just before pgbench starts (database clock) to the last row's processed_at, so
# the empty claims of clients that run past the end are not counted.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
qb="${PEERS_BIN:?}/queuebox-peers-bench"
mode=$1 url=$2
case "$mode" in
  enqueue) exec "$qb" enqueue "$url" "$3" ;;
  drain) ;;
  *) echo "ceiling: mode $mode not supported (drain, enqueue)" >&2; exit 2 ;;
esac
n=$3 conc=$4
batch=$("$qb" batch "$conc")
"$qb" enqueue "$url" "$n"
psql "$url" -X -q -c "VACUUM ANALYZE inbox"
q() { psql "$url" -X -qtA -c "$1"; }
t0=$(q "SELECT extract(epoch FROM clock_timestamp())")
# Enough script runs per client for every row, with room for claims that come back short
# (a row another client claimed in the meantime is skipped, not waited for); loop for the rest.
per_client=$(( (n + batch * conc - 1) / (batch * conc) + 2 ))
while :; do
  pgbench -n -f "$here/claim_complete.sql" -D batch="$batch" -c "$conc" -j $(( conc > 1 ? 2 : 1 )) \
    -t "$per_client" "$url" >/dev/null
  left=$(q "SELECT count(*) FROM inbox WHERE state <> 'processed'")
  [ "$left" = 0 ] && break
  per_client=$(( (left + batch * conc - 1) / (batch * conc) + 1 ))
done
q "SELECT json_build_object('rows_per_s', $n / extract(epoch FROM max(processed_at) - to_timestamp($t0)),
     'seconds', extract(epoch FROM max(processed_at) - to_timestamp($t0)), 'handled', count(*), 'batch', $batch)
   FROM inbox WHERE state = 'processed'"
