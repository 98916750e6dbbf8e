#!/usr/bin/env bash
# C# client (clients/csharp, QueueBox.Inbox): there is no .NET SDK and no NuGet here, so
# Debian's mono compiles the library sources and the self-contained test runner with mcs
# and runs it against the real libqueuebox and PostgreSQL (each test makes and migrates
# its own database). The runner prints PASS/FAIL per test and "N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/../.."
source bindings/c/tests/ffi-env.sh

ffi_need_apt mcs mono-devel
ffi_build_native

out="$QB_CARGO_TARGET/csharp"
mkdir -p "$out"
mcs -nologo -target:library -warnaserror+ -out:"$out/QueueBox.Inbox.dll" clients/csharp/src/QueueBox.Inbox/*.cs
mcs -nologo -warnaserror+ -out:"$out/QueueBox.Inbox.Tests.exe" -r:"$out/QueueBox.Inbox.dll" -r:System.Core.dll clients/csharp/tests/*.cs
# DllImport("queuebox") resolves to libqueuebox.so through LD_LIBRARY_PATH.
LD_LIBRARY_PATH="$QB_NATIVE_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
QUEUEBOX_VECTORS_DIR="$PWD/proto-docs/vectors" \
  mono --debug "$out/QueueBox.Inbox.Tests.exe"
