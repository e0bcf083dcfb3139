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

# The kernel interop suite (the `interop` test binary, tests/interop/main.rs) boots Debian 12's 6.1 kernel in the workspace
# run, then runs again on its 6.12 kernel and on the newest kernel of Debian's unstable suite (`sid`; setup.sh
# built all three and printed sid's version).
ROCE_KERNEL=6.1 cargo test --workspace --locked
# 6.12's and sid's suites at once, each into its own log, printed when both are done: one
# guest of a kernel at a time (tests/interop/harness.rs), and a suite keeps about a quarter
# of two cores busy, so two overlap well. Either failing fails the command.
interop_bin=$(cargo test --locked --test interop --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\))$/\1/p')
[ -x "$interop_bin" ] || { echo "run-all: no interop test binary" >&2; exit 1; }
interop_rc=0
ROCE_KERNEL=6.12 "$interop_bin" >target/interop/run-6.12.log 2>&1 &
interop_612=$!
ROCE_KERNEL=sid "$interop_bin" >target/interop/run-sid.log 2>&1 &
interop_sid=$!
wait "$interop_612" || interop_rc=1
echo "=== interop on 6.12 (target/interop/run-6.12.log)"
cat target/interop/run-6.12.log
wait "$interop_sid" || interop_rc=1
echo "=== interop on sid (target/interop/run-sid.log)"
cat target/interop/run-sid.log
[ "$interop_rc" = 0 ] || { echo "run-all: the interop suite failed on 6.12 or sid (above)" >&2; exit 1; }
# The fuzz targets (their own workspace, cargo-fuzz's layout) built as ClusterFuzzLite's builder
# builds them (.clusterfuzzlite/build.sh, address sanitizer), each run over its seeds and corpus.
bash tests/clusterfuzzlite.sh
# Benchmarks compile and run once each in test mode (no timing): they cannot rot either.
cargo test --locked --workspace --benches
# The Python package (crates/roce-py, its own cargo workspace): a fresh venv, pip install, pytest.
bash tests/python.sh
