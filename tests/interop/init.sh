#!/bin/sh
# /init of the interop guest (tests/interop/setup.sh puts it in base.cpio.gz; spec/interop.md).
# Loads virtio-net and rdma_rxe, configures eth0 (198.18.0.2/24, fd00::2/64), creates rxe0,
# prints @@READY, runs /scenario.sh (from the per-run cpio) and powers off.
export PATH=/usr/local/bin:/usr/bin:/usr/sbin:/bin:/sbin
export LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu:/lib/x86_64-linux-gnu
export HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm /tmp /run /root
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
. /lib/interop.sh

fail() {
    echo "@@ERROR $*"
    echo "@@DONE rc=1"
    poweroff -f
    sleep 5
}
uptime_s() { cut -d' ' -f1 /proc/uptime; }

echo "@@BOOT kernel=$(uname -r) uptime=$(uptime_s)"
while read -r m; do
    insmod "$m" || echo "@@ERROR insmod $m"
done </etc/modules.load
echo "@@MODULES uptime=$(uptime_s) $(cut -d' ' -f1 /proc/modules | tr '\n' ' ')"

i=0
while [ ! -e /sys/class/net/eth0 ]; do
    i=$((i + 1))
    [ $i -gt 100 ] && fail "no eth0"
    sleep 0.1
done
echo 0 >/proc/sys/net/ipv6/conf/eth0/accept_dad
echo 0 >/proc/sys/net/ipv6/conf/eth0/router_solicitations 2>/dev/null
ip link set lo up
ip link set eth0 up
ip addr add 198.18.0.2/24 dev eth0
ip -6 addr add fd00::2/64 dev eth0
rdma link add rxe0 type rxe netdev eth0 || fail "rdma link add rxe0 failed"

# eth0's carrier comes up a little after `ip link set up`; the GIDs follow the addresses (a
# workqueue); rxe reports ACTIVE as soon as it is added (before the carrier): wait for all three
i=0
until [ "$(cat /sys/class/net/eth0/operstate)" = up ] && grep -q ACTIVE "$RXE_PORT/state" 2>/dev/null && gids | grep -q ':ffff:c612:0002' &&
    gids | grep -q '^@@GID [0-9]* fd00:'; do
    i=$((i + 1))
    [ $i -gt 100 ] && break
    sleep 0.1
done
echo "@@NET eth0 operstate=$(cat /sys/class/net/eth0/operstate) uptime=$(uptime_s)"
gids
[ -e /dev/infiniband/umad0 ] && echo "@@DEV /dev/infiniband/umad0" || echo "@@ERROR no /dev/infiniband/umad0"
echo "@@RDMA $(rdma link show rxe0/1 2>&1)"
counters boot

# the control channel from the host: ttyS1, kept open as fd 3
if [ -e /dev/ttyS1 ]; then
    stty -F /dev/ttyS1 raw -echo 2>/dev/null
    exec 3</dev/ttyS1
else
    exec 3</dev/null
fi

echo "@@READY rxe0 state=$(tr ' ' '_' <"$RXE_PORT/state") phys_state=$(tr ' ' '_' <"$RXE_PORT/phys_state") uptime=$(uptime_s)"
if [ -f /scenario.sh ]; then
    (
        . /lib/interop.sh
        . /scenario.sh
    )
    rc=$?
else
    echo "@@NOSCENARIO"
    rc=0
fi
echo "@@SCENARIO_END rc=$rc uptime=$(uptime_s)"
counters end
echo "@@DONE rc=$rc"
poweroff -f
