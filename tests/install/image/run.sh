#!/usr/bin/env bash
# Image: dist/image/queuebox-<v>-oci.tar (scripts/package.sh pkg_image) run the way a
# container runtime runs it. podman is tried first; in this sandbox it cannot start a
# container (crun: "setrlimit `RLIMIT_NOFILE`: Operation not permitted": the VM withholds
# CAP_SYS_RESOURCE), so the test then does what the runtime would: `umoci unpack` turns the
# image into an OCI runtime bundle (rootfs/ and config.json, the runtime spec umoci derives
# from the image config's Entrypoint, Cmd, User, Env and WorkingDir), the configuration
# and a secret file are placed where the Helm chart mounts them (/etc/queuebox/queuebox.yml,
# /etc/queuebox/secrets/), and runtime.py starts config.json's process.args with its env,
# cwd, uid and gid inside the rootfs (chroot, no capabilities: a non-root process), on the
# host's network. Checked: the labels, no shell, `migrate` (args replacing Cmd, as `podman
# run <image> migrate`), the relay (the image's own Cmd) answering /health/live and
# /health/ready 200 on the management port as uid 65532, one POST to an HTTP source
# stored, and a clean exit on SIGTERM.
set -euo pipefail
source tests/install/lib.sh
ffi_need_apt umoci umoci
ffi_need_apt curl curl
archive=$(ls "$dist"/image/queuebox-*-oci.tar 2>/dev/null | head -1)
[ -n "$archive" ] || { echo "install-image: no image in $dist/image (scripts/package.sh image)" >&2; exit 1; }
version=$(basename "$archive" -oci.tar); version=${version#queuebox-}
install_dir=$(install_workdir image)
relay_pid=
trap '[ -n "$relay_pid" ] && kill "$relay_pid" 2>/dev/null; wait 2>/dev/null; [ -d "$install_dir/bundle/rootfs" ] && rm -rf "$install_dir/bundle"; install_cleanup' EXIT

mkdir -p "$install_dir/layout"
tar -xf "$archive" -C "$install_dir/layout"
cd "$install_dir"

# podman, when it can run containers here.
if command -v podman >/dev/null 2>&1; then
  t0=$(date +%s)
  if out=$(timeout 60 podman run --rm --network host "oci-archive:$archive:$version" --version 2>&1); then
    echo "install-image: podman ran the image: $out"
  else
    echo "install-image: podman cannot run a container here ($(echo "$out" | tail -1)); running the unpacked image's entrypoint as the runtime would"
  fi
  podman rmi -f "localhost/$version" >/dev/null 2>&1 || true
  echo "install-image: the podman attempt took $(($(date +%s) - t0))s"
fi

# The image config: labels, user, entrypoint.
umoci stat --image "layout:$version" --json >stat.json
umoci unpack --image "layout:$version" bundle >/dev/null
python3 - bundle/config.json "$archive" <<'PY'
import json, sys, os, tarfile
spec = json.load(open(sys.argv[1]))
p = spec["process"]
assert p["args"] == ["/usr/local/bin/queuebox", "run"], p["args"]
assert (p["user"]["uid"], p["user"]["gid"]) == (65532, 65532), p["user"]
assert p["cwd"] == "/", p["cwd"]
# umoci records the image config's labels as annotations of the bundle.
ann = spec.get("annotations", {})
for k in ["org.opencontainers.image.title", "org.opencontainers.image.version", "org.opencontainers.image.revision",
          "org.opencontainers.image.source", "org.opencontainers.image.licenses", "org.opencontainers.image.created"]:
    assert ann.get(k), f"label {k} missing: {sorted(ann)}"
print(f"install-image: config: args {p['args']}, user {p['user']['uid']}:{p['user']['gid']}, env {p['env']}, labels {ann['org.opencontainers.image.title']} {ann['org.opencontainers.image.version']} ({ann['org.opencontainers.image.revision'][:12]})")
PY
for sh in bin/sh usr/bin/sh bin/bash bin/busybox; do
  [ ! -e "bundle/rootfs/$sh" ] || { echo "install-image: the image has /$sh" >&2; exit 1; }
done

# What the chart mounts: the configuration and a secret file.
install_db image
port=$((20000 + RANDOM % 20000)); mport=$((port + 1))
mkdir -p bundle/rootfs/etc/queuebox/secrets
printf 'not-needed-by-trust-auth\n' >bundle/rootfs/etc/queuebox/secrets/database-password
chmod 0444 bundle/rootfs/etc/queuebox/secrets/database-password
cat >bundle/rootfs/etc/queuebox/queuebox.yml <<YML
server:
  httpPort: $port
  managementPort: $mport
database:
  url: $install_db_url
  password: file:/etc/queuebox/secrets/database-password
  migrate: false
sources:
  jobs:
    path: /jobs
    consumption: pull
    idempotencyKeyHeader: X-Job-Id
YML
runtime=(python3 "$repo/tests/install/image/runtime.py" bundle)

t0=$(date +%s%N)
"${runtime[@]}" migrate >migrate.log 2>&1 || { cat migrate.log >&2; echo "install-image: migrate failed" >&2; exit 1; }
[ "$(psql "$install_db_url" -X -tA -c 'SELECT count(*) > 0 FROM queuebox_schema_history')" = t ] ||
  { echo "install-image: migrate left no schema history" >&2; exit 1; }
echo "install-image: the image's migrate applied the schema"

# python execs the relay in place: $! is the relay's pid, as a runtime's container process.
"${runtime[@]}" >relay.log 2>&1 &
relay_pid=$!
code=
for _ in $(seq 200); do
  code=$(curl -s -o ready.json -w '%{http_code}' "http://127.0.0.1:$mport/health/ready" || true)
  [ "$code" = 200 ] && break
  kill -0 "$relay_pid" 2>/dev/null || break
  sleep 0.1
done
[ "$code" = 200 ] || { tail -20 relay.log >&2; echo "install-image: /health/ready answered '$code'" >&2; exit 1; }
live=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$mport/health/live")
[ "$live" = 200 ] || { echo "install-image: /health/live answered $live" >&2; exit 1; }
uid=$(awk '/^Uid:/ {print $2}' "/proc/$relay_pid/status")
[ "$uid" = 65532 ] || { echo "install-image: the relay runs as uid $uid, not 65532" >&2; exit 1; }
post=$(curl -s -o post.json -w '%{http_code}' -H 'X-Job-Id: image-1' -d '{"total": 42}' "http://127.0.0.1:$port/inbox/jobs")
case "$post" in 2??) ;; *) cat post.json >&2; echo "install-image: POST /inbox/jobs answered $post" >&2; exit 1 ;; esac
got=$(psql "$install_db_url" -X -tA -c "SELECT consumption || ' ' || state || ' ' || (payload->>'total') FROM inbox WHERE source = 'jobs' AND idempotency_key = 'image-1'")
[ "$got" = "pull pending 42" ] || { echo "install-image: expected 'pull pending 42', got '$got'" >&2; exit 1; }
kill -TERM "$relay_pid"
status=0; wait "$relay_pid" || status=$?
relay_pid=
[ "$status" = 0 ] || { tail -20 relay.log >&2; echo "install-image: the relay exited $status on SIGTERM" >&2; exit 1; }
echo "install-image: migrate, start, probes, POST and stop took $((($(date +%s%N) - t0) / 1000000)) ms"
echo "install-image: the image ran as uid $uid: /health/ready and /health/live 200, POST /inbox/jobs $post (row stored: $got), exit 0 on SIGTERM"
