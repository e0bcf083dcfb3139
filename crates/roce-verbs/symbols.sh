#!/usr/bin/env bash
# symbols.sh — re-derive the first five columns of symbols.tsv from Debian 12's .debs.
#
# Usage:  crates/roce-verbs/symbols.sh [SCRATCH_DIR]      (default: target/capi/symbols-check)
#   Downloads (never installs) libibverbs1, librdmacm1 and ibverbs-providers 44.0-2 with
#   `apt-get download`, unpacks them with `dpkg-deb -x`, and prints to stdout, tab-separated:
#     library  symbol  node  default  kind
#   for every DEFINED dynamic symbol of libibverbs.so.1 and librdmacm.so.1 (readelf --dyn-syms -W;
#   the ABS symbols that only name a version node are left out), plus the 11 symbols that Debian's
#   perftest imports from libmlx5.so.1 (MLX5_1.3/1.7/1.10/1.21) and libefa.so.1 (EFA_1.1).
#   default is "@@" (default version) or "@" (non-default/compat version; objdump -T shows those in
#   parentheses); kind is func|object.
#
# Check the table with:
#   diff <(crates/roce-verbs/symbols.sh | sort) \
#        <(grep -v '^#' crates/roce-verbs/symbols.tsv | cut -f1-5 | sort)
#
# The remaining columns of symbols.tsv (ret, note) are NOT derived here: they were classified by
# reading rdma-core v44.0's headers and sources (libibverbs/verbs.h, driver.h, verbs.c, device.c,
# cmd*.c, librdmacm/rdma_cma.h, cma.c, rsocket.c, providers/mlx5/mlx5dv.h, providers/efa/efadv.h).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
scratch=${1:-$here/../../target/capi/symbols-check}
mkdir -p "$scratch/debs" "$scratch/root"
scratch=$(cd "$scratch" && pwd)
cd "$scratch/debs"
for p in libibverbs1 librdmacm1 ibverbs-providers; do
    ls ${p}_*.deb >/dev/null 2>&1 || apt-get download "$p" >&2
done
for d in *.deb; do dpkg-deb -x "$d" ../root; done
lib=$scratch/root/usr/lib/x86_64-linux-gnu

# perftest's imports from the provider libraries (measured: objdump -T of Debian's perftest binaries).
perftest_imports='mlx5dv_create_mkey mlx5dv_destroy_mkey mlx5dv_qp_ex_from_ibv_qp_ex mlx5dv_crypto_login
mlx5dv_dek_create mlx5dv_dek_destroy mlx5dv_create_qp mlx5dv_devx_general_cmd mlx5dv_open_device
efadv_create_qp_ex efadv_query_device'

# dump LIBRARY FILE: one line per defined, versioned dynamic symbol.
dump() {
    readelf --dyn-syms -W "$2" | awk -v lib="$1" '
        $1 ~ /^[0-9]+:$/ && $7 != "UND" && $7 != "ABS" && $8 ~ /@/ {
            name = $8; dflt = "@"
            if (index(name, "@@")) { dflt = "@@"; split(name, a, "@@") } else { split(name, a, "@") }
            kind = ($4 == "FUNC" || $4 == "IFUNC") ? "func" : ($4 == "OBJECT" ? "object" : tolower($4))
            print lib "\t" a[1] "\t" a[2] "\t" dflt "\t" kind
        }'
}

{
    dump ibverbs "$lib/libibverbs.so.1"
    dump rdmacm "$lib/librdmacm.so.1"
    dump mlx5 "$lib/libmlx5.so.1" | awk -F'\t' '$3 ~ /^MLX5_1\.(3|7|10|21)$/'
    dump efa "$lib/libefa.so.1" | awk -F'\t' '$3 == "EFA_1.1"'
} | awk -F'\t' -v keep="$perftest_imports" '
    BEGIN { n = split(keep, k, /[ \n]+/); for (i = 1; i <= n; i++) want[k[i]] = 1 }
    ($1 == "ibverbs" || $1 == "rdmacm" || ($2 in want))' \
  | awk -F'\t' 'BEGIN { r["ibverbs"] = 1; r["rdmacm"] = 2; r["mlx5"] = 3; r["efa"] = 4 }
                { print r[$1] "\t" $0 }' \
  | sort -t$'\t' -k1,1n -k4,4V -k3,3 -k5,5r | cut -f2-
