//! Generates the ENOSYS stubs (src/stub.rs) for every symbol of symbols.tsv that no
//! `#[no_mangle]` function in src/ implements, and the `.symver` aliases of the compat versions.

use std::collections::HashSet;
use std::path::Path;

#[path = "symtab.rs"]
#[allow(dead_code)]
mod symtab;

fn main() {
    println!("cargo:rerun-if-changed=symbols.tsv");
    println!("cargo:rerun-if-changed=symtab.rs");
    println!("cargo:rerun-if-changed=src");
    let table = std::fs::read_to_string("symbols.tsv").expect("symbols.tsv");
    let syms = symtab::parse(&table).unwrap_or_else(|e| panic!("symbols.tsv: {e}"));
    let implemented = implemented_names(Path::new("src"));
    let code = symtab::stubs_rs(&syms, &|n| implemented.contains(n));
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    std::fs::write(out.join("stubs.rs"), code).expect("write stubs.rs");
}

/// The names of the `#[no_mangle]` functions in `dir` (the line after the attribute).
fn implemented_names(dir: &Path) -> HashSet<String> {
    let mut names = HashSet::new();
    for entry in std::fs::read_dir(dir).expect("src").flatten() {
        let p = entry.path();
        if p.is_dir() {
            names.extend(implemented_names(&p));
            continue;
        }
        if p.extension().and_then(|e| e.to_str()) != Some("rs") {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        let mut armed = false;
        for line in text.lines() {
            let t = line.trim();
            if t == "#[no_mangle]" || t == "#[unsafe(no_mangle)]" {
                armed = true;
                continue;
            }
            if armed {
                if let Some(rest) = t.split("extern \"C\" fn ").nth(1) {
                    let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                    names.insert(name);
                    armed = false;
                } else if !t.starts_with("#[") && !t.starts_with("///") && !t.starts_with("//") {
                    armed = false;
                }
            }
        }
    }
    names
}
