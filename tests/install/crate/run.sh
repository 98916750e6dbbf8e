#!/usr/bin/env bash
# Rust: a new cargo project outside the repository depends on queuebox-core from the
# packaged dist/crates/queuebox-core-<v>.crate (unpacked, as cargo does with a registry
# download: only what `cargo package` put in it, migrations included), and on the
# queuebox-protocol crate it names from dist/crates/queuebox-protocol-<v>.crate in place
# of the registry's, and runs the README quick start. The build cache is the workspace's target dir (same dependency
# versions through the workspace's Cargo.lock), so only the packaged crate is compiled.
set -euo pipefail
source tests/install/lib.sh
crate=$(ls "$dist"/crates/queuebox-core-*.crate)
protocol_crate=$(ls "$dist"/crates/queuebox-protocol-*.crate)
install_dir=$(install_workdir crate)
trap install_cleanup EXIT
mkdir -p "$install_dir/vendor" "$install_dir/app/src"
tar -xzf "$crate" -C "$install_dir/vendor"
tar -xzf "$protocol_crate" -C "$install_dir/vendor"
core_dir=$(echo "$install_dir"/vendor/queuebox-core-*)
protocol_dir=$(echo "$install_dir"/vendor/queuebox-protocol-*)
cp tests/install/crate/main.rs "$install_dir/app/src/main.rs"
cp Cargo.lock "$install_dir/app/Cargo.lock"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
cat >"$install_dir/app/Cargo.toml" <<TOML
[package]
name = "queuebox-install-quickstart"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
queuebox-core = { path = "$core_dir" }
tokio = { version = "1", features = ["macros", "rt-multi-thread", "time", "sync"] }

[patch.crates-io]
queuebox-protocol = { path = "$protocol_dir" }

[workspace]
TOML
cd "$install_dir/app"
cargo build --quiet
bin="$CARGO_TARGET_DIR/debug/queuebox-install-quickstart"
install_db crate
"$bin" migrate "$install_db_url"
install_seed "$install_db_url"
"$bin" work "$install_db_url"
install_verify "$install_db_url" "rust crate"
