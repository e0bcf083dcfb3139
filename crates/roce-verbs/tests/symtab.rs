//! Tests of symtab.rs (the symbol table shared with the build scripts) against the real
//! symbols.tsv. Dependency-free: also runs as `rustc --edition 2021 --test tests/symtab.rs`.

#[path = "../symtab.rs"]
#[allow(dead_code)]
mod symtab;

use std::collections::{BTreeMap, BTreeSet};
use symtab::Sym;

const TSV: &str = include_str!("../symbols.tsv");

fn table() -> Vec<Sym> {
    symtab::parse(TSV).expect("symbols.tsv parses")
}

fn find<'a>(syms: &'a [Sym], name: &str, node: &str) -> &'a Sym {
    syms.iter()
        .find(|s| s.name == name && s.node == node)
        .unwrap_or_else(|| panic!("{name}@{node} missing from symbols.tsv"))
}

/// The version nodes of Debian 12's rdma-core 44.0 libraries (readelf --dyn-syms), plus the
/// provider nodes perftest imports.
const NODES: &[&str] = &[
    "IBVERBS_1.0",
    "IBVERBS_1.1",
    "IBVERBS_1.5",
    "IBVERBS_1.6",
    "IBVERBS_1.7",
    "IBVERBS_1.8",
    "IBVERBS_1.9",
    "IBVERBS_1.10",
    "IBVERBS_1.11",
    "IBVERBS_1.12",
    "IBVERBS_1.13",
    "IBVERBS_1.14",
    "IBVERBS_PRIVATE_34",
    "RDMACM_1.0",
    "RDMACM_1.1",
    "RDMACM_1.2",
    "RDMACM_1.3",
    "MLX5_1.3",
    "MLX5_1.7",
    "MLX5_1.10",
    "MLX5_1.21",
    "EFA_1.1",
];

#[test]
fn table_has_the_measured_counts() {
    let syms = table();
    assert_eq!(syms.len(), 259);
    let mut per: BTreeMap<(&str, bool), usize> = BTreeMap::new();
    for s in &syms {
        *per.entry((s.library.as_str(), s.default)).or_default() += 1;
    }
    assert_eq!(per[&("ibverbs", true)], 146);
    assert_eq!(per[&("ibverbs", false)], 34); // 33 @IBVERBS_1.0 + ibv_register_driver@IBVERBS_1.1
    assert_eq!(per[&("rdmacm", true)], 68);
    assert_eq!(per.get(&("rdmacm", false)), None);
    assert_eq!(per[&("mlx5", true)], 9);
    assert_eq!(per[&("efa", true)], 2);
    let objects: Vec<&str> = syms.iter().filter(|s| s.kind == "object").map(|s| s.name.as_str()).collect();
    assert_eq!(objects, ["verbs_allow_disassociate_destroy"]);
}

#[test]
fn every_node_present() {
    let syms = table();
    let got: BTreeSet<String> = symtab::nodes(&syms).into_iter().collect();
    let want: BTreeSet<String> = NODES.iter().map(|s| s.to_string()).collect();
    assert_eq!(got, want);
}

#[test]
fn imports_of_debians_programs_are_present() {
    // A sample of capi-abi.md's import table (objdump -T of the Debian 12 binaries).
    let syms = table();
    for (name, node) in [
        ("ibv_create_comp_channel", "IBVERBS_1.0"),
        ("ibv_read_sysfs_file", "IBVERBS_1.0"),
        ("ibv_get_device_list", "IBVERBS_1.1"),
        ("ibv_query_port", "IBVERBS_1.1"),
        ("_ibv_query_gid_ex", "IBVERBS_1.11"),
        ("ibv_qp_to_qp_ex", "IBVERBS_1.6"),
        ("ibv_reg_mr_iova2", "IBVERBS_1.8"),
        ("ibv_query_gid_type", "IBVERBS_PRIVATE_34"),
        ("rdma_leave_multicast", "RDMACM_1.0"),
        ("rpoll", "RDMACM_1.0"),
        ("rdma_join_multicast_ex", "RDMACM_1.1"),
        ("rdma_establish", "RDMACM_1.2"),
        ("rdma_init_qp_attr", "RDMACM_1.2"),
        ("mlx5dv_create_qp", "MLX5_1.3"),
        ("mlx5dv_open_device", "MLX5_1.7"),
        ("mlx5dv_qp_ex_from_ibv_qp_ex", "MLX5_1.10"),
        ("mlx5dv_dek_create", "MLX5_1.21"),
        ("efadv_query_device", "EFA_1.1"),
    ] {
        assert!(find(&syms, name, node).default, "{name}@{node} must be the default version");
    }
    // Compat pairs: the 1.0 version is non-default, the 1.1 one the default.
    assert!(!find(&syms, "ibv_get_device_list", "IBVERBS_1.0").default);
    assert!(!find(&syms, "ibv_register_driver", "IBVERBS_1.1").default);
    // The librdmacm internal that the real librdmacm needs from libibverbs.
    assert!(find(&syms, "ibv_copy_ah_attr_from_kern", "IBVERBS_1.1").default);
}

#[test]
fn return_conventions_match_rdma_core_v44() {
    let syms = table();
    let ret = |name: &str, node: &str| find(&syms, name, node).ret.clone();
    for (name, node, want) in [
        ("ibv_modify_qp", "IBVERBS_1.1", "errno"),
        ("ibv_destroy_qp", "IBVERBS_1.1", "errno"),
        ("ibv_query_port", "IBVERBS_1.1", "errno"),
        ("ibv_dereg_mr", "IBVERBS_1.1", "errno"),
        ("ibv_query_gid", "IBVERBS_1.1", "minus1"), // v44: -1, not an errno
        ("ibv_get_cq_event", "IBVERBS_1.1", "minus1"),
        ("ibv_fork_init", "IBVERBS_1.1", "errno"),
        ("ibv_create_qp", "IBVERBS_1.1", "ptr"),
        ("ibv_wc_status_str", "IBVERBS_1.1", "str"),
        ("ibv_get_device_name", "IBVERBS_1.1", "str"),
        ("ibv_get_device_guid", "IBVERBS_1.1", "value"),
        ("ibv_ack_cq_events", "IBVERBS_1.1", "void"),
        ("_ibv_query_gid_table", "IBVERBS_1.11", "neg_errno"),
        ("ibv_cmd_destroy_cq", "IBVERBS_PRIVATE_34", "errno"),
        ("ibv_cmd_poll_cq", "IBVERBS_PRIVATE_34", "minus1"),
        ("rdma_connect", "RDMACM_1.0", "minus1"),
        ("rread", "RDMACM_1.0", "minus1"),
        ("rdma_event_str", "RDMACM_1.0", "str"),
        ("rdma_create_event_channel", "RDMACM_1.0", "ptr"),
        ("rdma_destroy_event_channel", "RDMACM_1.0", "void"),
        ("mlx5dv_devx_general_cmd", "MLX5_1.7", "errno"),
        ("efadv_create_qp_ex", "EFA_1.1", "ptr"),
    ] {
        assert_eq!(ret(name, node), want, "{name}@{node}");
    }
    let v = |name: &str| symtab::stub_value(find(&syms, name, "IBVERBS_1.1")).unwrap();
    assert_eq!(v("ibv_get_device_guid"), 0);
    assert_eq!(symtab::stub_value(find(&syms, "ibv_get_device_index", "IBVERBS_1.9")), Ok(-1));
}

#[test]
fn version_script_shape() {
    let syms = table();
    let script = symtab::version_script(&syms);
    // Every node declared exactly once, in table order.
    let declared: Vec<&str> = script.lines().filter(|l| l.ends_with(" {")).map(|l| l.trim_end_matches(" {")).collect();
    assert_eq!(declared, symtab::nodes(&syms));
    assert_eq!(script.matches('{').count(), NODES.len());
    assert_eq!(script.matches("};").count(), NODES.len());
    // One `local: *;`, in the last node.
    assert_eq!(script.matches("local:").count(), 1);
    let last = declared.last().unwrap();
    let tail = &script[script.find(&format!("{last} {{")).unwrap()..];
    assert!(tail.contains("local:\n    *;\n};\n"));
    assert!(tail.ends_with("};\n"));
    // Every @@ symbol listed exactly once, under its own node; no compat-only name listed.
    let mut listed: BTreeMap<String, String> = BTreeMap::new();
    let mut node = String::new();
    for l in script.lines() {
        let t = l.trim();
        if let Some(n) = l.strip_suffix(" {") {
            node = n.to_string();
        } else if t.ends_with(';') && t != "*;" && t != "};" {
            let name = t.trim_end_matches(';').to_string();
            assert!(listed.insert(name.clone(), node.clone()).is_none(), "{name} listed twice");
        }
    }
    let want: BTreeMap<String, String> =
        syms.iter().filter(|s| s.default).map(|s| (s.name.clone(), s.node.clone())).collect();
    assert_eq!(listed, want);
}

#[test]
fn version_script_declares_compat_only_nodes() {
    let tsv = "#h\nibverbs\tfoo\tX_1.0\t@\tfunc\tvoid\t\nibverbs\tfoo\tX_1.1\t@@\tfunc\tvoid\t\n";
    let syms = symtab::parse(tsv).unwrap();
    assert_eq!(
        symtab::version_script(&syms).lines().skip(1).collect::<Vec<_>>(),
        ["X_1.0 {", "};", "X_1.1 {", "  global:", "    foo;", "  local:", "    *;", "};"]
    );
}

#[test]
fn parse_errors_name_the_line() {
    let bad = [
        ("ibverbs\tfoo\tN\t@@\tfunc\n", "columns"),
        ("ibverbs\tfoo\tN\t@@@\tfunc\tvoid\t\n", "default"),
        ("ibverbs\tfoo\tN\t@@\tfunc\tweird\t\n", "unknown ret"),
        ("ibverbs\tfoo\tN\t@@\tfunc\tvalue\tno stub here\n", "stub="),
        ("ibverbs\tfoo\tN\t@@\tobject\tvoid\t\n", "does not match"),
        ("nope\tfoo\tN\t@@\tfunc\tvoid\t\n", "library"),
        ("ibverbs\tfoo\tN\t@@\tfunc\tvoid\t\nibverbs\tfoo\tM\t@@\tfunc\tvoid\t\n", "two default"),
        ("ibverbs\tfoo\tN\t@\tfunc\tvoid\t\nibverbs\tfoo\tN\t@@\tfunc\tvoid\t\n", "twice"),
    ];
    for (body, what) in bad {
        let tsv = format!("# header\n\n{body}");
        let e = symtab::parse(&tsv).unwrap_err();
        assert!(e.contains("line 3") || e.contains("line 4"), "{e}");
        assert!(e.contains(what), "{e} (wanted {what})");
    }
    let ok = symtab::parse("ibverbs\tfoo\tN\t@@\tfunc\tvalue\tstub=-1 (unknown)\n").unwrap();
    assert_eq!(symtab::stub_value(&ok[0]), Ok(-1));
}

#[test]
fn stubs_cover_the_unimplemented() {
    let syms = table();
    let implemented = |n: &str| n == "ibv_get_device_list" || n == "roce_compat_ibv_open_device_IBVERBS_1_0";
    let rs = symtab::stubs_rs(&syms, &implemented);
    let fns: BTreeSet<&str> = rs
        .lines()
        .filter_map(|l| l.strip_prefix("pub unsafe extern \"C\" fn "))
        .map(|l| &l[..l.find('(').unwrap()])
        .collect();
    for s in syms.iter().filter(|s| s.kind == "func") {
        let f = if s.default { s.name.clone() } else { symtab::compat_name(s) };
        assert_eq!(fns.contains(f.as_str()), !implemented(&f), "{f}");
    }
    assert_eq!(fns.len(), 258 - 2);
    // .symver lines for every compat function, stubbed or not.
    assert_eq!(rs.matches("\".symver ").count(), 34);
    assert!(rs.contains("\".symver roce_compat_ibv_open_device_IBVERBS_1_0, ibv_open_device@IBVERBS_1.0\","));
    assert!(rs.contains("\".symver roce_compat_ibv_register_driver_IBVERBS_1_1, ibv_register_driver@IBVERBS_1.1\","));
    // The data object is only named in a comment.
    assert!(rs.contains("//   verbs_allow_disassociate_destroy@@IBVERBS_PRIVATE_34"));
    assert!(!rs.contains("fn verbs_allow_disassociate_destroy"));
    // Return conventions.
    let body = |f: &str| {
        let at = rs.find(&format!("fn {f}()")).unwrap();
        rs[at..at + rs[at..].find("\n}\n").unwrap()].to_string()
    };
    assert!(body("ibv_create_qp").contains("-> *mut ::core::ffi::c_void"));
    assert!(body("ibv_create_qp").contains("::core::ptr::null_mut()"));
    assert!(body("ibv_modify_qp").contains("::libc::ENOSYS as ::core::ffi::c_long"));
    assert!(body("rdma_connect").ends_with("    -1"));
    assert!(body("_ibv_query_gid_table").contains("-(::libc::ENOSYS"));
    assert!(body("rdma_event_str").contains("c\"unknown\".as_ptr()"));
    assert!(body("ibv_get_device_index").ends_with("    -1"));
    assert!(body("ibv_ack_cq_events").starts_with("fn ibv_ack_cq_events() {"));
    assert!(body("roce_compat_ibv_query_gid_IBVERBS_1_0")
        .contains("crate::stub::not_implemented(\"ibv_query_gid@IBVERBS_1.0\")"));
}
