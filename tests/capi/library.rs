//! The library as the dynamic loader and Debian's device tools see it: every symbol of the real
//! libibverbs.so.1/librdmacm.so.1 (rdma-core 44.0-2) with its version node, nothing else; the
//! device `roce0` as Debian's `ibv_devices` and `ibv_devinfo` print it; `roce exec` refusing a
//! bad configuration before the program runs; no configuration is no device.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use crate::common::netns::Netns;
use crate::debian;

/// (name, node, default) of every defined dynamic symbol of `so`, the version nodes' own ABS
/// symbols left out.
fn exported(so: &Path) -> BTreeSet<(String, String, bool)> {
    let out = Command::new("readelf").args(["--dyn-syms", "-W"]).arg(so).output().expect("readelf (binutils)");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let mut set = BTreeSet::new();
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 8 || f[6] == "UND" || f[6] == "Ndx" || f[6] == "ABS" {
            continue;
        }
        let name = f[7];
        let (sym, node, default) = if let Some((s, n)) = name.split_once("@@") {
            (s, n, true)
        } else if let Some((s, n)) = name.split_once('@') {
            (s, n, false)
        } else {
            (name, "", true)
        };
        set.insert((sym.to_string(), node.to_string(), default));
    }
    set
}

/// The table of the real libraries' exports (crates/roce-verbs/symbols.tsv).
fn table() -> BTreeSet<(String, String, bool)> {
    let tsv =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/roce-verbs/symbols.tsv")).unwrap();
    tsv.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let c: Vec<&str> = l.split('\t').collect();
            (c[1].to_string(), c[2].to_string(), c[3] == "@@")
        })
        .collect()
}

#[test]
fn the_library_exports_every_symbol_of_rdma_core_44_with_its_version_and_nothing_else() {
    let so = debian::lib_dir().join("libroce_verbs.so");
    let ours = exported(&so);
    let real = table();
    let missing: Vec<_> = real.difference(&ours).collect();
    let extra: Vec<_> = ours.difference(&real).collect();
    assert!(missing.is_empty(), "missing from the library: {missing:?}");
    assert!(extra.is_empty(), "exported beyond the real libraries: {extra:?}");
    assert!(real.len() > 250, "the table has {} symbols", real.len());
    // One file answers to every soname.
    for s in ["libibverbs.so.1", "librdmacm.so.1", "libmlx5.so.1", "libefa.so.1"] {
        let p = debian::lib_dir().join(s);
        assert_eq!(std::fs::canonicalize(&p).unwrap(), std::fs::canonicalize(&so).unwrap(), "{}", p.display());
    }
}

/// `roce exec … -- PROGRAM` in `ns`.
pub fn exec(ns: &Netns, roce_args: &[&str], program: &Path, args: &[&str]) -> Command {
    let mut c = ns.roce(["exec"]);
    c.args(roce_args).arg("--").arg(program).args(args);
    c
}

fn text(o: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn debians_device_tools_list_the_device_as_rxe_shows_its_port() {
    let ns = Netns::veth_pair("devinfo");
    ns.sh("ip addr add 198.18.2.1/24 dev veth0");
    let udp = ["-I", "198.18.2.1", "--transport", "udp"];
    let o = exec(&ns, &udp, &debian::bin("ibv_devices"), &[]).output().unwrap();
    assert!(o.status.success() && text(&o).contains("roce0"), "{}", text(&o));
    let o = exec(&ns, &udp, &debian::bin("ibv_devinfo"), &["-v"]).output().unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    for want in [
        "hca_id:\troce0",
        "vendor_id:\t\t\t0xffffff",
        "state:\t\t\tPORT_ACTIVE (4)",
        "link_layer:\t\tEthernet",
        "active_mtu:\t\t1024 (3)",
        ", RoCE v2",
        "GID[  1]:\t\t::ffff:198.18.2.1, RoCE v2",
    ] {
        assert!(t.contains(want), "ibv_devinfo -v lacks {want:?}:\n{t}");
    }
    assert!(t.contains("GID[  0]:\t\tfe80::"), "the link-local GID from the MAC:\n{t}");
    // The real libraries are never loaded: the loader finds librdmacm.so.1 in our directory,
    // and that one file is libibverbs.so.1 too (its soname), so nothing else is looked up.
    let dir = debian::lib_dir().display().to_string();
    for prog in ["mckey", "ibv_devinfo"] {
        let mut ldd = ns.cmd("ldd");
        ldd.arg(debian::bin(prog)).env("LD_LIBRARY_PATH", debian::lib_dir());
        let t = text(&ldd.output().unwrap());
        let rdma: Vec<&str> = t.lines().filter(|l| l.contains("libibverbs") || l.contains("librdmacm")).collect();
        assert!(
            !rdma.is_empty() && rdma.iter().all(|l| l.contains(&dir)),
            "{prog}: rdma-core's libraries from {dir}:\n{t}"
        );
    }
}

#[test]
fn no_configuration_is_no_device_and_bad_configuration_is_refused_before_the_program_runs() {
    // The library without ROCE_ADDR: no device (ENODEV), as on a host without RDMA; mckey's
    // own words for it.
    let o = Command::new(debian::bin("mckey"))
        .args(["-m", "239.1.2.3"])
        .env("LD_LIBRARY_PATH", debian::lib_dir())
        .env_remove("ROCE_ADDR")
        .output()
        .unwrap();
    let t = text(&o);
    assert!(!o.status.success() && t.contains("No RDMA devices were detected"), "{t}");
    let o = Command::new(debian::bin("ibv_devices"))
        .env("LD_LIBRARY_PATH", debian::lib_dir())
        .env_remove("ROCE_ADDR")
        .output()
        .unwrap();
    assert!(!text(&o).contains("roce0"), "{}", text(&o));

    let ns = Netns::veth_pair("execbad");
    ns.sh("ip addr add 198.18.2.1/24 dev veth0");
    let mckey = debian::bin("mckey");
    for (args, code, says) in [
        (vec!["-I", "198.18.2.1", "--sa", "fd00::2"], 2, "different families"),
        (vec!["-I", "198.18.2.9", "--transport", "udp"], 3, "is not an address of veth0"),
        (
            vec!["-I", "198.18.2.1", "--transport", "udp", "--mac", "02:00:00:00:00:01"],
            2,
            "--mac needs --transport raw",
        ),
        (vec!["-I", "198.18.2.1", "--iface", "nope0"], 3, "no interface named \"nope0\""),
        (vec!["-I", "198.51.100.1"], 3, "no interface has 198.51.100.1"),
    ] {
        let o = exec(&ns, &args, &mckey, &["-m", "239.1.2.3"]).output().unwrap();
        let t = text(&o);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {t}");
        assert!(t.contains(says) && t.lines().count() == 1, "{args:?}: one line saying {says:?}: {t}");
        assert!(!t.contains("mckey:"), "{args:?}: the program did not run: {t}");
    }
    let o = exec(&ns, &["-I", "198.18.2.1"], Path::new("/nonexistent/prog"), &[]).output().unwrap();
    assert_eq!(o.status.code(), Some(127), "{}", text(&o));
}

/// The names of the library's `#[no_mangle]` items (what it implements), read from its sources
/// as the stubs' generator reads them.
fn implemented() -> BTreeSet<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/roce-verbs/src");
    let mut out = BTreeSet::new();
    for e in std::fs::read_dir(dir).unwrap().filter_map(|e| e.ok()) {
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        let mut armed = false;
        for l in text.lines().map(str::trim) {
            if l == "#[no_mangle]" || l == "#[unsafe(no_mangle)]" {
                armed = true;
            } else if armed {
                let name = l.split(" fn ").nth(1).or_else(|| l.split("static mut ").nth(1));
                if let Some(n) = name {
                    out.insert(n.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect());
                    armed = false;
                } else if !l.starts_with("#[") && !l.starts_with("//") {
                    armed = false;
                }
            }
        }
    }
    out
}

#[test]
fn spec_capi_md_lists_every_symbol_with_its_status() {
    let page = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("spec/capi.md")).unwrap();
    let rows: BTreeSet<(String, String, String)> = page
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| {
            let c: Vec<&str> = l.split('|').map(str::trim).collect();
            (c.len() >= 5 && c[1].starts_with('`') && (c[2].contains('_') || c[2].contains('.')))
                .then(|| (c[1].trim_matches('`').to_string(), c[2].to_string(), c[4].to_string()))
        })
        .collect();
    let imp = implemented();
    let want: BTreeSet<(String, String, String)> = table()
        .into_iter()
        .map(|(name, node, default)| {
            let status = if !default {
                "ENOSYS (compat 1.0 ABI)"
            } else if imp.contains(&name) {
                "implemented"
            } else {
                "ENOSYS"
            };
            let node = if default { node } else { format!("{node} (compat)") };
            (name, node, status.to_string())
        })
        .collect();
    let missing: Vec<_> = want.difference(&rows).collect();
    let stale: Vec<_> = rows.difference(&want).filter(|(_, n, _)| n.contains("_1.") || n.contains("PRIVATE")).collect();
    assert!(missing.is_empty() && stale.is_empty(), "spec/capi.md's table: missing {missing:?}\nstale {stale:?}");
}

/// The event channel's and the completion channel's descriptors behave as the real ones: a
/// read with nothing queued answers EAGAIN once the program sets O_NONBLOCK, and poll() wakes
/// when an event (ADDR_RESOLVED) is queued.
const CHANNELS: &str = r#"#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>
int main(void) {
    struct rdma_event_channel *ch = rdma_create_event_channel();
    struct rdma_cm_id *id; struct rdma_cm_event *ev;
    struct sockaddr_in g = { .sin_family = AF_INET };
    inet_pton(AF_INET, "239.1.4.1", &g.sin_addr);
    if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_UDP)) return 2;
    fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
    if (rdma_get_cm_event(ch, &ev) != -1 || errno != EAGAIN) { printf("cm: no EAGAIN\n"); return 3; }
    if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&g, 2000)) return 4;
    struct pollfd p = { .fd = ch->fd, .events = POLLIN };
    if (poll(&p, 1, 5000) != 1 || !(p.revents & POLLIN)) { printf("cm: poll did not wake\n"); return 5; }
    if (rdma_get_cm_event(ch, &ev) || ev->event != RDMA_CM_EVENT_ADDR_RESOLVED) return 6;
    printf("cm channel: EAGAIN, then poll woke for %s\n", rdma_event_str(ev->event));
    rdma_ack_cm_event(ev);
    struct ibv_comp_channel *cc = ibv_create_comp_channel(id->verbs);
    struct ibv_cq *cq = cc ? ibv_create_cq(id->verbs, 4, NULL, cc, 0) : NULL;
    if (!cq) return 7;
    fcntl(cc->fd, F_SETFL, fcntl(cc->fd, F_GETFL) | O_NONBLOCK);
    struct ibv_cq *got; void *ctx;
    if (ibv_req_notify_cq(cq, 0)) return 8;
    if (ibv_get_cq_event(cc, &got, &ctx) != -1 || errno != EAGAIN) { printf("cq: no EAGAIN\n"); return 9; }
    p.fd = cc->fd;
    if (poll(&p, 1, 100) != 0) { printf("cq: poll woke with nothing\n"); return 10; }
    printf("comp channel: EAGAIN, poll quiet\n");
    ibv_destroy_cq(cq);
    ibv_destroy_comp_channel(cc);
    rdma_destroy_id(id);
    rdma_destroy_event_channel(ch);
    return 0;
}
"#;

#[test]
fn channel_descriptors_poll_and_take_o_nonblock() {
    let ns = Netns::veth_pair("chanfd");
    ns.sh("ip addr add 198.18.2.1/24 dev veth0");
    let dir = crate::common::artefact_dir("capi_channels");
    let prog = debian::build_c(&dir, "channels", CHANNELS);
    let o = exec(&ns, &["-I", "198.18.2.1", "--transport", "udp"], &prog, &[]).output().unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("cm channel: EAGAIN, then poll woke for RDMA_CM_EVENT_ADDR_RESOLVED"), "{t}");
    assert!(t.contains("comp channel: EAGAIN, poll quiet"), "{t}");
}
