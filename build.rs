//! Builds the drop-in C library (crates/roce-verbs) and hands it to `roce exec`, which carries
//! it inside the `roce` binary: a user who installed only the binary (`cargo install --path .`)
//! can still run an unmodified program on roce, with no build tree around.
//!
//! How (spec/capi.md, "How the library is linked"): a nested `cargo rustc` builds roce-verbs as
//! a staticlib in a target directory of its own (`<target>/roce-verbs-lib`, shared by every
//! profile and target of the outer build, so it is built once), then `cc -shared` links it
//! with a GNU ld version script made from crates/roce-verbs/symbols.tsv: every symbol under the
//! version node the real rdma-core 44 gives it, everything else hidden. rustc's own cdylib
//! link cannot do this (it passes a version script of its own; reference/capi-abi.md).
//!
//! `ROCE_VERBS_SO=PATH` embeds a library built elsewhere instead; the nested build itself runs
//! with `ROCE_VERBS_NESTED=1`, which makes this script embed nothing (roce-verbs depends on
//! this package's library, so without it the nested build would recurse).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "crates/roce-verbs/symtab.rs"]
#[allow(dead_code)]
mod symtab;

fn main() {
    println!("cargo:rerun-if-env-changed=ROCE_VERBS_NESTED");
    println!("cargo:rerun-if-env-changed=ROCE_VERBS_SO");
    println!("cargo:rerun-if-changed=build.rs");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let dest = out.join("libroce_verbs.so");
    if env::var_os("ROCE_VERBS_NESTED").is_some() {
        // Inside the nested build: the library being built has no copy of itself.
        std::fs::write(&dest, b"").expect("write the empty placeholder");
        return;
    }
    if let Some(p) = env::var_os("ROCE_VERBS_SO") {
        std::fs::copy(&p, &dest).unwrap_or_else(|e| panic!("ROCE_VERBS_SO={}: {e}", Path::new(&p).display()));
        return;
    }
    let root = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    // What the library is made of: a change anywhere rebuilds it (the nested cargo is
    // incremental, so an unrelated change costs a no-op build).
    for p in [
        "crates/roce-verbs",
        "crates/roce-cm/src",
        "crates/roce-net/src",
        "crates/roce-wire/src",
        "crates/roce-sa/src",
        "crates/roce-decode/src",
        "src",
        "Cargo.lock",
    ] {
        println!("cargo:rerun-if-changed={p}");
    }
    let target_dir = cargo_target_dir(&out).join("roce-verbs-lib");
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["rustc", "--release", "-p", "roce-verbs", "--lib", "--crate-type", "staticlib", "--manifest-path"])
        .arg(root.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .env("ROCE_VERBS_NESTED", "1");
    if root.join("Cargo.lock").exists() {
        cmd.arg("--locked");
    }
    // The outer build's flags are for its own target (the guest's static `roce` is built with
    // +crt-static, which a shared library cannot take): the nested build uses the host's defaults.
    for v in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
    ] {
        cmd.env_remove(v);
    }
    let status = cmd.status().expect("run the nested cargo for roce-verbs");
    assert!(status.success(), "the nested build of crates/roce-verbs failed ({status})");
    let staticlib = target_dir.join("release").join("libroce_verbs.a");

    let table =
        std::fs::read_to_string(root.join("crates/roce-verbs/symbols.tsv")).expect("crates/roce-verbs/symbols.tsv");
    let syms = symtab::parse(&table).unwrap_or_else(|e| panic!("crates/roce-verbs/symbols.tsv: {e}"));
    let map = out.join("roce-verbs.map");
    std::fs::write(&map, symtab::version_script(&syms)).expect("write the version script");
    let cc = env::var_os("CC").unwrap_or_else(|| "cc".into());
    let status = Command::new(cc)
        .args(["-shared", "-o"])
        .arg(&dest)
        .arg("-Wl,--whole-archive")
        .arg(&staticlib)
        .arg("-Wl,--no-whole-archive")
        .arg(format!("-Wl,--version-script={}", map.display()))
        // One file answers to every soname (glibc keeps one link map for them): the soname
        // recorded is libibverbs's, the first a program loads.
        .args(["-Wl,-soname,libibverbs.so.1", "-Wl,--gc-sections", "-Wl,-z,now", "-Wl,-z,relro", "-Wl,--strip-debug"])
        .args(["-lpthread", "-ldl", "-lm", "-lgcc_s", "-lc"])
        .status()
        .expect("run cc to link the shared library");
    assert!(status.success(), "linking libroce_verbs.so failed ({status})");
}

/// The outer build's target directory: the outermost ancestor of OUT_DIR that cargo tagged
/// with CACHEDIR.TAG (OUT_DIR is `<target>[/<triple>]/<profile>/build/<pkg>-<hash>/out`, and
/// `<target>/<triple>` is tagged too: the outermost one is shared by every target).
fn cargo_target_dir(out: &Path) -> PathBuf {
    out.ancestors()
        .filter(|p| p.join("CACHEDIR.TAG").is_file())
        .last()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| out.join("target"))
}
