#!/bin/bash -eu
# ClusterFuzzLite's build step (the OSS-Fuzz builder runs it with $SRC and $OUT set): builds every
# cargo-fuzz target of fuzz/ with `cargo fuzz build -O` (address sanitizer, libFuzzer) and puts
# each binary in $OUT with its seed corpus (fuzz/seeds/T and the minimised fuzz/corpus/T) as
# $OUT/T_seed_corpus.zip. tests/clusterfuzzlite.sh runs this same script in the test command, so
# it cannot rot.
cd "$SRC/roce/fuzz"
cargo fuzz build -O
built="${CARGO_TARGET_DIR:-$SRC/roce/fuzz/target}/x86_64-unknown-linux-gnu/release"
for target in $(cargo fuzz list); do
    cp "$built/$target" "$OUT/$target"
    rm -f "$OUT/${target}_seed_corpus.zip"
    # -j: the files' names only; seeds and corpus never share a name (seed-* against hashes).
    zip -qj "$OUT/${target}_seed_corpus.zip" seeds/"$target"/* corpus/"$target"/*
done
