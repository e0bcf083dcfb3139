#!/usr/bin/env bash
# Installs what the OpenSM interop tests (tests/opensm/sa.rs) need on a fresh Debian 12 machine:
# ibsim (the InfiniBand fabric simulator and its LD_PRELOAD shim `ibsim-run`), OpenSM, and
# infiniband-diags (saquery, sminfo). Idempotent; needs root for apt.
set -euo pipefail

missing=()
for t in ibsim ibsim-run opensm saquery; do
    command -v "$t" >/dev/null 2>&1 || [ -x "/usr/sbin/$t" ] || missing+=("$t")
done
# ibsim-run preloads the shim from libumad2sim0 (a dependency of ibsim-utils).
ls /usr/lib/*/umad2sim/libumad2sim.so >/dev/null 2>&1 || missing+=(libumad2sim.so)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "ibsim setup: need root to install ibsim-utils opensm infiniband-diags (missing: ${missing[*]})" >&2
        exit 1
    fi
    echo "ibsim setup: installing ibsim-utils opensm infiniband-diags from Debian (missing: ${missing[*]})"
    apt-get update -qq
    # Installing opensm may try to start its service; without InfiniBand hardware it has nothing
    # to do, and policy-rc.d or the absence of systemd keeps it from starting in containers.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        ibsim-utils opensm infiniband-diags >/dev/null
fi
echo "ibsim setup: $(ibsim -h 2>&1 | tail -1), OpenSM $(dpkg-query -W -f='${Version}' opensm), saquery $(dpkg-query -W -f='${Version}' infiniband-diags)"
