// The exported-symbol table of the roce C library (crates/roce-verbs/symbols.tsv) and what is
// generated from it: the GNU ld version script and the ENOSYS stubs.
//
// This file is shared source, not a crate module: the build scripts pull it in with
// `#[path = ".../symtab.rs"] mod symtab;` (or `include!`), and so does tests/symtab.rs.
// Hence: std only, no `crate::` paths, no inner attributes.
//
// symbols.tsv has one line per dynamic symbol that Debian 12's rdma-core 44.0 libraries define
// (libibverbs.so.1, librdmacm.so.1, and the 11 libmlx5.so.1/libefa.so.1 symbols perftest
// imports), tab-separated: library, symbol, node, default (`@@` default version, `@` compat),
// kind (func|object), ret (C return convention, see `RET_KINDS`), note. Lines starting with `#`
// and empty lines are ignored. A `value` symbol's note carries `stub=<integer>`: the value its
// stub returns.

/// One line of symbols.tsv.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sym {
    /// `ibverbs`, `rdmacm`, `mlx5` or `efa`: the real library that defines the symbol.
    pub library: String,
    /// The C name.
    pub name: String,
    /// The version node, e.g. `IBVERBS_1.1`.
    pub node: String,
    /// `true` for the default version (`name@@node`), `false` for a compat one (`name@node`).
    pub default: bool,
    /// `func` or `object`.
    pub kind: String,
    /// The C return convention (one of `RET_KINDS`).
    pub ret: String,
    /// Free text (the prototype, and for `value` the stub's `stub=N`).
    pub note: String,
}

/// The libraries a line may name.
pub const LIBRARIES: &[&str] = &["ibverbs", "rdmacm", "mlx5", "efa"];

/// The return conventions:
/// `ptr` (NULL + errno), `minus1` (-1 + errno), `errno` (a positive errno returned),
/// `neg_errno` (a negative errno returned), `void`, `str` (a never-NULL `const char *`),
/// `value` (a plain value; the stub returns the note's `stub=N`), `object` (a data symbol).
pub const RET_KINDS: &[&str] = &["ptr", "minus1", "errno", "neg_errno", "void", "str", "value", "object"];

/// The errno value the stubs report (Linux ENOSYS).
pub const ENOSYS: i64 = 38;

/// Parses symbols.tsv. Errors name the 1-based line number.
pub fn parse(tsv: &str) -> Result<Vec<Sym>, String> {
    let mut syms: Vec<Sym> = Vec::new();
    for (i, raw) in tsv.lines().enumerate() {
        let lineno = i + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let err = |msg: String| format!("symbols.tsv line {lineno}: {msg}: {line:?}");
        let cols: Vec<&str> = line.split('\t').collect();
        if cols.len() != 6 && cols.len() != 7 {
            return Err(err(format!(
                "expected 7 tab-separated columns (library symbol node default kind ret note), found {}",
                cols.len()
            )));
        }
        let (library, name, node, default, kind, ret) = (cols[0], cols[1], cols[2], cols[3], cols[4], cols[5]);
        let note = cols.get(6).copied().unwrap_or("");
        if !LIBRARIES.contains(&library) {
            return Err(err(format!("unknown library {library:?}")));
        }
        if !is_c_identifier(name) {
            return Err(err(format!("symbol {name:?} is not a C identifier")));
        }
        if node.is_empty() || !node.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-') {
            return Err(err(format!("bad version node {node:?}")));
        }
        let default = match default {
            "@@" => true,
            "@" => false,
            other => return Err(err(format!("default must be @@ or @, not {other:?}"))),
        };
        if kind != "func" && kind != "object" {
            return Err(err(format!("kind must be func or object, not {kind:?}")));
        }
        if !RET_KINDS.contains(&ret) {
            return Err(err(format!("unknown ret {ret:?} (expected one of {RET_KINDS:?})")));
        }
        if (kind == "object") != (ret == "object") {
            return Err(err(format!("kind {kind} does not match ret {ret}")));
        }
        let sym = Sym {
            library: library.to_string(),
            name: name.to_string(),
            node: node.to_string(),
            default,
            kind: kind.to_string(),
            ret: ret.to_string(),
            note: note.to_string(),
        };
        if ret == "value" {
            stub_value(&sym).map_err(err)?;
        }
        if let Some(prev) = syms.iter().find(|s| s.name == sym.name && s.node == sym.node) {
            return Err(err(format!("{}@{} listed twice", prev.name, prev.node)));
        }
        if sym.default && syms.iter().any(|s| s.name == sym.name && s.default) {
            return Err(err(format!("{} has two default (@@) versions", sym.name)));
        }
        syms.push(sym);
    }
    Ok(syms)
}

fn is_c_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The value a `value` symbol's stub returns: the integer after `stub=` in its note.
pub fn stub_value(sym: &Sym) -> Result<i64, String> {
    let at =
        sym.note.find("stub=").ok_or_else(|| format!("ret value needs `stub=<integer>` in the note ({})", sym.name))?;
    let rest = &sym.note[at + "stub=".len()..];
    let end = rest
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && c == '-')))
        .map_or(rest.len(), |(i, _)| i);
    rest[..end].parse::<i64>().map_err(|_| format!("`stub=` of {} is not an integer", sym.name))
}

/// Every version node, in the order of first appearance in the table.
pub fn nodes(syms: &[Sym]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in syms {
        if !out.contains(&s.node) {
            out.push(s.node.clone());
        }
    }
    out
}

/// A GNU ld version script: every node of the table, each listing under `global:` the names
/// whose default (`@@`) version is that node; the last node ends with `local: *;`, so nothing
/// else (Rust runtime symbols, compat helpers) is exported. A node with only compat symbols is
/// still declared (as `NODE { };`) so that `.symver name@NODE` can bind to it.
pub fn version_script(syms: &[Sym]) -> String {
    let nodes = nodes(syms);
    let mut out = String::from("/* Generated by crates/roce-verbs/symtab.rs from symbols.tsv. Do not edit. */\n");
    for (i, node) in nodes.iter().enumerate() {
        let last = i + 1 == nodes.len();
        let names: Vec<&str> = syms.iter().filter(|s| s.default && &s.node == node).map(|s| s.name.as_str()).collect();
        out.push_str(node);
        out.push_str(" {\n");
        if !names.is_empty() {
            out.push_str("  global:\n");
            for n in &names {
                out.push_str("    ");
                out.push_str(n);
                out.push_str(";\n");
            }
        }
        if last {
            out.push_str("  local:\n    *;\n");
        }
        out.push_str("};\n");
    }
    out
}

/// The private name of a compat (`@`) symbol's implementation, bound to `name@node` by `.symver`:
/// `roce_compat_<name>_<node with . and - replaced by _>`.
pub fn compat_name(sym: &Sym) -> String {
    format!("roce_compat_{}_{}", sym.name, sym.node.replace(['.', '-'], "_"))
}

/// The `.symver` lines binding every compat function to its `name@node`, one per line.
pub fn symver_lines(syms: &[Sym]) -> Vec<String> {
    syms.iter()
        .filter(|s| !s.default && s.kind == "func")
        .map(|s| format!(".symver {}, {}@{}", compat_name(s), s.name, s.node))
        .collect()
}

/// Rust source (to be `include!`d in crates/roce-verbs/src, in ONE module, because GNU as binds
/// `.symver` only to a symbol defined in the same object) with:
/// - for every default-version function for which `implemented(name)` is false, an ENOSYS stub
///   `#[unsafe(no_mangle)] pub unsafe extern "C" fn name() -> T`;
/// - for every compat (`@`) function, a stub named `compat_name(sym)` unless
///   `implemented(&compat_name(sym))` (then the crate defines that function itself, in the module
///   that includes this source), and one `global_asm!` with the `.symver` lines of ALL compat
///   functions.
///
/// Each stub calls `crate::stub::not_implemented("name")` (or `"name@NODE"` for compat ones) and
/// returns per `ret`. Integer kinds return `c_long` (64-bit): on x86_64 a caller declared `int`
/// reads the low half (eax) and sees the same -1/38/-38, while `ssize_t`/`off_t`/`size_t` callers
/// (rsocket's rread, riomap, `_ibv_query_gid_table`) get a correctly sign-extended -1/-38.
/// Data objects are never stubbed: they are listed in a comment at the top.
pub fn stubs_rs(syms: &[Sym], implemented: &dyn Fn(&str) -> bool) -> String {
    let mut out = String::new();
    out.push_str("// Generated by crates/roce-verbs/symtab.rs from symbols.tsv. Do not edit.\n");
    let objects: Vec<&Sym> = syms.iter().filter(|s| s.kind == "object").collect();
    if !objects.is_empty() {
        out.push_str("//\n// Data objects, NOT stubbed here (define them by hand):\n");
        for s in &objects {
            let sep = if s.default { "@@" } else { "@" };
            out.push_str(&format!("//   {}{}{}  ({})\n", s.name, sep, s.node, s.note));
        }
    }
    let mut count = 0usize;
    for s in syms.iter().filter(|s| s.kind == "func") {
        let (fn_name, label) = if s.default {
            if implemented(&s.name) {
                continue;
            }
            (s.name.clone(), s.name.clone())
        } else {
            let private = compat_name(s);
            if implemented(&private) {
                continue;
            }
            (private, format!("{}@{}", s.name, s.node))
        };
        count += 1;
        let (ty, body) = stub_return(s);
        out.push('\n');
        out.push_str(&format!("/// ENOSYS stub for `{}` ({}, returns per `{}`).\n", label, s.library, s.ret));
        out.push_str("///\n/// # Safety\n/// Any arguments are accepted and ignored.\n");
        out.push_str("#[unsafe(no_mangle)]\n");
        out.push_str(&format!("pub unsafe extern \"C\" fn {fn_name}(){ty} {{\n"));
        out.push_str(&format!("    crate::stub::not_implemented(\"{label}\");\n"));
        if !body.is_empty() {
            out.push_str("    ");
            out.push_str(&body);
            out.push('\n');
        }
        out.push_str("}\n");
    }
    let symvers = symver_lines(syms);
    if !symvers.is_empty() {
        out.push_str("\n// Compat versions: the private functions above (or the crate's own, same\n");
        out.push_str("// names) become name@NODE. Must sit in the same module as those functions.\n");
        out.push_str("::core::arch::global_asm!(\n");
        for l in &symvers {
            out.push_str(&format!("    \"{l}\",\n"));
        }
        out.push_str(");\n");
    }
    out.insert_str(0, &format!("// {count} stubs, {} .symver lines.\n", symvers.len()));
    out
}

/// The return type (with its ` -> `) and the returned expression of a stub.
fn stub_return(s: &Sym) -> (String, String) {
    let long = " -> ::core::ffi::c_long";
    match s.ret.as_str() {
        "ptr" => (" -> *mut ::core::ffi::c_void".into(), "::core::ptr::null_mut()".into()),
        "minus1" => (long.into(), "-1".into()),
        "errno" => (long.into(), "::libc::ENOSYS as ::core::ffi::c_long".into()),
        "neg_errno" => (long.into(), "-(::libc::ENOSYS as ::core::ffi::c_long)".into()),
        "void" => (String::new(), String::new()),
        "str" => (" -> *const ::core::ffi::c_char".into(), "c\"unknown\".as_ptr()".into()),
        "value" => {
            // parse() has checked that the note carries an integer.
            let v = stub_value(s).unwrap_or(0);
            (long.into(), format!("{v}"))
        }
        other => panic!("symtab: no stub for ret {other:?} ({})", s.name),
    }
}
