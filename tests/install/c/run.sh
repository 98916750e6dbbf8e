#!/usr/bin/env bash
# C: for each dist/c/queuebox-c-<v>-<triple>.tar.gz, extract it in an empty directory, build
# the quick start with `pkg-config --cflags --libs queuebox` (shared library, rpath) and with
# `pkg-config --static` (static archive), run both against PostgreSQL. The host's tarball
# builds with gcc; the aarch64 one with zig (the packaging's cross compiler) and runs under
# qemu-user, so the aarch64 library really migrates, claims and completes the row.
set -euo pipefail
source tests/install/lib.sh
ffi_need_apt gcc gcc
ffi_need_apt pkg-config pkg-config
tarballs=("$dist"/c/queuebox-c-*.tar.gz)
[ -e "${tarballs[0]}" ] || { echo "install-c: no tarball in $dist/c" >&2; exit 1; }
install_dir=$(install_workdir c)
trap install_cleanup EXIT
cp tests/install/c/quickstart.c "$install_dir/"
for tarball in "${tarballs[@]}"; do
  triple=$(basename "$tarball" .tar.gz | sed 's/^queuebox-c-[^-]*-//')
  cc=$(install_cc "$triple")
  tar -xzf "$tarball" -C "$install_dir"
  export PKG_CONFIG_PATH="$(echo "$install_dir"/queuebox-c-*-"$triple"/lib/pkgconfig)"
  libdir=$(pkg-config --variable=libdir queuebox)
  # shellcheck disable=SC2046,SC2086
  (cd "$install_dir" && $cc -std=c11 -Wall -Werror quickstart.c -o "quickstart-$triple-shared" \
    $(pkg-config --cflags --libs queuebox) -Wl,-rpath,"$libdir")
  # shellcheck disable=SC2046,SC2086
  (cd "$install_dir" && $cc -std=c11 -Wall -Werror quickstart.c -o "quickstart-$triple-static" $(pkg-config --cflags queuebox) \
    "$libdir/libqueuebox.a" $(pkg-config --static --libs-only-l queuebox | sed 's/-lqueuebox//'))
  for kind in shared static; do
    bash scripts/elf-check.sh "$install_dir/quickstart-$triple-$kind" "$(install_arch "$triple")" any >/dev/null
  done
  readelf -d "$install_dir/quickstart-$triple-static" | grep -q 'NEEDED.*libqueuebox' &&
    { echo "install-c: the static build links libqueuebox.so ($triple)" >&2; exit 1; }
  if ! run=$(install_runner "$triple"); then
    echo "install-c ($triple): built the quick start against the tarball; not run (no qemu-user for $triple here)"
    continue
  fi
  for kind in shared static; do
    install_db "c_$kind"; url=$install_db_url
    $run "$install_dir/quickstart-$triple-$kind" migrate "$url"
    install_seed "$url"
    timeout 120 $run "$install_dir/quickstart-$triple-$kind" work "$url"
    install_verify "$url" "c $triple ($kind)"
    ffi_drop_db "$install_db_name"
  done
done
