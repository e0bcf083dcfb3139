//! No two modules of any crate of the workspace import each other in a circle (issue 15: state
//! by owner; issue 27: one way each direction).
//!
//! For every library crate (crates/*/src) and for the `roce` package's own src/, reads the
//! sources, takes every `crate::X` path outside comments and unit tests (also inside a
//! `crate::{X, Y}` group) as an edge from the file's top-level module (its first path component
//! under src/: `src/plumbing/out.rs` belongs to `plumbing`) to `X`, where a crate-root
//! re-export such as `crate::Stack` counts as the module it comes from, and fails with every
//! circle printed. main.rs roots a crate of its own and is skipped; so are `tests` modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The source without `//` comments (doc comments included), so that prose naming a module
/// is no edge.
fn strip_comments(src: &str) -> String {
    src.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

/// The source up to its unit-test module: tests at the end of a file may use anything.
fn without_unit_tests(src: &str) -> &str {
    let mut at = 0;
    let mut lines = src.split_inclusive('\n').peekable();
    while let Some(line) = lines.next() {
        if line.trim_end() == "#[cfg(test)]" {
            let next = lines.peek().map(|l| l.trim_start()).unwrap_or("");
            let item = next.trim_start_matches("pub(crate) ").trim_start_matches("pub ");
            if item.starts_with("mod ") && item.trim_end().ends_with('{') {
                return &src[..at];
            }
        }
        at += line.len();
    }
    src
}

fn ident(s: &str) -> String {
    s.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
}

/// The first segment of every `crate::` path: `crate::a::B` gives `a`, `crate::{a, b::C}`
/// gives `a` and `b`.
fn crate_paths(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = src;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group_end(group);
            for item in split_top_level(&group[..end]) {
                let name = ident(item);
                if !name.is_empty() {
                    out.push(name);
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                out.push(name);
            }
        }
    }
    out
}

/// The index of the `}` closing a group whose `{` came just before `s`.
fn group_end(s: &str) -> usize {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return i,
            '}' => depth -= 1,
            _ => {}
        }
    }
    s.len()
}

/// Split `a, b::{c, d}, e` at the commas outside braces.
fn split_top_level(s: &str) -> Vec<&str> {
    let (mut items, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&s[start..]);
    items
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read src") {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Crate-root re-exports (`pub use m::{A, B};`, `pub use m::x::C as D;`): the name at the
/// root and the module it comes from.
fn root_reexports(lib: &str) -> BTreeMap<String, String> {
    let mut reexport = BTreeMap::new();
    let lib = strip_comments(lib);
    for stmt in lib.split(';') {
        let stmt = stmt.trim();
        let Some(rest) = stmt.strip_prefix("pub use ").or_else(|| stmt.strip_prefix("pub(crate) use ")) else {
            continue;
        };
        let Some((m, names)) = rest.split_once("::") else { continue };
        let names = names.trim().trim_start_matches('{').trim_end_matches('}');
        for n in split_top_level(names) {
            // `a::B as C` is reachable as `crate::C`, `a::B` as `crate::B`.
            let n = n.trim();
            let exported = match n.split_once(" as ") {
                Some((_, alias)) => alias.trim(),
                None => n.rsplit("::").next().unwrap_or(n),
            };
            if !exported.is_empty() && !exported.contains('{') {
                reexport.insert(exported.to_string(), m.trim().to_string());
            }
        }
    }
    reexport
}

/// Top-level module → the top-level modules it imports, for the crate whose sources are `src`.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let reexport = root_reexports(&lib);
    let mut all = Vec::new();
    files(src, &mut all);
    let module_of = |p: &Path| -> String {
        let rel = p.strip_prefix(src).expect("under src");
        let first = rel.components().next().expect("component").as_os_str().to_string_lossy().to_string();
        first.trim_end_matches(".rs").to_string()
    };
    let roots = ["lib", "main"];
    let modules: BTreeSet<String> = all.iter().map(|p| module_of(p)).filter(|m| !roots.contains(&m.as_str())).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = modules.iter().map(|m| (m.clone(), BTreeSet::new())).collect();
    for p in &all {
        let m = module_of(p);
        if roots.contains(&m.as_str()) || m == "tests" || p.file_name().is_some_and(|f| f == "tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(p).expect("source");
        for name in crate_paths(&strip_comments(without_unit_tests(&text))) {
            let target = if modules.contains(&name) { Some(name) } else { reexport.get(&name).cloned() };
            if let Some(t) = target.filter(|t| *t != m && t != "tests" && modules.contains(t)) {
                edges.get_mut(&m).expect("module").insert(t);
            }
        }
    }
    edges
}

/// Every circle a depth-first search meets (each reported once, from where it was entered).
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    fn visit<'a>(
        m: &'a str,
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
        found: &mut Vec<Vec<String>>,
    ) {
        if let Some(i) = path.iter().position(|x| *x == m) {
            let mut c: Vec<String> = path[i..].iter().map(|s| s.to_string()).collect();
            c.push(m.to_string());
            found.push(c);
            return;
        }
        if done.contains(m) {
            return;
        }
        path.push(m);
        for t in &edges[m] {
            visit(t, edges, path, done, found);
        }
        path.pop();
        done.insert(m);
    }
    let (mut done, mut found) = (BTreeSet::new(), Vec::new());
    for m in edges.keys() {
        visit(m, edges, &mut Vec::new(), &mut done, &mut found);
    }
    found
}

#[test]
fn no_two_modules_of_any_crate_import_each_other_in_a_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut crates: Vec<(String, PathBuf)> = vec![("roce".to_string(), root.join("src"))];
    for e in std::fs::read_dir(root.join("crates")).expect("read crates/") {
        let dir = e.expect("dir entry").path();
        if dir.join("src/lib.rs").is_file() {
            crates.push((dir.file_name().expect("name").to_string_lossy().to_string(), dir.join("src")));
        }
    }
    crates.sort();
    assert!(crates.len() >= 6, "expected the roce package and crates/*: {crates:?}");
    let mut failures = Vec::new();
    for (name, src) in &crates {
        let edges = module_graph(src);
        for c in circles(&edges) {
            failures.push(format!("{name}: {}", c.join(" → ")));
        }
        // The engine's owners never import the stack that composes them: they take what they
        // share from `crate::ctx`.
        if name == "roce-cm" {
            for owner in ["neigh", "qp", "mcast", "sa_client", "gsi", "ctx", "conn", "id", "cm", "rc"] {
                if edges[owner].contains("stack") {
                    failures.push(format!("roce-cm: the owner {owner} imports stack"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "modules import each other in a circle:\n{}", failures.join("\n"));
}

#[test]
fn the_parser_sees_grouped_and_reexported_paths() {
    let src = "use crate::{a::X, b, c::{d, e}};\nuse crate::f::G;\n// crate::comment\n";
    assert_eq!(crate_paths(&strip_comments(src)), ["a", "b", "c", "f"]);
    let lib = "pub use m::{A, B as C};\npub use n::o::P;\npub(crate) use q::R as S;\n";
    let r = root_reexports(lib);
    assert_eq!(r["A"], "m");
    assert_eq!(r["C"], "m");
    assert_eq!(r["P"], "n");
    assert_eq!(r["S"], "q");
    let text = "use crate::a;\n#[cfg(test)]\nmod tests {\n    use crate::b;\n}\n";
    assert_eq!(crate_paths(without_unit_tests(text)), ["a"]);
}
