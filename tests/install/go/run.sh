#!/usr/bin/env bash
# Go: an empty module gets github.com/alternayte/queuebox/clients/go from the file GOPROXY
# that scripts/package.sh wrote (dist/go: the header and lib/linux_amd64/libqueuebox.a are
# inside the module), with no CGO_* variables, builds the quick start and runs it. When the
# module holds lib/linux_arm64 too, the same module is cross-built for GOARCH=arm64 (CC: zig,
# the packaging's cross compiler; the build tag picks the arm64 library) and run under
# qemu-user against PostgreSQL.
set -euo pipefail
source tests/install/lib.sh
if ! command -v go >/dev/null 2>&1; then
  [ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH"
fi
ffi_need_apt go golang-go
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
install_dir=$(install_workdir go)
trap install_cleanup EXIT
cp tests/install/go/main.go "$install_dir/"
cd "$install_dir"
unset CGO_LDFLAGS CGO_CFLAGS
# The packaged module first; its dependencies (pgx, ...) from the machine's module cache
# (a valid proxy layout) or the ordinary proxy. A module not on the public checksum
# database is named in GONOSUMDB, as for any private module.
shared_cache="$(go env GOMODCACHE)/cache/download"
export GOPROXY="file://$dist/go,file://$shared_cache,${GOPROXY:-https://proxy.golang.org,direct}"
export GONOSUMDB=github.com/alternayte/queuebox GOFLAGS="-mod=mod -modcacherw"
# A private module cache: `go get` really unpacks this build, not one cached by a former run.
export GOMODCACHE="$install_dir/gomodcache"
go mod init example.com/quickstart >/dev/null 2>&1
go get "github.com/alternayte/queuebox/clients/go@v$version"
go build -o quickstart .
ldd quickstart | grep -q libqueuebox && { echo "install-go: linked libqueuebox.so, not the module's static library" >&2; exit 1; }
install_db go
./quickstart migrate "$install_db_url"
install_seed "$install_db_url"
./quickstart work "$install_db_url"
install_verify "$install_db_url" go

# The arm64 library of the module: only CC names the cross compiler, as a user's cross build.
[ -d "$GOMODCACHE/github.com/alternayte/queuebox/clients/go@v$version/lib/linux_arm64" ] || {
  echo "install-go: the module has no lib/linux_arm64; arm64 not built, not run"; exit 0; }
triple=aarch64-unknown-linux-gnu
CGO_ENABLED=1 GOARCH=arm64 CC="$(install_cc $triple)" go build -o quickstart-arm64 .
bash "$repo/scripts/elf-check.sh" quickstart-arm64 aarch64 any
if ! run=$(install_runner $triple); then
  echo "install-go (arm64): built; not run (no qemu-user here)"; exit 0
fi
ffi_drop_db "$install_db_name"
install_db go_arm64
$run ./quickstart-arm64 migrate "$install_db_url"
install_seed "$install_db_url"
timeout 120 $run ./quickstart-arm64 work "$install_db_url"
install_verify "$install_db_url" "go (arm64, qemu)"
