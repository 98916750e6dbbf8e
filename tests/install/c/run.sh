#!/usr/bin/env bash
# C: extract dist/c/queuebox-c-*.tar.gz in an empty directory, build the quick start with
# `pkg-config --cflags --libs queuebox` (shared library, rpath) and with
# `pkg-config --static` (static archive), run both against PostgreSQL.
set -euo pipefail
source tests/install/lib.sh
ffi_need_apt gcc gcc
ffi_need_apt pkg-config pkg-config
tarball=$(ls "$dist"/c/queuebox-c-*-x86_64-unknown-linux-gnu.tar.gz)
install_dir=$(install_workdir c)
trap install_cleanup EXIT
tar -xzf "$tarball" -C "$install_dir"
cp tests/install/c/quickstart.c "$install_dir/"
cd "$install_dir"
export PKG_CONFIG_PATH="$(echo "$install_dir"/queuebox-c-*/lib/pkgconfig)"
libdir=$(pkg-config --variable=libdir queuebox)
# shellcheck disable=SC2046
gcc -std=c11 -Wall -Werror quickstart.c -o quickstart-shared $(pkg-config --cflags --libs queuebox) -Wl,-rpath,"$libdir"
# shellcheck disable=SC2046
gcc -std=c11 -Wall -Werror quickstart.c -o quickstart-static $(pkg-config --cflags queuebox) \
  "$libdir/libqueuebox.a" $(pkg-config --static --libs-only-l queuebox | sed 's/-lqueuebox//')
ldd quickstart-static | grep -q libqueuebox && { echo "install-c: the static build links libqueuebox.so" >&2; exit 1; }
for kind in shared static; do
  install_db "c_$kind"; url=$install_db_url
  "./quickstart-$kind" migrate "$url"
  install_seed "$url"
  timeout 60 "./quickstart-$kind" work "$url"
  install_verify "$url" "c ($kind)"
  ffi_drop_db "$install_db_name"
done
