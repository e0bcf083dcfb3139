//! spec/architecture.md stays true: every crate and path it names exists, and no crate depends
//! on a workspace crate of its own floor or above (each floor uses only the floors below it).

use std::collections::BTreeMap;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn page() -> String {
    std::fs::read_to_string(root().join("spec/architecture.md")).expect("spec/architecture.md")
}

/// Every backquoted path on the page that starts at a top-level folder of the repository.
fn named_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, part) in text.split('`').enumerate() {
        // Odd parts are inside backquotes.
        if i % 2 == 1 && ["crates/", "src/", "tests/", "fuzz/", "spec/"].iter().any(|p| part.starts_with(p)) {
            let path = part.trim_end_matches('/');
            // `src/cmd/<command>.rs` is a pattern, not a file: its folder must exist.
            let path = path.split("/<").next().unwrap_or(path);
            out.push(path.to_string());
        }
    }
    out
}

/// The floors table: crate name (`roce-wire`, or `roce` for `src/`) to its floor number.
fn floors(text: &str) -> BTreeMap<String, u32> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 4 {
            continue;
        }
        let Ok(floor) = cells[1].parse::<u32>() else { continue };
        let name = cells[2].trim_matches('`');
        let name = match name.strip_prefix("crates/") {
            Some(c) => c.to_string(),
            None if name.starts_with("src/") => "roce".to_string(),
            None => panic!("floor {floor}: unexpected crate cell {name:?}"),
        };
        out.insert(name, floor);
    }
    out
}

/// The workspace crates a manifest's [dependencies] names (dev-dependencies are tests).
fn workspace_deps(manifest: &str, workspace: &BTreeMap<String, u32>) -> Vec<String> {
    let mut in_deps = false;
    let mut out = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if !in_deps {
            continue;
        }
        let name = line.split(['=', '.', ' ']).next().unwrap_or("");
        if workspace.contains_key(name) {
            out.push(name.to_string());
        }
    }
    out
}

#[test]
fn every_crate_and_path_the_page_names_exists() {
    let text = page();
    let paths = named_paths(&text);
    assert!(paths.len() >= 10, "too few paths found on the page: {paths:?}");
    let missing: Vec<_> = paths.iter().filter(|p| !root().join(p).exists()).collect();
    assert!(missing.is_empty(), "spec/architecture.md names paths that do not exist: {missing:?}");
    // And every crate of the workspace has its floor on the page.
    let floors = floors(&text);
    for e in std::fs::read_dir(root().join("crates")).expect("crates/") {
        let name = e.expect("entry").file_name().to_string_lossy().to_string();
        assert!(floors.contains_key(&name), "crates/{name} has no floor in spec/architecture.md");
    }
}

#[test]
fn each_crate_uses_only_the_floors_below_it() {
    let floors = floors(&page());
    assert!(floors.len() >= 6, "the floors table: {floors:?}");
    let mut wrong = Vec::new();
    for (name, floor) in &floors {
        let manifest = if name == "roce" {
            root().join("Cargo.toml")
        } else {
            root().join("crates").join(name).join("Cargo.toml")
        };
        let text = std::fs::read_to_string(&manifest).expect("Cargo.toml");
        for dep in workspace_deps(&text, &floors) {
            if floors[&dep] >= *floor {
                wrong.push(format!("{name} (floor {floor}) depends on {dep} (floor {})", floors[&dep]));
            }
        }
    }
    assert!(wrong.is_empty(), "dependencies that do not go down a floor: {wrong:?}");
}
