#!/usr/bin/env bash
# Install tests (tests/install/): builds the release artifacts with scripts/package.sh
# (cargo/maturin/napi reuse the shared target dir, so a warm run rebuilds nothing), then
# for each language installs its artifact from dist/ the way that language's users do —
# in an empty directory outside the repository — and runs its README quick start against
# the real PostgreSQL: migrate, one pull row, the worker completes it with its business
# write. The aarch64 artifacts (package.sh's default targets) run under qemu-user where a
# program can use them (C, Go, relay); "platforms" checks the machine and glibc version of
# every native file in dist/. QB_INSTALL_ONLY="c go" runs some; QB_INSTALL_SKIP_PACKAGE=1
# tests dist/ as it is. QB_DROP_DEBUG_TREE=1 (.ci/run) first deletes the build trees of the
# earlier parts, target/debug and fuzz/target: no later part needs them (52-deploy uses the release relay),
# and the crate test rebuilds the few crates it uses (a clean-clone run here freed 5.6 GB and
# 2.4 GB; stop 25's CI had 1.2 GB left when packaging began, and its cold trees did not fit).
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ -n "${QB_DROP_DEBUG_TREE:-}" ]; then
  for tree in "${CARGO_TARGET_DIR:-$PWD/target}/debug" fuzz/target; do
    [ -d "$tree" ] || continue
    echo "install: dropping $tree ($(du -sh "$tree" 2>/dev/null | cut -f1)) for disk space"
    rm -rf "$tree"
  done
  echo "install: $(df -h --output=avail . | tail -1 | tr -d ' ') free for packaging"
fi
langs=(${QB_INSTALL_ONLY:-crate c go python node csharp relay image platforms})
if [ -z "${QB_INSTALL_SKIP_PACKAGE:-}" ]; then
  t0=$(date +%s)
  parts=()
  for lang in "${langs[@]}"; do
    case "$lang" in
      node) parts+=(npm) ;; crate) parts+=(crates) ;; csharp) parts+=(nuget) ;;
      platforms) ;; # checks what the other parts built
      *) parts+=("$lang") ;;
    esac
  done
  bash scripts/package.sh "${parts[@]}"
  echo "install: scripts/package.sh took $(($(date +%s) - t0))s"
fi
failed=()
for lang in "${langs[@]}"; do
  t0=$(date +%s)
  echo "--- install test: $lang"
  if bash "tests/install/$lang/run.sh"; then
    echo "--- install test $lang passed in $(($(date +%s) - t0))s"
  else
    echo "--- install test $lang FAILED after $(($(date +%s) - t0))s"
    failed+=("$lang")
  fi
done
[ ${#failed[@]} -eq 0 ] || { echo "install tests failed: ${failed[*]}" >&2; exit 1; }
echo "install: every artifact installed and ran its quick start (${langs[*]})"
