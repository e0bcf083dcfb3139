#!/usr/bin/env bash
# The interop suite N times in a row on each kernel (issue 36 item 6: is anything flaky?).
# A documented campaign, not part of the test command: `bash tests/interop/repeat.sh [N] [kernels]`
# (default 5 rounds of "6.1 6.12 sid"). Each round runs the kernels' suites side by side (one
# guest per kernel at a time, tests/interop/harness.rs), waits for all, and logs each suite to
# target/interop/repeat/<round>-<kernel>.log; the table at the end gives every suite's
# passed/failed counts, its seconds and its failing tests. Needs what the test command's
# setup left: root, the guests (tests/interop/setup.sh), the static roce for the guest.
set -uo pipefail
cd "$(dirname "$0")/../.."
rounds="${1:-5}"
kernels="${2:-6.1 6.12 sid}"
case "$rounds" in '' | *[!0-9]*) echo "repeat: rounds must be a number, not '$rounds'" >&2; exit 2 ;; esac

interop_bin=$(cargo test --locked --test interop --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\))$/\1/p')
[ -x "$interop_bin" ] || { echo "repeat: no interop test binary" >&2; exit 1; }
cargo build --locked --workspace >/dev/null 2>&1 || { echo "repeat: the workspace does not build" >&2; exit 1; }
out=target/interop/repeat
mkdir -p "$out"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
summary="$out/summary.txt"
printf 'commit %s, %s rounds, kernels: %s, started %s\n' "$commit" "$rounds" "$kernels" "$(date -u +%FT%TZ)" >"$summary"
printf '%-6s %-6s %-7s %-7s %-7s %s\n' round kernel passed failed seconds failures >>"$summary"

any_failed=0
for round in $(seq 1 "$rounds"); do
    pids=()
    for kernel in $kernels; do
        (
            start=$(date +%s)
            ROCE_KERNEL="$kernel" "$interop_bin" >"$out/$round-$kernel.log" 2>&1
            echo $? >"$out/$round-$kernel.rc"
            echo $(($(date +%s) - start)) >"$out/$round-$kernel.secs"
        ) &
        pids+=($!)
    done
    wait "${pids[@]}"
    for kernel in $kernels; do
        log="$out/$round-$kernel.log"
        result=$(grep -E '^test result:' "$log" | tail -1)
        passed=$(sed -n 's/.* \([0-9]*\) passed.*/\1/p' <<<"$result")
        failed=$(sed -n 's/.* \([0-9]*\) failed.*/\1/p' <<<"$result")
        failures=$(sed -n 's/^test \(.*\) \.\.\. FAILED$/\1/p' "$log" | tr '\n' ' ')
        [ "$(cat "$out/$round-$kernel.rc")" = 0 ] || any_failed=1
        printf '%-6s %-6s %-7s %-7s %-7s %s\n' "$round" "$kernel" "${passed:-?}" "${failed:-?}" \
            "$(cat "$out/$round-$kernel.secs")" "${failures:--}" >>"$summary"
    done
    tail -n "$(wc -w <<<"$kernels")" "$summary"
done
cat "$summary"
exit "$any_failed"
