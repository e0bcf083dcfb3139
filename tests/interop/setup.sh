#!/usr/bin/env bash
# Builds everything the interop tests with a kernel rxe peer need (spec/interop.md). Idempotent;
# run as root on a fresh Debian 12 machine (a re-run with a complete cache takes about a second).
#
#   ROCE_KERNEL=6.1|6.12|sid bash tests/interop/setup.sh    one kernel; without ROCE_KERNEL: all three
#
# Three guest kernels, side by side under target/interop/kernels/<K>/: Debian 12's default (6.1,
# the package linux-image-amd64 depends on), its 6.12 (the newest linux-image-6.12.N+deb12-amd64
# that apt knows; virtio built in, modules *.ko.xz) and `sid`: the newest amd64 kernel of
# Debian's unstable suite (7.2.13 on 2026-12-04), fetched with apt from a sources file of its own
# under target/interop/cache/apt-sid/ (the host's sources and package lists stay as they are).
# From 7.x Debian splits the kernel: linux-image-* is a meta package, vmlinuz is in
# linux-binary-* (usr/lib/modules/VERSION/vmlinuz), the modules in linux-modules-* and
# modules.builtin in linux-base-*.
#
#   1. installs on the host, if missing: qemu-system-x86 cpio kmod iproute2 tcpdump xz-utils zstd procps
#   2. fetches with `apt-get download` (never installed on the host) the kernel's packages,
#      busybox-static and the rdma-core packages (Debian 12's for every kernel), and unpacks them
#      with `dpkg-deb -x` under target/interop/cache/ (the repo's target/ is gitignored)
#   3. runs `depmod -b` and builds target/interop/vmlinuz and target/interop/base.cpio.gz: busybox,
#      the kernel modules for virtio-net + rdma_rxe (with their modules.dep closure), the rdma-core
#      tools with their shared libraries and the rxe provider, and the /init of tests/interop/init.sh
#
# Each test then appends a tiny per-run cpio (/scenario.sh, optionally a static binary) to
# base.cpio.gz (tests/interop/harness.rs; or tests/interop/guest.sh for a shell run).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
OUT="$REPO/target/interop"
CACHE="$OUT/cache"
HERE="$REPO/tests/interop"

log() { echo "interop-setup: $*" >&2; }
die() { echo "interop-setup: error: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (apt-get, and the tests need network namespaces)"

if [ -z "${ROCE_KERNEL:-}" ]; then
    for k in 6.1 6.12 sid; do ROCE_KERNEL=$k bash "$0"; done
    exit 0
fi
case "$ROCE_KERNEL" in
6.1 | 6.12 | sid) ;;
*) die "ROCE_KERNEL=$ROCE_KERNEL: expected 6.1, 6.12 or sid" ;;
esac
KOUT="$OUT/kernels/$ROCE_KERNEL"

# The kernel modules to load in the guest, in this order (their modules.dep closure is added
# before each). crc32_generic is not a modules.dep dependency of anything: rdma_rxe asks the
# crypto API for "crc32" at runtime and fails with -ENOENT without it. A name ending in `?` is
# loaded where the kernel has it: ib_uverbs_support (7.x) must be in before ib_uverbs;
# crc32_generic is gone where rxe computes its CRC with the crc32 library alone (7.x).
MODULES="virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci failover net_failover virtio_net
configfs crc32_generic? ib_core ib_uverbs_support? ib_uverbs udp_tunnel ip6_udp_tunnel rdma_rxe iw_cm ib_cm rdma_cm
rdma_ucm ib_umad"
GUEST_DEBS="busybox-static rdma-core ibverbs-providers libibverbs1 librdmacm1 rdmacm-utils ibverbs-utils perftest
libibumad3 libnl-3-200 libnl-route-3-200 libpci3"
# Tools copied into the guest (found in the unpacked packages, or on the host for `rdma`).
GUEST_TOOLS="ibv_devices ibv_devinfo ibv_rc_pingpong ibv_ud_pingpong ibv_uc_pingpong ibv_srq_pingpong ibv_xsrq_pingpong
rping ucmatose udaddy mckey cmtime rdma_client rdma_server rdma_xclient rdma_xserver rstream riostream
ib_send_bw ib_send_lat ib_write_bw ib_write_lat ib_read_bw ib_read_lat ib_atomic_bw ib_atomic_lat"

# Stamp: a change of this script, the /init or the module list rebuilds the initramfs.
STAMP_KEY="$( (cat "$0" "$HERE/init.sh" "$HERE/guest-lib.sh"; echo "$ROCE_KERNEL") | sha256sum | cut -c1-16)"

# ---------------------------------------------------------------- 1. host packages
need=()
command -v qemu-system-x86_64 >/dev/null 2>&1 || need+=(qemu-system-x86)
command -v cpio >/dev/null 2>&1 || need+=(cpio)
command -v depmod >/dev/null 2>&1 || need+=(kmod)
command -v ip >/dev/null 2>&1 && command -v rdma >/dev/null 2>&1 || need+=(iproute2)
command -v tcpdump >/dev/null 2>&1 || need+=(tcpdump)
# the guest kernels' modules are .ko.xz (Debian 12) or .ko.zst (7.x); the tests use pgrep/ps
command -v xz >/dev/null 2>&1 || need+=(xz-utils)
command -v zstd >/dev/null 2>&1 || need+=(zstd)
command -v pgrep >/dev/null 2>&1 || need+=(procps)
command -v dpkg-deb >/dev/null 2>&1 || die "dpkg-deb missing: not a Debian machine?"
updated=0
apt_update() { if [ "$updated" -eq 0 ]; then log "apt-get update"; apt-get update -qq; updated=1; fi; }
if [ ${#need[@]} -gt 0 ]; then
    apt_update
    log "installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# ---------------------------------------------------------------- 2. guest packages (download only)
if [ -f "$KOUT/base.cpio.gz" ] && [ -f "$KOUT/vmlinuz" ] && [ -f "$KOUT/stamp" ] &&
    [ "$(cat "$KOUT/stamp")" = "$STAMP_KEY" ]; then
    log "up to date: $KOUT/vmlinuz $KOUT/base.cpio.gz (kernel $(cat "$KOUT/kernel-version"))"
    exit 0
fi
t0=$(date +%s)
mkdir -p "$CACHE/debs" "$KOUT"
# the kernel's packages, remembered per kernel (delete the file to move to a newer one)
KPKG_FILE="$CACHE/kernel-package-$ROCE_KERNEL"
[ "$ROCE_KERNEL" = 6.1 ] && [ -f "$CACHE/kernel-package" ] && [ ! -f "$KPKG_FILE" ] && mv "$CACHE/kernel-package" "$KPKG_FILE"
# sid's package lists: apt with a sources file, lists and caches of their own, naming the mirror
# of the host's own Debian entry
SID="$CACHE/apt-sid"
sid_opts() {
    echo "-o Dir::Etc::sourcelist=$SID/sources.list -o Dir::Etc::sourceparts=/dev/null"
    echo "-o Dir::State::Lists=$SID/lists -o Dir::Cache=$SID/cache"
}
sid_updated=0
sid_update() {
    [ "$sid_updated" -eq 0 ] || return 0
    local codename mirror keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
    mirror=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(IDENTIFIER)' |
        awk -v r="$codename" '$2 == r && $3 == "Packages" {print $1; exit}')
    [ -n "$mirror" ] || die "no Debian entry for $codename in the host's apt sources (the mirror for sid)"
    [ -f "$keyring" ] || die "$keyring missing (debian-archive-keyring)"
    mkdir -p "$SID/lists/partial" "$SID/cache/archives/partial"
    echo "deb [signed-by=$keyring] $mirror sid main" >"$SID/sources.list"
    log "apt-get update of sid from $mirror (lists in $SID)"
    # shellcheck disable=SC2046
    apt-get $(sid_opts) update -qq || die "apt-get update of sid failed"
    sid_updated=1
}
if [ -f "$KPKG_FILE" ]; then
    KPKG=$(cat "$KPKG_FILE")
elif [ "$ROCE_KERNEL" = 6.1 ]; then
    apt_update
    KPKG=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
    [ -n "$KPKG" ] || die "cannot tell which kernel package linux-image-amd64 depends on"
    case "$KPKG" in linux-image-6.1.*) ;; *) die "linux-image-amd64 depends on $KPKG, not a 6.1 kernel" ;; esac
elif [ "$ROCE_KERNEL" = 6.12 ]; then
    apt_update
    # no meta package names the 6.12 image: the newest ABI that apt knows (sort -V)
    KPKG=$(apt-cache search --names-only '^linux-image-6\.12\.[0-9]+\+deb12-amd64$' | awk '{print $1}' | sort -V | tail -1)
    [ -n "$KPKG" ] || die "apt knows no linux-image-6.12.*+deb12-amd64 package"
else
    sid_update
    # the newest amd64 image of sid (not -cloud-, -rt-: the version is followed by -amd64 alone),
    # and the packages that hold it from 7.x on: vmlinuz (binary), the modules (modules), and
    # modules.builtin with the config (base)
    # shellcheck disable=SC2046
    img=$(apt-cache $(sid_opts) search --names-only '^linux-image-[0-9]+\.[0-9]+\.[0-9]+[^-]*-amd64$' |
        awk '{print $1}' | sort -V | tail -1)
    [ -n "$img" ] || die "sid has no linux-image-*-amd64 package"
    # shellcheck disable=SC2046
    parts=$(apt-cache $(sid_opts) depends "$img" | awk '/^ *Depends: linux-(base|binary|modules)-/ {print $2}' | sort -u | tr '\n' ' ')
    KPKG=${parts:-$img}
    log "sid's newest kernel: $img (${KPKG% })"
fi
fetch() { # fetch PKG...: apt-get download into the cache unless a .deb of that package is there
    local missing=() opts=""
    for p in "$@"; do
        compgen -G "$CACHE/debs/${p}_*.deb" >/dev/null || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        if [ "${FROM_SID:-0}" = 1 ]; then
            sid_update
            opts=$(sid_opts)
        else
            apt_update
        fi
        log "apt-get download ${missing[*]}"
        # (as root, apt warns that the download is not sandboxed as _apt: expected here)
        # shellcheck disable=SC2086
        (cd "$CACHE/debs" && apt-get $opts download -qq "${missing[@]}" 2>&1 >/dev/null | grep -v '^W: Download is performed unsandboxed' >&2;
            exit "${PIPESTATUS[0]}") ||
            die "apt-get download ${missing[*]} failed"
    fi
}
# shellcheck disable=SC2086
if [ "$ROCE_KERNEL" = sid ]; then FROM_SID=1 fetch $KPKG; else fetch $KPKG; fi
# shellcheck disable=SC2086
fetch $GUEST_DEBS
echo "$KPKG" >"$KPKG_FILE"

ROOTFS="$CACHE/unpacked-$ROCE_KERNEL"
rm -rf "$ROOTFS"
mkdir -p "$ROOTFS"
for p in $KPKG $GUEST_DEBS; do
    deb=$(compgen -G "$CACHE/debs/${p}_*.deb" | sort | tail -1)
    dpkg-deb -x "$deb" "$ROOTFS"
done
# 7.x ships the modules (and vmlinuz) under usr/lib/modules only; depmod and the rest look in
# lib/modules
if [ ! -d "$ROOTFS/lib/modules" ] && [ -d "$ROOTFS/usr/lib/modules" ]; then
    mkdir -p "$ROOTFS/lib"
    ln -s ../usr/lib/modules "$ROOTFS/lib/modules"
fi
KVER=$(ls "$ROOTFS/lib/modules")
[ "$(echo "$KVER" | wc -w)" -eq 1 ] || die "expected one kernel in $ROOTFS/lib/modules, found: $KVER"
log "kernel $KVER (${KPKG% }), unpacked in $(($(date +%s) - t0)) s"
depmod -b "$ROOTFS" "$KVER"

# ---------------------------------------------------------------- 3. the base initramfs
STAGE="$CACHE/stage-$ROCE_KERNEL"
rm -rf "$STAGE"
mkdir -p "$STAGE"/{bin,sbin,dev,proc,sys,tmp,run,etc,lib,lib64,usr/bin,usr/sbin,usr/local/bin,usr/lib/x86_64-linux-gnu}
# busybox and its applets (a static binary: it runs on the host to list them)
cp "$ROOTFS/bin/busybox" "$STAGE/bin/busybox"
for a in $("$STAGE/bin/busybox" --list); do
    [ "$a" = busybox ] || ln -sf busybox "$STAGE/bin/$a"
done

# modules: the closure of $MODULES from modules.dep, in load order
MODDIR="$ROOTFS/lib/modules/$KVER"
declare -A seen=()
order=()
modpath() { # name -> relative path in modules.dep (either - or _ in file names)
    local n="$1" alt="${1//_/-}"
    awk -F: -v a="/$n.ko" -v b="/$alt.ko" '{k=$1; sub(/\.(xz|zst|gz)$/, "", k)}
        substr(k, length(k)-length(a)+1) == a || substr(k, length(k)-length(b)+1) == b {print $1; exit}' "$MODDIR/modules.dep"
}
add_path() { # relative path: its dependencies first (the last one in modules.dep first), then itself
    local rel="$1"
    [ -n "${seen[$rel]:-}" ] && return 0
    seen[$rel]=1
    local deps
    deps=$(awk -F': *' -v k="$rel" '$1 == k {print $2; exit}' "$MODDIR/modules.dep")
    local rev=()
    for d in $deps; do rev=("$d" "${rev[@]}"); done
    for d in "${rev[@]}"; do add_path "$d"; done
    order+=("$rel")
}
builtin=()
absent=()
for m in $MODULES; do
    optional=0
    case "$m" in *\?) m=${m%\?}; optional=1 ;; esac
    rel=$(modpath "$m")
    if [ -z "$rel" ] && [ "$optional" = 1 ] && ! grep -Eq "/(${m}|${m//_/-})\.ko\$" "$MODDIR/modules.builtin" 2>/dev/null; then
        absent+=("$m")
        continue
    fi
    if [ -z "$rel" ]; then
        # 6.12 builds virtio, virtio_ring and virtio_pci* into the kernel
        if grep -Eq "/(${m}|${m//_/-})\.ko\$" "$MODDIR/modules.builtin" 2>/dev/null; then
            builtin+=("$m")
            continue
        fi
        die "module $m neither in $MODDIR/modules.dep nor in modules.builtin"
    fi
    add_path "$rel"
done
[ ${#builtin[@]} -eq 0 ] || log "built into the kernel: ${builtin[*]}"
[ ${#absent[@]} -eq 0 ] || log "not in this kernel (optional): ${absent[*]}"
mkdir -p "$STAGE/lib/modules/$KVER"
: >"$STAGE/etc/modules.load"
for rel in "${order[@]}"; do
    mkdir -p "$STAGE/lib/modules/$KVER/$(dirname "$rel")"
    case "$rel" in
    *.ko.xz) xz -dc "$MODDIR/$rel" >"$STAGE/lib/modules/$KVER/${rel%.xz}"; rel=${rel%.xz} ;;
    *.ko.zst) zstd -qdc "$MODDIR/$rel" >"$STAGE/lib/modules/$KVER/${rel%.zst}"; rel=${rel%.zst} ;;
    *.ko.gz) gzip -dc "$MODDIR/$rel" >"$STAGE/lib/modules/$KVER/${rel%.gz}"; rel=${rel%.gz} ;;
    *) cp "$MODDIR/$rel" "$STAGE/lib/modules/$KVER/$rel" ;;
    esac
    echo "/lib/modules/$KVER/$rel" >>"$STAGE/etc/modules.load"
done
log "modules (${#order[@]}): $(for r in "${order[@]}"; do basename "${r%%.ko*}"; done | tr '\n' ' ')"

# rdma-core tools, the rxe provider, and every shared library ldd names
LIBPATH="$ROOTFS/usr/lib/x86_64-linux-gnu:$ROOTFS/lib/x86_64-linux-gnu:$ROOTFS/usr/lib/x86_64-linux-gnu/libibverbs"
copy_libs() { # ELF file -> copy the libraries it needs (from the unpacked packages first, then the host)
    local out
    out=$(LD_LIBRARY_PATH="$LIBPATH" ldd "$1" 2>&1) || die "ldd $1: $out"
    if echo "$out" | grep -q 'not found'; then die "ldd $1: $(echo "$out" | grep 'not found')"; fi
    echo "$out" | awk '/=>/ {print $3} !/=>/ && $1 ~ /^\// {print $1}' | while read -r lib; do
        [ -f "$lib" ] || continue
        local dest
        case "$lib" in
        "$ROOTFS"/*) dest="/${lib#"$ROOTFS"/}" ;;
        *) dest="$lib" ;;
        esac
        # usr-merge: the guest has no /lib -> /usr/lib symlink, keep the loader at the path ELF names
        mkdir -p "$STAGE$(dirname "$dest")"
        [ -e "$STAGE$dest" ] || cp -L "$lib" "$STAGE$dest"
    done
}
tools_found=()
for t in $GUEST_TOOLS; do
    src=""
    for d in usr/bin usr/sbin bin sbin; do
        [ -x "$ROOTFS/$d/$t" ] && src="$ROOTFS/$d/$t" && break
    done
    [ -n "$src" ] || die "tool $t not found in the unpacked packages"
    cp "$src" "$STAGE/usr/bin/$t"
    copy_libs "$src"
    tools_found+=("$t")
done
# `rdma` (iproute2) from the host: same Debian release as the guest's packages
RDMA=$(command -v rdma) || die "rdma (iproute2) missing on the host"
cp "$RDMA" "$STAGE/usr/sbin/rdma"
copy_libs "$RDMA"
# the rxe provider and its driver file
PROV="$ROOTFS/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so"
[ -f "$PROV" ] || die "rxe provider $PROV missing"
mkdir -p "$STAGE/usr/lib/x86_64-linux-gnu/libibverbs" "$STAGE/etc/libibverbs.d"
cp "$PROV" "$STAGE/usr/lib/x86_64-linux-gnu/libibverbs/"
copy_libs "$PROV"
cp "$ROOTFS/etc/libibverbs.d/rxe.driver" "$STAGE/etc/libibverbs.d/"
# the dynamic loader at its ELF path, and a library search path
if [ ! -e "$STAGE/lib64/ld-linux-x86-64.so.2" ]; then
    cp -L /lib64/ld-linux-x86-64.so.2 "$STAGE/lib64/"
fi
# libgcc_s: glibc dlopens it to unwind in pthread_exit/pthread_cancel (rping's CQ thread ends
# with pthread_exit); ldd does not name it
for g in "$ROOTFS/usr/lib/x86_64-linux-gnu/libgcc_s.so.1" "$ROOTFS/lib/x86_64-linux-gnu/libgcc_s.so.1" \
    /usr/lib/x86_64-linux-gnu/libgcc_s.so.1 /lib/x86_64-linux-gnu/libgcc_s.so.1; do
    if [ -f "$g" ]; then
        mkdir -p "$STAGE/usr/lib/x86_64-linux-gnu"
        cp -L "$g" "$STAGE/usr/lib/x86_64-linux-gnu/libgcc_s.so.1"
        break
    fi
done
[ -f "$STAGE/usr/lib/x86_64-linux-gnu/libgcc_s.so.1" ] || die "libgcc_s.so.1 not found (rping's pthread_exit needs it)"
printf '/usr/lib/x86_64-linux-gnu\n/lib/x86_64-linux-gnu\n' >"$STAGE/etc/ld.so.conf"
ldconfig -r "$STAGE" 2>/dev/null || log "ldconfig -r failed (the guest's /init sets LD_LIBRARY_PATH anyway)"
cat >"$STAGE/etc/passwd" <<'PW'
root:x:0:0:root:/root:/bin/sh
PW
echo "root:x:0:" >"$STAGE/etc/group"
printf '127.0.0.1 localhost\n198.18.0.1 host\n198.18.0.2 guest\nfd00::1 host6\nfd00::2 guest6\n' >"$STAGE/etc/hosts"

install -m 0755 "$HERE/init.sh" "$STAGE/init"
install -m 0644 "$HERE/guest-lib.sh" "$STAGE/lib/interop.sh"
echo "$KVER" >"$STAGE/etc/kernel-version"

(cd "$STAGE" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet --owner=0:0 | gzip -6) >"$KOUT/base.cpio.gz.tmp"
mv "$KOUT/base.cpio.gz.tmp" "$KOUT/base.cpio.gz"
if [ -f "$ROOTFS/boot/vmlinuz-$KVER" ]; then
    cp "$ROOTFS/boot/vmlinuz-$KVER" "$KOUT/vmlinuz"
else
    cp "$MODDIR/vmlinuz" "$KOUT/vmlinuz" || die "no vmlinuz in boot/ or $MODDIR"
fi
echo "$KVER" >"$KOUT/kernel-version"
echo "$STAMP_KEY" >"$KOUT/stamp"
# The unpacked tree is large (the whole kernel); the .debs stay for the next rebuild.
rm -rf "$ROOTFS"
rm -rf "$STAGE"
log "built $KOUT/base.cpio.gz ($(du -k "$KOUT/base.cpio.gz" | cut -f1) KiB: busybox, ${#order[@]} modules, ${#tools_found[@]} tools) and $KOUT/vmlinuz (kernel $KVER) in $(($(date +%s) - t0)) s"
