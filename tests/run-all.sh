#!/usr/bin/env bash
# The one test command (README: "Run every test"). Installs what the tests need, then runs
# every test: unit, property, golden, oracle (tshark, scapy), fuzz-corpus replay, and builds the
# fuzz targets and benchmarks so they cannot rot. A missing tool is a failure, never a skip.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

bash tests/setup.sh
bash tests/interop/setup.sh
bash tests/ibsim/setup.sh
export ROCE_PYTHON="$PWD/.venv/bin/python"

# The kernel rxe guest runs our own roce (sa-agent): one static executable.
RUSTFLAGS="-C target-feature=+crt-static" cargo build --locked --release --target x86_64-unknown-linux-gnu --bin roce

cargo test --workspace --locked
# The fuzz targets live in their own workspace (cargo-fuzz's layout); a plain build keeps them compiling.
cargo build --locked --manifest-path fuzz/Cargo.toml --bins
# Benchmarks compile and run once each in test mode (no timing): they cannot rot either.
cargo test --locked --workspace --benches
