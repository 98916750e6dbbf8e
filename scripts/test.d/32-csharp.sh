#!/usr/bin/env bash
# C# client (clients/csharp, QueueBox.Inbox): there is no .NET SDK and no NuGet here, so
# Debian's mono compiles the library sources and the self-contained test runner with mcs
# and runs it against the real libqueuebox and PostgreSQL (each test makes and migrates
# its own database; WorkerTlsTests a TLS-only one from scripts/postgres-tls.sh). The runner
# prints PASS/FAIL per test and "N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/../.."
source bindings/c/tests/ffi-env.sh

ffi_need_apt mcs mono-devel
# The application-transaction tests (AppTxTests, ReadmeTests, DeliveryTests) need a real ADO.NET provider:
# Npgsql cannot be fetched without NuGet, so mono's System.Data.Odbc over Debian's psqlODBC
# driver (odbc-postgresql, on unixODBC) is the one used here.
if ! odbcinst -q -d -n "PostgreSQL Unicode" >/dev/null 2>&1; then
  echo "installing unixodbc and odbc-postgresql from Debian's packages" >&2
  export DEBIAN_FRONTEND=noninteractive
  if [ ! -f /tmp/.qb-apt-updated ]; then apt-get update -qq && touch /tmp/.qb-apt-updated; fi
  apt-get install -y -qq unixodbc odbc-postgresql >/dev/null
fi
ffi_build_native
# DeliveryTests runs the relay binary (publish -> HTTP delivery); usually already built by 10-rust.
relay_flag=()
[ "$QB_PROFILE" = release ] && relay_flag=(--release)
cargo build --quiet -p queuebox --bin queuebox "${relay_flag[@]}"

out="$QB_CARGO_TARGET/csharp"
mkdir -p "$out"
# The same flags as scripts/package.sh's NuGet build, -doc included: the XML documentation
# pass is what checks every <see cref>, and an ambiguous one fails the package under
# -warnaserror (it did, with a test build that passed).
mcs -nologo -target:library -warnaserror+ -nowarn:1591 -r:System.Data.dll -doc:"$out/QueueBox.Inbox.xml" \
  -out:"$out/QueueBox.Inbox.dll" clients/csharp/src/QueueBox.Inbox/*.cs
# Each ```csharp block of the README is a compilation unit of the test runner, so the README's
# examples build against the library and ReadmeTests runs them (the EF Core helper in
# src/QueueBox.Inbox.EntityFrameworkCore needs EF Core from NuGet and is not built here).
rm -rf "$out/readme" && mkdir -p "$out/readme"
awk -v dir="$out/readme" '/^```csharp$/ { n++; f = 1; next } /^```$/ { f = 0 } f { print > (dir "/Readme" n ".cs") }' clients/csharp/README.md
# The repository README's C# quick start (the block after its marker) is one more unit.
awk '/<!-- quick start: csharp/ { m = 1 } m && /^```csharp$/ { f = 1; next } f && /^```$/ { exit } f { print }' README.md > "$out/readme/QuickStart.cs"
mcs -nologo -warnaserror+ -out:"$out/QueueBox.Inbox.Tests.exe" -r:"$out/QueueBox.Inbox.dll" -r:System.Core.dll -r:System.Data.dll \
  clients/csharp/tests/*.cs "$out"/readme/*.cs
# WorkerTlsTests needs a TLS-only PostgreSQL of its own.
export QB_PG_TLS_PORT="${QB_PG_TLS_PORT_CSHARP:-55439}"
trap "bash '$PWD/scripts/postgres-tls.sh' stop" EXIT
bash scripts/postgres-tls.sh start
eval "$(bash scripts/postgres-tls.sh env)"
# DllImport("queuebox") resolves to libqueuebox.so through LD_LIBRARY_PATH.
LD_LIBRARY_PATH="$QB_NATIVE_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
QUEUEBOX_VECTORS_DIR="$PWD/proto-docs/vectors" \
QUEUEBOX_BIN="$QB_NATIVE_DIR/queuebox" \
  mono --debug "$out/QueueBox.Inbox.Tests.exe"
