#!/usr/bin/env bash
# C: for each dist/c/queuebox-c-<v>-<triple>.tar.gz, extract it in an empty directory, build
# the quick start with `pkg-config --cflags --libs queuebox` (shared library, rpath) and with
# `pkg-config --static` (static archive), run both against PostgreSQL. The host's tarball
# builds with gcc; the aarch64 one with zig (the packaging's cross compiler) and runs under
# qemu-user, so the aarch64 library really migrates, claims and completes the row. The x86_64
# musl one (QB_PACKAGE_TARGETS) builds with Debian's musl-gcc (musl-tools): the static program
# with `musl-gcc -static`, no shared library and no interpreter at all, the shared one loaded
# by musl's /lib/ld-musl-x86_64.so.1; both run here natively. A build that fails says "not
# run" with the linker's reason, and the test fails.
set -euo pipefail
source tests/install/lib.sh
ffi_need_apt gcc gcc
ffi_need_apt pkg-config pkg-config
tarballs=("$dist"/c/queuebox-c-*.tar.gz)
[ -e "${tarballs[0]}" ] || { echo "install-c: no tarball in $dist/c" >&2; exit 1; }
install_dir=$(install_workdir c)
trap install_cleanup EXIT
cp tests/install/c/quickstart.c "$install_dir/"
not_run=()
# link <kind> <cc arguments after the source...>: builds quickstart-<triple>-<kind> and adds
# <kind> to kinds; a failed link is reported as not run with the linker's first errors (the
# test then fails).
link() {
  local kind=$1 out; shift
  if out=$(cd "$install_dir" && $cc -std=c11 -Wall -Werror quickstart.c -o "quickstart-$triple-$kind" "$@" 2>&1); then
    kinds+=("$kind")
  else
    echo "install-c ($triple, $kind): not run: the link failed: $(echo "$out" | grep -m3 -E 'undefined|error' | paste -sd' ')"
    not_run+=("$triple $kind")
  fi
}
for tarball in "${tarballs[@]}"; do
  triple=$(basename "$tarball" .tar.gz | sed 's/^queuebox-c-[^-]*-//')
  if ! cc=$(install_cc "$triple"); then
    echo "install-c ($triple): not run (no C compiler for $triple here)"; not_run+=("$triple: no compiler"); continue
  fi
  # A musl program is static as a whole (musl-gcc -static): libc and the unwinder linked in.
  static_flag="" static_elf=any
  case "$triple" in *-musl) static_flag=-static static_elf=static ;; esac
  tar -xzf "$tarball" -C "$install_dir"
  export PKG_CONFIG_PATH="$(echo "$install_dir"/queuebox-c-*-"$triple"/lib/pkgconfig)"
  libdir=$(pkg-config --variable=libdir queuebox)
  kinds=()
  # shellcheck disable=SC2046
  link shared $(pkg-config --cflags --libs queuebox) -Wl,-rpath,"$libdir"
  # shellcheck disable=SC2046,SC2086
  link static $static_flag $(pkg-config --cflags queuebox) "$libdir/libqueuebox.a" \
    $(pkg-config --static --libs-only-l queuebox | sed 's/-lqueuebox//')
  for kind in "${kinds[@]}"; do
    want=any; [ "$kind" = static ] && want=$static_elf
    bash scripts/elf-check.sh "$install_dir/quickstart-$triple-$kind" "$(install_arch "$triple")" "$want" | sed "s#$install_dir/##"
  done
  case " ${kinds[*]} " in *" static "*)
    readelf -d "$install_dir/quickstart-$triple-static" | grep -q 'NEEDED.*libqueuebox' &&
      { echo "install-c: the static build links libqueuebox.so ($triple)" >&2; exit 1; } ;;
  esac
  case "$triple/ ${kinds[*]} " in *-musl/*" shared "*)
    readelf -l "$install_dir/quickstart-$triple-shared" | grep -q 'interpreter: /lib/ld-musl-' ||
      { echo "install-c: the musl shared build is not loaded by musl's ld-musl ($triple)" >&2; exit 1; } ;;
  esac
  if ! run=$(install_runner "$triple"); then
    echo "install-c ($triple): built the quick start against the tarball; not run (no qemu-user for $triple here)"
    continue
  fi
  for kind in "${kinds[@]}"; do
    install_db "c_$kind"; url=$install_db_url
    $run "$install_dir/quickstart-$triple-$kind" migrate "$url"
    install_seed "$url"
    timeout 120 $run "$install_dir/quickstart-$triple-$kind" work "$url"
    install_verify "$url" "c $triple ($kind)"
    ffi_drop_db "$install_db_name"
  done
done
[ ${#not_run[@]} -eq 0 ] || { echo "install-c: not run: ${not_run[*]}" >&2; exit 1; }
