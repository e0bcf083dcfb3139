//! Debian's rdma-core programs (rdmacm-utils, ibverbs-utils) and perftest as the packages ship
//! them: unpacked once (dpkg-deb -x) from the .debs that tests/interop/setup.sh downloaded
//! with `apt-get download`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The unpacked packages (usr/bin/…), made once per run.
pub fn root() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        let debs = repo().join("target/interop/cache/debs");
        let dest = repo().join("target/capi/debian");
        let have =
            |d: &Path| ["mckey", "ibv_devinfo", "ib_write_bw"].iter().all(|b| d.join("usr/bin").join(b).is_file());
        if have(&dest) {
            return dest;
        }
        let tmp = repo().join(format!("target/capi/debian.tmp.{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).unwrap();
        for pkg in ["rdmacm-utils", "ibverbs-utils", "perftest"] {
            let deb = std::fs::read_dir(&debs)
                .unwrap_or_else(|e| panic!("{}: {e} (run bash tests/interop/setup.sh)", debs.display()))
                .filter_map(|e| e.ok().map(|e| e.path()))
                .find(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(&format!("{pkg}_"))))
                .unwrap_or_else(|| panic!("no {pkg}_*.deb in {} (run bash tests/interop/setup.sh)", debs.display()));
            let st = Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&tmp).status().unwrap();
            assert!(st.success(), "dpkg-deb -x {}", deb.display());
        }
        // Another test process may have unpacked them meanwhile: its copy stays.
        if !have(&dest) {
            let _ = std::fs::remove_dir_all(&dest);
        }
        if std::fs::rename(&tmp, &dest).is_err() {
            assert!(have(&dest), "cannot move {} to {}", tmp.display(), dest.display());
            let _ = std::fs::remove_dir_all(&tmp);
        }
        dest
    })
}

/// A program of the packages (`mckey`, `udaddy`, `ibv_devinfo`, …).
pub fn bin(name: &str) -> PathBuf {
    let p = root().join("usr/bin").join(name);
    assert!(p.is_file(), "{} is not in Debian's packages", p.display());
    p
}

/// The directory `roce exec` writes the library to (for LD_LIBRARY_PATH by hand).
pub fn lib_dir() -> PathBuf {
    let out = Command::new(env!("CARGO_BIN_EXE_roce")).args(["exec", "--print-lib-dir"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// Debian 12's libibverbs-dev and librdmacm-dev headers (`apt-get download`, `dpkg-deb -x`
/// under target/capi/headers; never installed), for the small C programs the tests build.
pub fn headers() -> &'static Path {
    static INC: OnceLock<PathBuf> = OnceLock::new();
    INC.get_or_init(|| {
        let dir = repo().join("target/capi/headers");
        let inc = dir.join("usr/include");
        if inc.join("rdma/rdma_cma.h").is_file() {
            return inc;
        }
        std::fs::create_dir_all(&dir).unwrap();
        let download =
            || Command::new("apt-get").args(["download", "libibverbs-dev", "librdmacm-dev"]).current_dir(&dir).status();
        if !download().is_ok_and(|s| s.success()) {
            let _ = Command::new("apt-get").arg("update").status();
            assert!(download().is_ok_and(|s| s.success()), "apt-get download libibverbs-dev librdmacm-dev");
        }
        for e in std::fs::read_dir(&dir).unwrap().filter_map(|e| e.ok()) {
            if e.path().extension().is_some_and(|x| x == "deb") {
                assert!(Command::new("dpkg-deb").arg("-x").arg(e.path()).arg(&dir).status().unwrap().success());
            }
        }
        assert!(inc.join("rdma/rdma_cma.h").is_file(), "{}", inc.display());
        inc
    })
}

/// Build the C program `source` as `dir/name` against Debian's headers, linked to roce's
/// library by its soname (`-l:librdmacm.so.1`, which is libibverbs.so.1 too).
pub fn build_c(dir: &Path, name: &str, source: &str) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let bin = dir.join(name);
    let ok = Command::new("cc")
        .arg(format!("-I{}", headers().display()))
        .args(["-O2", "-Wall"])
        .arg(&src)
        .arg("-o")
        .arg(&bin)
        .arg(format!("-L{}", lib_dir().display()))
        .arg("-l:librdmacm.so.1")
        .arg("-l:libibverbs.so.1")
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "cc {}", src.display());
    bin
}

/// Debian 12's own libibverbs1 and librdmacm1 (and libnl, which they need), unpacked once from
/// the .debs tests/interop/setup.sh downloaded: what a program built for the kernel rxe guest
/// links against.
fn real_libs() -> &'static Path {
    static LIBS: OnceLock<PathBuf> = OnceLock::new();
    LIBS.get_or_init(|| {
        let debs = repo().join("target/interop/cache/debs");
        let dest = repo().join("target/capi/real-libs");
        let lib = dest.join("usr/lib/x86_64-linux-gnu");
        if lib.join("librdmacm.so.1").exists() && lib.join("libibverbs.so.1").exists() {
            return lib;
        }
        let tmp = repo().join(format!("target/capi/real-libs.tmp.{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).unwrap();
        for pkg in ["libibverbs1", "librdmacm1", "libnl-3-200", "libnl-route-3-200"] {
            let deb = std::fs::read_dir(&debs)
                .unwrap_or_else(|e| panic!("{}: {e} (run bash tests/interop/setup.sh)", debs.display()))
                .filter_map(|e| e.ok().map(|e| e.path()))
                .find(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(&format!("{pkg}_"))))
                .unwrap_or_else(|| panic!("no {pkg}_*.deb in {}", debs.display()));
            assert!(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&tmp).status().unwrap().success());
        }
        if std::fs::rename(&tmp, &dest).is_err() {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        assert!(lib.join("librdmacm.so.1").exists(), "{}", lib.display());
        lib
    })
}

/// Build the C program `source` as `dir/name` against Debian's headers and Debian's own
/// libraries (each symbol bound to its library's version: RDMACM_1.0 from librdmacm.so.1,
/// IBVERBS_1.x from libibverbs.so.1), so that it runs on the guest's real libraries and, under
/// `roce exec`, on ours, which export both sets.
pub fn build_c_for_both(dir: &Path, name: &str, source: &str) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let bin = dir.join(name);
    let lib = real_libs();
    let ok = Command::new("cc")
        .arg(format!("-I{}", headers().display()))
        .args(["-O2", "-Wall"])
        .arg(&src)
        .arg("-o")
        .arg(&bin)
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-Wl,-rpath-link,{}", lib.display()))
        .arg("-l:librdmacm.so.1")
        .arg("-l:libibverbs.so.1")
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "cc {}", src.display());
    bin
}
