#!/usr/bin/env bash
# The Python package's tests (crates/roce-py): a fresh venv, `pip install ./crates/roce-py` as a
# user would (a dev build: the release build is for the benchmark), then its pytest suite, which
# compares the package with the `roce` CLI on tests/data, with scapy and with tshark.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

venv=target/py-venv
python3 -m venv --clear "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check \
    'maturin==1.16.0' 'pytest==9.2.0' 'scapy==2.6.1' 'pandas==3.1.1'
# The CLI the package is compared with.
cargo build --locked --bin roce
# maturin builds crates/roce-py in its own workspace (crates/roce-py/Cargo.lock); the dev
# profile keeps this step short. No build isolation: maturin is already in the venv.
PATH="$PWD/$venv/bin:$PATH" MATURIN_PEP517_ARGS="--profile dev" "$venv/bin/pip" install --quiet --disable-pip-version-check \
    --no-build-isolation ./crates/roce-py
ROCE_BIN="$PWD/target/debug/roce" "$venv/bin/python" -m pytest -q -p no:cacheprovider crates/roce-py/tests
