#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian 12 machine. Idempotent; needs root for apt.
#   - tshark (Wireshark's dissectors: the oracle for every byte we emit)
#   - python3-venv and a venv at .venv with scapy (an independent ICRC implementation)
#   - netsniff-ng's trafgen (the transmit anchor of crates/roce-net/benches/rawsock.rs)
#   - ethtool (veth's UDP segmentation offload off in tests/cli/udp.rs, so a capture sees each GSO segment)
#   - iperf3 (the kernel TCP stream beside `roce perftest` in benches/perftest_veth.rs, and
#     rc_veth's ROCE_BENCH_IPERF3=1 cross-check)
#   - zip/unzip and cargo-fuzz (tests/clusterfuzzlite.sh runs ClusterFuzzLite's build.sh)
#   - chromium (tests/analyze opens `roce analyze --html` reports in it, headless)
#   - gcc, binutils, util-linux (tests/capi: C programs against Debian's headers, readelf, setpriv)
#   - libpci3 (the library Debian's perftest needs beside rdma-core's, tests/capi/perftest.rs)
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v tshark >/dev/null 2>&1 || need_apt+=(tshark)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
command -v trafgen >/dev/null 2>&1 || need_apt+=(netsniff-ng)
command -v ethtool >/dev/null 2>&1 || need_apt+=(ethtool)
command -v iperf3 >/dev/null 2>&1 || need_apt+=(iperf3)
command -v zip >/dev/null 2>&1 || need_apt+=(zip)
command -v unzip >/dev/null 2>&1 || need_apt+=(unzip)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
# tests/capi builds small C programs against Debian's rdma-core headers and reads the library's
# ELF symbols; setpriv runs the unprivileged cases
command -v cc >/dev/null 2>&1 || need_apt+=(gcc libc6-dev)
command -v readelf >/dev/null 2>&1 || need_apt+=(binutils)
command -v setpriv >/dev/null 2>&1 || need_apt+=(util-linux)
# Debian's perftest (unpacked, never installed) links libpci.so.3, its one library outside
# rdma-core (whose libraries roce provides); a fresh machine does not have it.
ldconfig -p 2>/dev/null | grep -q 'libpci\.so\.3 ' || need_apt+=(libpci3)
if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "setup: need root to install: ${need_apt[*]}" >&2
        exit 1
    fi
    echo "setup: installing ${need_apt[*]} from Debian"
    apt-get update -qq
    # tshark asks whether non-root users may capture; the default (no) is what we want.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

if ! .venv/bin/python -c 'import scapy.contrib.roce' >/dev/null 2>&1; then
    echo "setup: creating .venv with scapy from PyPI"
    python3 -m venv .venv
    .venv/bin/pip install --quiet --disable-pip-version-check 'scapy==2.6.1'
fi
# jsonschema: validates every `roce decode --json` line the tests produce (spec/decode.schema.json).
if ! .venv/bin/python -c 'import jsonschema' >/dev/null 2>&1; then
    echo "setup: adding jsonschema to .venv from PyPI"
    .venv/bin/pip install --quiet --disable-pip-version-check 'jsonschema==4.23.0'
fi
# cargo-fuzz from crates.io (a fixed version: the fuzz build in the test command must not move).
if ! cargo fuzz --version 2>/dev/null | grep -q '0\.13\.2'; then
    echo "setup: installing cargo-fuzz 0.13.2 from crates.io"
    cargo install --quiet --locked cargo-fuzz --version 0.13.2
fi
echo "setup: tshark $(tshark --version | head -1 | awk '{print $3}'), scapy $(.venv/bin/python -c 'import scapy; print(scapy.VERSION)')"
