#!/usr/bin/env bash
# Mutation testing of the protocol crate (queuebox-protocol, core/protocol) with cargo-mutants:
# it changes one operator, return value or match arm of the crate at a time and runs the
# crate's tests; a mutant that no test fails on is a rule no test pins down. The crate has no
# database driver, so a mutant rebuilds a small crate and runs its unit tests in about a
# second (tests/mutants/README.md has the scores and what is left).
#
#   bash scripts/mutants.sh full   every mutant of core/protocol/src (about 9 minutes here)
#   bash scripts/mutants.sh diff   only the mutants on lines changed (committed or not) since
#                                  the commit in tests/mutants/base, the last full run: CI's
#                                  16-mutants
#
# A mutant that cannot change what the code does (an equivalent mutant) is excluded in
# .cargo/mutants.toml, with why. Any other survivor fails the run. `diff` exits 77 (reported
# as NOT RUN by scripts/test.sh) when core/protocol/src has not changed since the base, or its
# changes hold nothing to mutate: the full run's result then stands.
# Results go to target/mutants/mutants.out (caught.txt, missed.txt, timeout.txt, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-}"
case "$mode" in full|diff) ;; *) echo "usage: bash scripts/mutants.sh full|diff" >&2; exit 2 ;; esac
src=core/protocol/src
out="${CARGO_TARGET_DIR:-$PWD/target}/mutants"
mkdir -p "$out"
args=(-p queuebox-protocol --output "$out" --timeout 20)
if [ "$mode" = diff ]; then
  base=$(cat tests/mutants/base)
  if ! git cat-file -e "$base^{commit}" 2>/dev/null; then
    # A shallow clone holds only the newest commits: there is no diff to take.
    echo "mutants: NOT RUN: the base $base (tests/mutants/base) is not in this clone's history (a shallow clone?)"
    exit 77
  fi
  # Against the working tree, so a local run also covers edits not yet committed.
  git diff "$base" -- "$src" > "$out/in.diff"
  if [ ! -s "$out/in.diff" ]; then
    echo "mutants: NOT RUN: $src has not changed since $base, the last full run (tests/mutants/README.md)"
    exit 77
  fi
  echo "mutants: $src changed since $base: $(git diff --stat "$base" -- "$src" | tail -1)"
  args+=(--in-diff "$out/in.diff")
fi
export PATH="$HOME/.cargo/bin:$PATH"
QB_CARGO_MUTANTS_VERSION=27.1.0
if ! cargo mutants --version 2>/dev/null | grep -q " $QB_CARGO_MUTANTS_VERSION\$"; then
  echo "mutants: installing cargo-mutants $QB_CARGO_MUTANTS_VERSION (cargo install, debug profile: faster to build)"
  cargo install --quiet --locked --debug cargo-mutants --version "$QB_CARGO_MUTANTS_VERSION"
fi
# The verdict comes from mutants.out, not from the exit status alone: cargo-mutants exits 3
# (a timeout) in preference to 2 (a missed mutant) when a run has both. A timeout is a mutant
# that never finishes (a loop that no longer advances): the tests noticed it, so it counts as
# caught. Any other status (1 usage, 4 the unmutated tests fail, 5 or 6 a bad diff) is a fault.
# A run that finds no mutant writes no results: clear the last run's, so they are never read
# as this one's.
rm -rf "$out/mutants.out"
status=0
cargo mutants "${args[@]}" || status=$?
if [ "$status" -eq 0 ] && [ ! -d "$out/mutants.out" ]; then
  echo "mutants: NOT RUN: the changed lines hold nothing cargo-mutants mutates (tests, comments, declarations)"
  exit 77
fi
for f in missed timeout; do
  if [ -s "$out/mutants.out/$f.txt" ]; then
    echo "mutants: $f:"; sed 's/^/  /' "$out/mutants.out/$f.txt"
  fi
done
if [ "$status" -ne 0 ] && [ "$status" -ne 2 ] && [ "$status" -ne 3 ]; then
  echo "mutants: cargo mutants failed (exit $status) before a verdict"
  exit 1
fi
if [ -s "$out/mutants.out/missed.txt" ]; then
  echo "mutants: a mutant survived: add a test that fails on it or, if it cannot change behaviour, exclude it in .cargo/mutants.toml saying why"
  exit 1
fi
echo "mutants: every mutant was caught (or did not compile): $(wc -l < "$out/mutants.out/caught.txt") caught, $(wc -l < "$out/mutants.out/timeout.txt") by timeout, $(wc -l < "$out/mutants.out/unviable.txt") unviable"
