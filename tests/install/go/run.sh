#!/usr/bin/env bash
# Go: an empty module gets github.com/alternayte/queuebox/clients/go from the file GOPROXY
# that scripts/package.sh wrote (dist/go: the header and lib/linux_amd64/libqueuebox.a are
# inside the module), with no CGO_* variables, builds the quick start and runs it.
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
