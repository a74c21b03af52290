//! The shape of `src/`, held against /work/shared/LAYERS.md and ARCHITECTURE.md: layers
//! that point one way, no import circle outside `src/cli/`, no long function, no long file.
//!
//! The test reads the sources: every `crate::` path of a file's non-test code (in `use`
//! items, braced groups included, and in expressions) is an arrow from that file to the file
//! of the longest module prefix the path names (through the re-exports of the
//! `pub use crate::...` shims `src/error.rs` keeps for code not yet moved). Each file belongs
//! to a layer by its top module:
//!
//! core (contract, codec, digest, idset, reconcile, content, receipt, json, io_bound)
//! < store < sources < collect < answers (evidence, shard, token) < faces (cli, mcp, report).
//!
//! An arrow from a lower layer to a higher one fails, as does a circle of arrows between
//! files (one strongly connected component of more than one file) that reaches outside
//! `src/cli/`; a function of non-test code over 120 lines fails, and a file over 900 lines.
//! Exceptions are listed below, each with the engineer whose work removes it and why: the
//! lists only shrink.

#![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Lines one non-test function may have (its signature to its closing brace).
const FUNCTION_LINES_MAX: usize = 120;
/// Lines one file may have.
const FILE_LINES_MAX: usize = 900;

/// Arrows running back up that another engineer's work in progress removes:
/// (from file, to file, owner and reason).
const ARROWS_ALLOWED: &[(&str, &str, &str)] = &[];

/// Circles that another engineer's work in progress removes: every file of the circle, and
/// the owner and reason. A circle passes when it is exactly one of these.
const CIRCLES_ALLOWED: &[(&[&str], &str)] = &[];

/// Files over `FILE_LINES_MAX` lines that another engineer's work splits: (file, owner).
const LONG_FILES_ALLOWED: &[(&str, &str)] = &[];

/// Non-test functions over `FUNCTION_LINES_MAX` lines: (file, function, owner).
const LONG_FUNCTIONS_ALLOWED: &[(&str, &str, &str)] = &[];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Layer {
    Core,
    Store,
    Sources,
    Collect,
    Answers,
    Faces,
}

/// The layer of a file (relative to `src/`), or `None` for the crate root and the shim.
fn layer(file: &str) -> Option<Layer> {
    let top = file
        .split('/')
        .next()
        .unwrap_or(file)
        .trim_end_matches(".rs");
    Some(match top {
        "contract" | "codec" | "digest" | "idset" | "reconcile" | "content" | "receipt"
        | "json" | "io_bound" => Layer::Core,
        "store" => Layer::Store,
        "source" => Layer::Sources,
        "collect" => Layer::Collect,
        "evidence" | "shard" | "token" => Layer::Answers,
        "cli" | "mcp" | "report" | "main" => Layer::Faces,
        _ => return None,
    })
}

struct Source {
    /// Path relative to `src/`.
    file: String,
    /// The module path the file is (`["store", "writer"]`).
    module: Vec<String>,
    /// The text without comments, strings and test code.
    code: String,
    /// Lines of the whole file.
    lines: usize,
}

fn sources() -> Vec<Source> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&root, &mut files);
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let rel = path
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(&path).unwrap();
        let mut module: Vec<String> = rel
            .trim_end_matches(".rs")
            .split('/')
            .map(str::to_owned)
            .collect();
        if matches!(
            module.last().map(String::as_str),
            Some("mod" | "lib" | "main")
        ) {
            module.pop();
        }
        out.push(Source {
            lines: text.lines().count(),
            code: strip(&text),
            module,
            file: rel,
        });
    }
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Whether a file is test code as a whole (`tests.rs`, `*_tests.rs`, a `tests/` folder).
fn is_test_file(file: &str) -> bool {
    file.ends_with("tests.rs") || file.contains("/tests/")
}

/// The text with comments and string literals blanked (lines kept) and every item under
/// `#[cfg(test)]` removed.
fn strip(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            while i < b.len() && !b[i..].starts_with(b"*/") {
                if b[i] == b'\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 2;
        } else if b[i] == b'"'
            || (b[i] == b'r'
                && i + 1 < b.len()
                && matches!(b[i + 1], b'"' | b'#')
                && (i == 0 || !b[i - 1].is_ascii_alphanumeric() && b[i - 1] != b'_'))
        {
            // A string (raw strings with their hashes).
            let raw = b[i] == b'r';
            let mut hashes = 0;
            if raw {
                i += 1;
                while i < b.len() && b[i] == b'#' {
                    hashes += 1;
                    i += 1;
                }
                if i >= b.len() || b[i] != b'"' {
                    continue;
                }
            }
            i += 1;
            out.push_str("\"\"");
            while i < b.len() {
                if !raw && b[i] == b'\\' {
                    i += 2;
                    continue;
                }
                if b[i] == b'"'
                    && b[i + 1..].iter().take(hashes).all(|c| *c == b'#')
                    && b.len() > i + hashes
                {
                    i += 1 + hashes;
                    break;
                }
                if b[i] == b'\n' {
                    out.push('\n');
                }
                i += 1;
            }
        } else if b[i] == b'\'' && i + 2 < b.len() && (b[i + 2] == b'\'' || b[i + 1] == b'\\') {
            // A char literal ('"', '\'', '{'), not a lifetime.
            let end = b[i + 1..]
                .iter()
                .skip(1)
                .position(|c| *c == b'\'')
                .map_or(i + 1, |p| i + 2 + p);
            out.push_str("' '");
            i = end + 1;
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    drop_test_items(&out)
}

/// Removes each item that follows `#[cfg(test)]` (a module, a function, an import).
fn drop_test_items(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        // The item ends at `;` before any `{`, or at the `}` closing its first `{`.
        let semi = after.find(';');
        let brace = after.find('{');
        let end = match (semi, brace) {
            (Some(s), Some(b)) if s < b => s + 1,
            (_, Some(b)) => b + closing(&after[b..]),
            (Some(s), None) => s + 1,
            (None, None) => after.len(),
        };
        out.extend(after[..end].chars().filter(|c| *c == '\n'));
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// The length through the `}` closing the `{` that `text` starts with.
fn closing(text: &str) -> usize {
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    text.len()
}

/// Every `crate::` path of the code, as its segments (braced groups expanded).
fn crate_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().last();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `$crate::` or `scanledger_crate::`
        }
        let mut paths = Vec::new();
        tree(rest, Vec::new(), &mut paths);
        out.extend(paths);
    }
    out
}

/// Parses a use tree at `text` under `prefix`: `a::b::C`, `a::{b, c::D}`.
fn tree(text: &str, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let mut path = prefix;
    let mut i = 0;
    let b = text.as_bytes();
    loop {
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        if i > start {
            path.push(text[start..i].to_owned());
        }
        let group = if text[i..].starts_with("::{") {
            Some(3)
        } else if i == 0 && text.starts_with('{') {
            Some(1)
        } else {
            None
        };
        if let Some(skip) = group {
            i += skip;
            loop {
                while i < b.len() && b[i].is_ascii_whitespace() {
                    i += 1;
                }
                if i >= b.len() || b[i] == b'}' {
                    return i + 1;
                }
                i += tree(&text[i..], path.clone(), out);
                while i < b.len() && (b[i].is_ascii_whitespace() || b[i] == b',') {
                    i += 1;
                }
                if i < b.len() && b[i] == b'}' {
                    return i + 1;
                }
            }
        } else if text[i..].starts_with("::") {
            i += 2;
        } else {
            // `;`, `,`, `(` ...: the path ends; an alias after it is skipped.
            out.push(path);
            let rest = &text[i..];
            let trimmed = rest.trim_start();
            if let Some(alias) = trimmed.strip_prefix("as ") {
                let alias = alias.trim_start();
                let name = alias
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(alias.len());
                return text.len() - alias.len() + name;
            }
            return i;
        }
    }
}

/// The file a module path names: its longest prefix that is a file.
fn resolve(path: &[String], files: &BTreeMap<Vec<String>, String>) -> Option<String> {
    (1..=path.len())
        .rev()
        .find_map(|n| files.get(&path[..n]).cloned())
}

struct Graph {
    /// from file → to file → the first path that made the arrow.
    arrows: BTreeMap<String, BTreeMap<String, String>>,
}

fn graph(sources: &[Source]) -> Graph {
    let g = graph_of(sources);
    if std::env::var_os("SCANLEDGER_STRUCTURE_DUMP").is_some() {
        for (from, tos) in &g.arrows {
            for (to, p) in tos {
                eprintln!("{from} -> {to} by {p}");
            }
        }
    }
    g
}

fn graph_of(sources: &[Source]) -> Graph {
    let files: BTreeMap<Vec<String>, String> = sources
        .iter()
        .map(|s| (s.module.clone(), s.file.clone()))
        .collect();
    // The shim's re-exports: `crate::error::X` is where `X` is defined.
    let mut aliases: BTreeMap<Vec<String>, String> = BTreeMap::new();
    for s in sources.iter().filter(|s| s.file == "error.rs") {
        for line in s.code.lines().filter(|l| l.trim_start().starts_with("pub")) {
            for p in crate_paths(line) {
                if let (Some(name), Some(target)) = (p.last(), resolve(&p, &files)) {
                    let mut key = s.module.clone();
                    key.push(name.clone());
                    aliases.insert(key, target);
                }
            }
        }
    }
    let mut arrows: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for s in sources {
        if is_test_file(&s.file) || s.file == "lib.rs" || s.file == "error.rs" {
            continue;
        }
        for p in crate_paths(&s.code) {
            let target = (1..=p.len())
                .rev()
                .find_map(|n| aliases.get(&p[..n]).cloned())
                .or_else(|| resolve(&p, &files));
            let Some(target) = target else { continue };
            if target == s.file || target == "lib.rs" {
                continue;
            }
            arrows
                .entry(s.file.clone())
                .or_default()
                .entry(target)
                .or_insert_with(|| format!("crate::{}", p.join("::")));
        }
    }
    Graph { arrows }
}

#[test]
fn the_old_error_module_only_re_exports() {
    // `src/error.rs` was the floor every layer took errors from (and it took the store's and
    // the answers' errors): each error now lives where it arises, and this file only keeps
    // re-exports for code not yet moved, which the arrows above see through.
    let shim = sources()
        .into_iter()
        .find(|s| s.file == "error.rs")
        .unwrap();
    for line in shim.code.lines().map(str::trim).filter(|l| !l.is_empty()) {
        assert!(
            line.starts_with("pub(crate) use crate::")
                || line.starts_with("#[cfg")
                || !line.chars().next().unwrap().is_alphabetic()
                || line.starts_with("feature"),
            "src/error.rs defines something: {line}"
        );
    }
}

#[test]
fn layers_point_one_way() {
    let g = graph(&sources());
    let mut wrong = Vec::new();
    for (from, tos) in &g.arrows {
        for (to, path) in tos {
            let (Some(lf), Some(lt)) = (layer(from), layer(to)) else {
                continue;
            };
            if lt > lf && !ARROWS_ALLOWED.iter().any(|(f, t, _)| f == from && t == to) {
                wrong.push(format!("{from} ({lf:?}) -> {to} ({lt:?}) by {path}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "arrows running back up (docs: /work/shared/LAYERS.md, ARCHITECTURE.md):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn no_import_circle_outside_the_cli() {
    let g = graph(&sources());
    let mut wrong = Vec::new();
    // Between top modules too: `contract` and `digest` (two files that never import each
    // other directly) were one circle through `contract/`'s submodules.
    let mut modules = Graph {
        arrows: BTreeMap::new(),
    };
    for (from, tos) in &g.arrows {
        for (to, p) in tos {
            let (mf, mt) = (top(from), top(to));
            let allowed = ARROWS_ALLOWED.iter().any(|(f, t, _)| f == from && t == to);
            if mf != mt && !allowed && mf != "cli" {
                modules
                    .arrows
                    .entry(mf)
                    .or_default()
                    .insert(mt, format!("{from} -> {to} by {p}"));
            }
        }
    }
    for circle in circles(&modules) {
        let mut inside = Vec::new();
        for f in &circle {
            for (t, p) in modules.arrows.get(f).into_iter().flatten() {
                if circle.contains(t) {
                    inside.push(format!("  {p}"));
                }
            }
        }
        wrong.push(format!("modules {:?}\n{}", circle, inside.join("\n")));
    }
    for circle in circles(&g) {
        if circle
            .iter()
            .all(|f| f.starts_with("cli/") || f == "cli.rs")
        {
            continue;
        }
        let allowed = CIRCLES_ALLOWED.iter().any(|(files, _)| {
            files.len() == circle.len() && files.iter().all(|f| circle.contains(*f))
        });
        if !allowed {
            // Name the arrows inside the circle, so the one to cut is plain.
            let mut inside = Vec::new();
            for f in &circle {
                for (t, p) in g.arrows.get(f).into_iter().flatten() {
                    if circle.contains(t) {
                        inside.push(format!("  {f} -> {t} by {p}"));
                    }
                }
            }
            wrong.push(format!("{:?}\n{}", circle, inside.join("\n")));
        }
    }
    assert!(wrong.is_empty(), "import circles:\n{}", wrong.join("\n"));
}

/// The top module of a file: `store` for `store/writer.rs`, `cli` for `cli.rs`.
fn top(file: &str) -> String {
    file.split('/')
        .next()
        .unwrap_or(file)
        .trim_end_matches(".rs")
        .to_owned()
}

/// The strongly connected components of more than one file (Tarjan, iterative enough for a
/// few hundred files: the recursion depth is bounded by the number of files).
fn circles(g: &Graph) -> Vec<BTreeSet<String>> {
    struct State<'a> {
        g: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        if let Some(tos) = s.g.arrows.get(v) {
            for w in tos.keys() {
                let w = w.as_str();
                if !s.index.contains_key(w) {
                    visit(s, w);
                    let lw = s.low[w];
                    let lv = s.low[v];
                    s.low.insert(v, lv.min(lw));
                } else if s.on.contains(w) {
                    let iw = s.index[w];
                    let lv = s.low[v];
                    s.low.insert(v, lv.min(iw));
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.insert(w.to_owned());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    let nodes: Vec<&str> = g.arrows.keys().map(String::as_str).collect();
    for v in nodes {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[test]
fn no_long_function_and_no_long_file() {
    let mut wrong = Vec::new();
    for s in sources() {
        if s.lines > FILE_LINES_MAX && !LONG_FILES_ALLOWED.iter().any(|(f, _)| *f == s.file) {
            wrong.push(format!(
                "{}: {} lines (at most {FILE_LINES_MAX})",
                s.file, s.lines
            ));
        }
        if is_test_file(&s.file) {
            continue;
        }
        for (name, lines) in functions(&s.code) {
            if lines > FUNCTION_LINES_MAX
                && !LONG_FUNCTIONS_ALLOWED
                    .iter()
                    .any(|(f, n, _)| *f == s.file && *n == name)
            {
                wrong.push(format!(
                    "{}: fn {name} has {lines} lines (at most {FUNCTION_LINES_MAX})",
                    s.file
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "too long:\n{}", wrong.join("\n"));
}

/// An allow-list shrinks with the work it waits for: an entry whose file or function is no
/// longer too long is stale and must go.
#[test]
fn every_allowed_long_file_and_function_is_still_long() {
    let sources = sources();
    let mut stale = Vec::new();
    for (file, owner) in LONG_FILES_ALLOWED {
        if !sources
            .iter()
            .any(|s| s.file == *file && s.lines > FILE_LINES_MAX)
        {
            stale.push(format!("{file} ({owner})"));
        }
    }
    for (file, name, owner) in LONG_FUNCTIONS_ALLOWED {
        let long = sources.iter().any(|s| {
            s.file == *file
                && functions(&s.code)
                    .iter()
                    .any(|(n, lines)| n == name && *lines > FUNCTION_LINES_MAX)
        });
        if !long {
            stale.push(format!("{file}: fn {name} ({owner})"));
        }
    }
    assert!(
        stale.is_empty(),
        "stale allow-list entries:\n{}",
        stale.join("\n")
    );
}

/// Every function with a body: its name and its lines, from `fn` to the closing brace.
fn functions(code: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let b = code.as_bytes();
    let mut from = 0;
    while let Some(at) = code[from..].find("fn ") {
        let at = from + at;
        from = at + 3;
        if at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_') {
            continue;
        }
        let name: String = code[at + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue; // `fn(` types
        }
        // The body is the first `{` before any `;` (a declaration without one has none).
        let rest = &code[at..];
        let (Some(brace), semi) = (rest.find('{'), rest.find(';')) else {
            continue;
        };
        if semi.is_some_and(|s| s < brace) {
            continue;
        }
        let len = closing(&rest[brace..]);
        let lines = rest[..brace + len].matches('\n').count() + 1;
        out.push((name, lines));
    }
    out
}

#[test]
fn the_reader_of_this_test_reads_rust() {
    // The parser's own cases: groups, aliases, strings and test code.
    let code = strip(
        "use crate::{a::B, c::{d, e::F as G}};\nlet s = \"crate::x::Y\";\n// crate::z\n#[cfg(test)]\nmod tests { use crate::t; }\nfn f() { crate::h::i(); }\n",
    );
    let paths: Vec<String> = crate_paths(&code).iter().map(|p| p.join("::")).collect();
    assert_eq!(paths, ["a::B", "c::d", "c::e::F", "h::i"]);
    assert_eq!(
        functions("fn a() {\n{\n}\n}\nfn b();"),
        [("a".to_owned(), 4)]
    );
}
