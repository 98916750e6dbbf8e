#!/usr/bin/env bash
# Rust: core unit tests, vectors, store and worker tests against the real PostgreSQL, and
# the relay's tests (the relay binary is built first so tests can spawn it).
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --workspace --bins --quiet
cargo test --workspace --quiet --no-fail-fast -- --test-threads=4
