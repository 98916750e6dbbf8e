#!/usr/bin/env bash
# One version for every package QueueBox ships: the Cargo workspace (every crate), the npm
# package, the Python package, the NuGet package.
#   scripts/version.sh            prints each manifest's version; exits 1 if they differ
#   scripts/version.sh set 0.2.0  writes 0.2.0 into every manifest
set -euo pipefail
cd "$(dirname "$0")/.."

# manifest path and the sed expression that captures its version (group 1)
manifests=(
  "Cargo.toml|^version = \"([^\"]+)\"$"
  # The core's dependency on the protocol crate names its version, for `cargo package`.
  "Cargo.toml|^queuebox-protocol = \{ path = \"core/protocol\", version = \"([^\"]+)\" \}$"
  "clients/typescript/package.json|^  \"version\": \"([^\"]+)\",$"
  "clients/python/pyproject.toml|^version = \"([^\"]+)\"$"
  "clients/csharp/src/QueueBox.Inbox/QueueBox.Inbox.csproj|^ *<Version>([^<]+)</Version>$"
)

version_of() {  # the first line of $1 matching $2, its group 1
  grep -m1 -E "$2" "$1" | sed -E "s#$2#\\1#"
}

case "${1:-check}" in
  check)
    seen=""; status=0
    for m in "${manifests[@]}"; do
      file=${m%%|*}; re=${m#*|}
      v=$(version_of "$file" "$re")
      [ -z "$v" ] && { echo "version: no version line in $file" >&2; status=1; continue; }
      printf '%-60s %s\n' "$file" "$v"
      [ -z "$seen" ] && seen=$v
      [ "$v" != "$seen" ] && { echo "version: $file has $v, the workspace has $seen" >&2; status=1; }
    done
    exit $status ;;
  set)
    new=${2:?usage: scripts/version.sh set X.Y.Z}
    [[ "$new" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$ ]] || { echo "version: $new is not a semantic version" >&2; exit 2; }
    for m in "${manifests[@]}"; do
      file=${m%%|*}; re=${m#*|}
      old=$(version_of "$file" "$re")
      line=$(grep -nE "$re" "$file" | head -1 | cut -d: -f1)
      sed -i "${line}s/$(printf '%s' "$old" | sed 's/[.]/\\./g')/$new/" "$file"
      echo "$file: $old -> $new"
    done
    bash "$0" check ;;
  *) echo "usage: scripts/version.sh [check | set X.Y.Z]" >&2; exit 2 ;;
esac
