#!/usr/bin/env bash
# Fuzzing (fuzz/README.md): each cargo-fuzz target for a bounded time, starting from its seed
# corpus in fuzz/corpus/<target> (replayed first, so every input that once crashed, kept
# there, is a regression check). A crash, panic, timeout or out-of-memory fails the part and
# prints the input as base64. Nothing is written into the repository: new inputs and
# artifacts go to a scratch directory under fuzz/target.
# QB_FUZZ_TARGET_SECONDS (default 30) per target; QB_FUZZ_TARGETS to run only some.
# Adds 5 x 30 s of fuzzing, plus on a fresh machine the nightly toolchain (minimal profile),
# cargo-fuzz (a debug build) and one instrumented release build of core, config, bridge and
# transform (fuzz/target, about 1.5 GB).
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${QB_FUZZ_TARGET_SECONDS:-30}"
export PATH="$HOME/.cargo/bin:$PATH"
# libFuzzer's instrumentation needs nightly rustc flags (-Zsanitizer, sancov).
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  echo "15-fuzz: installing the nightly toolchain with rustup (minimal profile)"
  rustup toolchain install nightly --profile minimal
fi
QB_CARGO_FUZZ_VERSION=0.13.2
if ! cargo fuzz --version 2>/dev/null | grep -q " $QB_CARGO_FUZZ_VERSION\$"; then
  echo "15-fuzz: installing cargo-fuzz $QB_CARGO_FUZZ_VERSION (cargo install, debug profile: faster to build)"
  cargo install --quiet --locked --debug cargo-fuzz --version "$QB_CARGO_FUZZ_VERSION"
fi
# No sanitizer: the targets run safe Rust, where a bug shows as a panic, an overflow (debug
# assertions are on), a stack overflow or a timeout, which libFuzzer catches without ASan.
# --codegen-units 16: cargo-fuzz builds with one codegen unit by default, which serializes
# LLVM over each large crate; the fresh-machine build is most of this part's time, and CI's
# 60-minute budget matters more than the few percent of executions per second it costs.
fuzz() { local cmd=$1; shift; cargo +nightly fuzz "$cmd" --codegen-units 16 "$@"; }
# CI (.ci/run sets QB_DROP_DEBUG_TREE) needs this tree for this part only: it is dropped on
# the way out, before the acceptance part's databases and builds want the disk.
[ -n "${QB_DROP_DEBUG_TREE:-}" ] && trap 'rm -rf fuzz/target' EXIT
fuzz build --sanitizer none
targets="${QB_FUZZ_TARGETS:-$(cargo +nightly fuzz list | tr '\n' ' ')}"
status=0
for t in $targets; do
  scratch="fuzz/target/scratch/$t"
  rm -rf "$scratch"; mkdir -p "$scratch/corpus" "$scratch/artifacts"
  log="$scratch/log"
  # -timeout: one input may take 10 s (a JSONata built-in over a huge value is the slowest
  # known case, relay/transform/src/limits.rs); -rss_limit_mb: 2 GB per input.
  if fuzz run --sanitizer none "$t" "$scratch/corpus" "fuzz/corpus/$t" -- \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$scratch/artifacts/" >"$log" 2>&1; then
    echo "15-fuzz: $t passed: $(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}') executions in ${seconds}s, corpus $(ls "$scratch/corpus" | wc -l) new inputs"
  else
    status=1
    echo "15-fuzz: $t FAILED; its log:" >&2
    grep -v '^#[0-9]' "$log" | tail -60 >&2
    for a in "$scratch"/artifacts/*; do
      [ -f "$a" ] || continue
      echo "15-fuzz: $t input $(basename "$a") (base64; add it to fuzz/corpus/$t and a unit test):" >&2
      base64 -w0 "$a" >&2; echo >&2
    done
  fi
done
exit $status
