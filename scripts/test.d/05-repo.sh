#!/usr/bin/env bash
# Repository checks that need no build: one version across every package, a licence file.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/version.sh
test -s LICENSE || { echo "repo: LICENSE is missing" >&2; exit 1; }
