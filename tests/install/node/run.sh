#!/usr/bin/env bash
# TypeScript: dist/npm's tarballs served by a minimal local npm registry (registry.mjs), an
# empty npm project runs `npm install @alternayte/queuebox-inbox` against it — npm picks the
# linux-x64-gnu addon package from the optional dependencies — then the README quick start
# (ESM) runs against PostgreSQL.
set -euo pipefail
source tests/install/lib.sh
install_dir=$(install_workdir node)
registry_pid=
trap 'install_cleanup; [ -n "$registry_pid" ] && kill "$registry_pid" 2>/dev/null; true' EXIT
node tests/install/node/registry.mjs "$dist/npm" "$install_dir/port" &
registry_pid=$!
for _ in $(seq 50); do [ -s "$install_dir/port" ] && break; sleep 0.1; done
registry="http://127.0.0.1:$(cat "$install_dir/port")/"
mkdir "$install_dir/app"
cp tests/install/node/quickstart.mjs "$install_dir/app/"
cd "$install_dir/app"
npm init -y >/dev/null
# A private cache: the install really fetches these tarballs, not ones cached by a former run.
npm install --registry "$registry" --cache "$install_dir/npm-cache" --no-audit --no-fund \
  --loglevel=error @alternayte/queuebox-inbox
ls node_modules/@alternayte
install_db node
node quickstart.mjs migrate "$install_db_url"
install_seed "$install_db_url"
node quickstart.mjs work "$install_db_url"
install_verify "$install_db_url" node
