#!/usr/bin/env bash
# C#: `nuget install QueueBox.Inbox -Source dist/nuget` (a local feed folder; Debian's
# NuGet 2.8 on mono, since the .NET SDK cannot be installed here) in an empty directory,
# then the README quick start compiled with mono's mcs against the package's lib/net45
# assembly, with the package's runtimes/linux-x64/native/libqueuebox.so beside the program
# (what a .NET build copies to its output), run against PostgreSQL.
set -euo pipefail
source tests/install/lib.sh
ffi_need_apt mcs mono-devel
ffi_need_apt nuget nuget
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
install_dir=$(install_workdir csharp)
trap install_cleanup EXIT
cp tests/install/csharp/Quickstart.cs "$install_dir/"
cd "$install_dir"
nuget install QueueBox.Inbox -Version "$version" -Source "$dist/nuget" -OutputDirectory packages \
  -NonInteractive -NoCache >/dev/null
pkg="packages/QueueBox.Inbox.$version"
mkdir app
cp "$pkg/lib/net45/QueueBox.Inbox.dll" "$pkg/runtimes/linux-x64/native/libqueuebox.so" app/
mcs -nologo -warnaserror+ -out:app/quickstart.exe -r:app/QueueBox.Inbox.dll -r:System.Data.dll Quickstart.cs
install_db csharp
# DllImport("queuebox") finds libqueuebox.so beside the program, nothing from the repository.
(cd app && mono quickstart.exe migrate "$install_db_url")
install_seed "$install_db_url"
(cd app && mono quickstart.exe work "$install_db_url")
install_verify "$install_db_url" csharp
