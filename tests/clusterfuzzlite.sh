#!/usr/bin/env bash
# Runs .clusterfuzzlite/build.sh as ClusterFuzzLite's builder does ($SRC holding the project as
# $SRC/roce, an empty $OUT, `cargo fuzz build -O` inside), then checks what a fuzzing run would
# start from: every cargo-fuzz target in $OUT as an executable, its seed corpus zip holding the
# seeds and the minimised corpus, and each binary run once over that corpus (libFuzzer -runs=0:
# every input executed, none may crash under the address sanitizer). The one difference from the
# builder image: its Rust is nightly, ours stable with RUSTC_BOOTSTRAP=1 (cargo-fuzz's -Z flags).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
log() { echo "clusterfuzzlite: $*" >&2; }
die() { echo "clusterfuzzlite: error: $*" >&2; exit 1; }
command -v cargo-fuzz >/dev/null || die "cargo-fuzz missing (tests/setup.sh installs it)"
command -v zip >/dev/null && command -v unzip >/dev/null || die "zip/unzip missing (tests/setup.sh installs them)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src" "$work/out"
ln -s "$REPO" "$work/src/roce"
start=$(date +%s)
SRC="$work/src" OUT="$work/out" RUSTC_BOOTSTRAP=1 bash "$REPO/.clusterfuzzlite/build.sh"
log "build.sh done in $(($(date +%s) - start)) s"

targets=$(cd fuzz && cargo fuzz list)
[ -n "$targets" ] || die "cargo fuzz list gave no target"
for t in $targets; do
    bin="$work/out/$t"
    [ -x "$bin" ] || die "$t: no executable in \$OUT"
    zip="$work/out/${t}_seed_corpus.zip"
    [ -s "$zip" ] || die "$t: no seed corpus zip"
    want=$(( $(ls fuzz/seeds/"$t" | wc -l) + $(ls fuzz/corpus/"$t" | wc -l) ))
    got=$(unzip -Z1 "$zip" | wc -l)
    [ "$got" -eq "$want" ] || die "$t: the zip holds $got inputs, fuzz/seeds and fuzz/corpus $want"
    mkdir -p "$work/run/$t"
    unzip -q "$zip" -d "$work/run/$t"
    "$bin" -runs=0 "$work/run/$t" >"$work/run/$t.log" 2>&1 || { cat "$work/run/$t.log" >&2; die "$t: failed on its corpus"; }
    grep -q "INITED" "$work/run/$t.log" || { cat "$work/run/$t.log" >&2; die "$t: libFuzzer did not run the corpus"; }
    log "$t: $got inputs run under ASan, none failed"
done
