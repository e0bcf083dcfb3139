//! The engine's modules import each other without a circle (issue 15: state by owner).
//!
//! Reads roce-cm's sources, takes every `crate::X` path outside comments as an edge from the
//! file's top-level module to `X` (a crate-root re-export such as `crate::Stack` counts as its
//! module) and fails on any cycle, with no exception: the owners (rc/ included) take what
//! they share from `crate::ctx` and never name the stack that composes them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn strip_comments(src: &str) -> String {
    src.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

fn crate_paths(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = src;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + 7..];
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if !name.is_empty() {
            out.push(name);
        }
    }
    out
}

fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read src") {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn no_two_modules_import_each_other_in_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    // Crate-root re-exports: `pub use m::{A, B};` makes `crate::A` a path into `m`.
    let mut reexport = BTreeMap::new();
    for line in lib.lines() {
        if let Some(rest) = line.strip_prefix("pub use ") {
            let (m, names) = rest.split_once("::").expect("pub use m::…");
            for n in names.trim_end_matches(';').trim_matches(|c| c == '{' || c == '}').split(',') {
                reexport.insert(n.trim().to_string(), m.to_string());
            }
        }
    }
    let mut all = Vec::new();
    files(&src, &mut all);
    let module_of = |p: &Path| -> String {
        let rel = p.strip_prefix(&src).expect("under src");
        let first = rel.components().next().expect("component").as_os_str().to_string_lossy().to_string();
        first.trim_end_matches(".rs").to_string()
    };
    let modules: BTreeSet<String> = all.iter().map(|p| module_of(p)).filter(|m| m != "lib").collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = modules.iter().map(|m| (m.clone(), BTreeSet::new())).collect();
    for p in &all {
        let m = module_of(p);
        if m == "lib" || m == "tests" || p.file_name().is_some_and(|f| f == "tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(p).expect("source");
        // Unit tests at the end of a file may use anything.
        let text = text.split("#[cfg(test)]\nmod tests {").next().unwrap_or("").to_string();
        for name in crate_paths(&strip_comments(&text)) {
            let target = if modules.contains(&name) { Some(name) } else { reexport.get(&name).cloned() };
            if let Some(t) = target {
                if t != m && t != "tests" {
                    edges.get_mut(&m).expect("module").insert(t);
                }
            }
        }
    }
    // A cycle exists iff a depth-first search meets a module still on its path.
    fn visit<'a>(
        m: &'a str,
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|x| *x == m) {
            let mut c: Vec<String> = path[i..].iter().map(|s| s.to_string()).collect();
            c.push(m.to_string());
            return Some(c);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m);
        for t in &edges[m] {
            if let Some(c) = visit(t, edges, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m);
        None
    }
    let mut done = BTreeSet::new();
    for m in edges.keys() {
        let cycle = visit(m, &edges, &mut Vec::new(), &mut done);
        assert!(cycle.is_none(), "modules import each other in a circle: {}", cycle.unwrap_or_default().join(" → "));
    }
    // The owners never import the stack that composes them.
    for owner in ["neigh", "qp", "mcast", "sa_client", "gsi", "ctx", "conn", "id", "cm", "rc"] {
        assert!(!edges[owner].contains("stack"), "{owner} imports stack");
    }
}
