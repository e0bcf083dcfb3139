#!/usr/bin/env bash
# Boot the kernel rxe guest once by hand, with a scenario script (and static binaries), and print
# its console. The Rust harness (tests/interop/harness.rs) does the same for the tests, plus a
# control channel; this is for poking at the guest from a shell. Run as root, after
# `bash tests/interop/setup.sh`.
#
#   [ROCE_KERNEL=6.1|6.12|sid] tests/interop/guest.sh [-b HOST_BINARY[:NAME]]... [-t TIMEOUT_S] SCENARIO.sh
#
# SCENARIO.sh runs in the guest after @@READY with the helpers of /lib/interop.sh (counters,
# result, gids); -b puts a (static) binary at /usr/local/bin/NAME. The namespace holds tap0
# (198.18.0.1/24, fd00::1/64); tcpdump writes tap0.pcap. Artefacts: target/interop/artefacts/guest-sh/.
# Exit status: the scenario's (from @@DONE rc=N), 124 on timeout.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="$PWD/target/interop"
KOUT="$OUT/kernels/${ROCE_KERNEL:-6.1}"
binaries=()
timeout_s=120
while getopts "b:t:" o; do
    case "$o" in
    b) binaries+=("$OPTARG") ;;
    t) timeout_s="$OPTARG" ;;
    *) sed -n '2,13p' "$0" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -eq 1 ] || { sed -n '2,13p' "$0" >&2; exit 2; }
scenario="$1"
[ "$(id -u)" -eq 0 ] || { echo "guest.sh: must run as root" >&2; exit 1; }
[ -f "$KOUT/vmlinuz" ] && [ -f "$KOUT/base.cpio.gz" ] || { echo "guest.sh: run tests/interop/setup.sh first" >&2; exit 1; }

ART="$OUT/artefacts/${ROCE_KERNEL:-6.1}/guest-sh"
rm -rf "$ART"
mkdir -p "$ART/root/usr/local/bin"
cp "$scenario" "$ART/root/scenario.sh"
chmod 755 "$ART/root/scenario.sh"
for b in "${binaries[@]}"; do
    src="${b%%:*}"
    name="${b#*:}"
    [ "$name" = "$b" ] && name=$(basename "$src")
    install -m 0755 "$src" "$ART/root/usr/local/bin/$name"
done
(cd "$ART/root" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet --owner=0:0 | gzip -n -1) >"$ART/scenario.cpio.gz"
cat "$KOUT/base.cpio.gz" "$ART/scenario.cpio.gz" >"$ART/initrd.cpio.gz"

NS="roce-sh-$$"
TCPDUMP_PID=""
cleanup() {
    [ -n "$TCPDUMP_PID" ] && { sleep 0.3; kill "$TCPDUMP_PID" 2>/dev/null || true; wait "$TCPDUMP_PID" 2>/dev/null || true; }
    ip netns del "$NS" 2>/dev/null || true
}
trap cleanup EXIT
ip netns add "$NS"
ip -n "$NS" link set lo up
ip -n "$NS" tuntap add dev tap0 mode tap
ip -n "$NS" link set tap0 up
ip -n "$NS" addr add 198.18.0.1/24 dev tap0
ip -n "$NS" -6 addr add fd00::1/64 dev tap0 nodad
ip netns exec "$NS" tcpdump -Z root -U --immediate-mode -n -i tap0 -w - >"$ART/tap0.pcap" 2>"$ART/tcpdump.log" &
TCPDUMP_PID=$!
for _ in $(seq 100); do grep -q "listening on" "$ART/tcpdump.log" && break; sleep 0.05; done

start=$(date +%s.%N)
set +e
timeout "$timeout_s" ip netns exec "$NS" qemu-system-x86_64 -accel tcg -cpu max -m 1024 -smp 1 -nographic -no-reboot \
    -kernel "$KOUT/vmlinuz" -initrd "$ART/initrd.cpio.gz" -append "console=ttyS0 panic=-1 quiet" \
    -netdev tap,id=n0,ifname=tap0,script=no,downscript=no -device virtio-net-pci,netdev=n0,mac=52:54:00:12:34:56 \
    </dev/null 2>&1 | stdbuf -oL tr -d '\r' | tee "$ART/console.log"
qrc=${PIPESTATUS[0]}
set -e
echo "guest.sh: qemu ran $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s; artefacts in $ART" >&2
[ "$qrc" -eq 124 ] && exit 124
rc=$(sed -n 's/.*@@DONE rc=\([0-9]*\).*/\1/p' "$ART/console.log" | tail -1)
exit "${rc:-1}"
