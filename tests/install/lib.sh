# Shared by tests/install/*/run.sh: a database per language, the row every quick start
# handles, and the check that the worker really completed it. Source it after
# scripts/postgres.sh (QUEUEBOX_TEST_DATABASE_URL) from the repository root.
# shellcheck source=bindings/c/tests/ffi-env.sh
source bindings/c/tests/ffi-env.sh
repo=$PWD
dist="$repo/dist"

# install_workdir <lang>: an empty directory outside the repository (nothing of the
# repository is on any search path there: the artifact is all the program gets).
install_workdir() {
  local d
  d=$(mktemp -d "${TMPDIR:-/tmp}/qb-install-$1.XXXXXX")
  case "$d" in "$repo"/*) echo "install: $d is inside the repository" >&2; exit 1 ;; esac
  echo "$d"
}

# install_db <lang>: a fresh database, its URL in $install_db_url (dropped by install_cleanup).
install_db() {
  install_db_name=$(ffi_create_db "install_$1")
  install_db_url=$(ffi_db_url "$install_db_name")
}

install_cleanup() {
  [ -n "${install_db_name:-}" ] && ffi_drop_db "$install_db_name"
  [ -n "${install_dir:-}" ] && [ -z "${QB_INSTALL_KEEP:-}" ] && rm -rf "$install_dir"
  return 0
}

# install_seed <url>: after the program's own migrate, the business table of the quick
# starts and one pull row for source "orders" (what the relay's pull source would store).
install_seed() {
  psql "$1" -X -q -v ON_ERROR_STOP=1 <<'SQL'
CREATE TABLE orders_seen (id uuid PRIMARY KEY, total numeric NOT NULL);
INSERT INTO inbox (source, idempotency_key, payload, consumption)
VALUES ('orders', 'install-1', '{"total": 42}', 'pull');
SQL
}

# install_verify <url> <lang>: the row is processed and the handler's business write committed
# with it (same transaction), exactly once.
install_verify() {
  local got
  got=$(psql "$1" -X -tA -v ON_ERROR_STOP=1 -c "
    SELECT i.state || ' ' || i.attempt || ' ' || count(o.id) || ' ' || coalesce(max(o.total)::text, '-')
    FROM inbox i LEFT JOIN orders_seen o ON o.id = i.id
    WHERE i.source = 'orders' AND i.idempotency_key = 'install-1'
    GROUP BY i.state, i.attempt")
  if [ "$got" != "processed 0 1 42" ]; then
    echo "install-$2: expected 'processed 0 1 42' (state, failed attempts, business rows, total), got '$got'" >&2
    return 1
  fi
  echo "install-$2: the installed package migrated, claimed and completed the row with its business write"
}

# Artifacts of another arch (scripts/package.sh's cross targets, aarch64): a program for them
# is compiled with zig, the cross compiler the packaging used (scripts/package.sh installs it
# in .venv/package), and runs under qemu-user with Debian's aarch64 glibc (libc6-arm64-cross).
# install_arch <triple>: the arch part, x86_64 or aarch64.
install_arch() { echo "${1%%-*}"; }
# install_cc <triple>: the C compiler command for the target (host: gcc; x86_64 musl:
# Debian's musl-gcc, gcc with musl's headers and libc, installed on first use).
install_cc() {
  case "$1" in
    x86_64-unknown-linux-gnu) echo gcc ;;
    x86_64-unknown-linux-musl) ffi_need_apt musl-gcc musl-tools >&2 || return 1; echo musl-gcc ;;
    aarch64-unknown-linux-gnu) echo "$repo/.venv/package/bin/python -m ziglang cc -target aarch64-linux-gnu.2.17" ;;
    *) echo "install: no C compiler for $1" >&2; return 1 ;;
  esac
}
# install_runner <triple>: the prefix that runs the target's programs here ("" on the host);
# installs qemu-user the first time. Returns 1 when it cannot be installed (then say "not run").
install_runner() {
  case "$1" in
    x86_64-unknown-linux-gnu | x86_64-unknown-linux-musl) echo "" ;;
    aarch64-unknown-linux-gnu)
      ffi_need_apt qemu-aarch64 qemu-user >&2 || return 1
      [ -e /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 ] || ffi_need_apt_pkg libc6-arm64-cross >&2 || return 1
      echo "qemu-aarch64 -L /usr/aarch64-linux-gnu" ;;
    *) return 1 ;;
  esac
}
# ffi_need_apt_pkg <package>: a Debian package that has no command of its own.
ffi_need_apt_pkg() {
  export DEBIAN_FRONTEND=noninteractive
  if [ ! -f /tmp/.qb-apt-updated ]; then apt-get update -qq && touch /tmp/.qb-apt-updated; fi
  apt-get install -y -qq "$1" >/dev/null
}
