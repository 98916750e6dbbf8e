#!/usr/bin/env bash
# Mutation testing of what changed in the protocol crate (core/protocol/src) since the last
# full run, whose commit is tests/mutants/base: scripts/mutants.sh diff. Every mutant on a
# changed line must make a test of the crate fail. NOT RUN (exit 77) when the protocol
# source is as the full run left it, or its changes hold nothing to mutate (tests, comments);
# on a fresh machine a run first builds cargo-mutants.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec bash scripts/mutants.sh diff
