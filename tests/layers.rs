//! The architecture, held: every `crate::`, `super::` and `self::` path in `src/` (outside the
//! binaries) is read, resolved through the re-exports of the modules it passes to the file that
//! defines what it names, and checked against the layer order `src/lib.rs` describes:
//!
//! 1. no room imports from a room of a higher layer;
//! 2. within any module, its parts (files and folders) import each other without a circle;
//! 3. no source file under `src/` is over 1,000 lines.
//!
//! Comments and string literals are skipped, test modules inside a file count (they are code in
//! that room too).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// The rooms of `src/`, bottom to top; a room may import from its own layer and the layers below.
/// Keep in step with the map in `src/lib.rs`.
const LAYERS: &[(&str, &[&str])] = &[
    ("base", &["base"]),
    ("model", &["graph", "data", "gp", "generate"]),
    ("discovery", &["discovery"]),
    ("job runner", &["runner"]),
    ("engine", &["engine"]),
    ("page and worker", &["worker", "page_model", "app"]),
];

/// No file under `src/` may be longer.
const MAX_LINES: usize = 1000;

type ModPath = Vec<String>;

struct SourceFile {
    path: PathBuf,
    module: ModPath,
    /// The comment- and string-free text.
    code: String,
    /// Where the file's inline test module starts (byte offset in `code`), if it has one.
    tests_from: Option<usize>,
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn module_of(relative: &Path) -> ModPath {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().expect("a file name");
    let stem = last.trim_end_matches(".rs").to_string();
    if stem != "mod" && stem != "lib" {
        parts.push(stem);
    }
    parts
}

/// `text` with comments removed and string and character literals emptied, so only code is read.
fn strip(text: &str) -> String {
    let b = text.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if b[i] == b'\n' {
                        out.push(b'\n');
                    }
                    i += 1;
                }
            }
        } else if c == b'r'
            && (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
            && (i == 0 || !is_ident(b[i - 1]))
        {
            // A raw string: r"…" or r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push(b'r');
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == b'"' && (0..hashes).all(|h| b.get(j + 1 + h) == Some(&b'#')) {
                    j += 1 + hashes;
                    break;
                }
                if b[j] == b'\n' {
                    out.push(b'\n');
                }
                j += 1;
            }
            out.extend_from_slice(b"\"\"");
            i = j;
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                if i < b.len() && b[i] == b'\n' {
                    out.push(b'\n');
                }
                i += 1;
            }
            i += 1;
            out.extend_from_slice(b"\"\"");
        } else if c == b'\'' {
            // A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if b.get(i + 1) == Some(&b'\\') {
                let mut j = i + 2;
                while j < b.len() && b[j] != b'\'' {
                    j += 1;
                }
                out.extend_from_slice(b"' '");
                i = j + 1;
            } else if b.get(i + 2) == Some(&b'\'') {
                out.extend_from_slice(b"' '");
                i += 3;
            } else {
                out.push(b'\'');
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    // Only whole characters were copied or dropped, so the text is still UTF-8.
    String::from_utf8(out).expect("UTF-8 source")
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Where an inline `#[cfg(test)] mod name {` starts: from there on `super` names the file itself.
fn inline_tests_start(code: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(found) = code[from..].find("#[cfg(test)]") {
        let at = from + found;
        let rest = code[at + "#[cfg(test)]".len()..].trim_start();
        if let Some(after_mod) = rest.strip_prefix("mod ") {
            let name_end = after_mod
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(after_mod.len());
            if after_mod[name_end..].trim_start().starts_with('{') {
                return Some(at);
            }
        }
        from = at + 1;
    }
    None
}

/// The paths of a use tree beginning at `text` (just after `crate::`, `super::` …): each as its
/// segments and the name it is bound to.
fn use_tree(text: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let mut chars = text.char_indices().peekable();
    parse_tree(text, &mut chars, Vec::new(), &mut paths);
    paths
}

type Chars<'a> = std::iter::Peekable<std::str::CharIndices<'a>>;

fn skip_space(chars: &mut Chars) {
    while chars.peek().is_some_and(|(_, c)| c.is_whitespace()) {
        chars.next();
    }
}

fn parse_tree(text: &str, chars: &mut Chars, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut path = prefix;
    loop {
        skip_space(chars);
        match chars.peek().copied() {
            Some((_, '{')) => {
                chars.next();
                loop {
                    skip_space(chars);
                    match chars.peek().copied() {
                        Some((_, '}')) => {
                            chars.next();
                            return;
                        }
                        Some((_, ',')) => {
                            chars.next();
                        }
                        Some(_) => parse_tree(text, chars, path.clone(), out),
                        None => return,
                    }
                }
            }
            Some((_, '*')) => {
                chars.next();
                out.push(path);
                return;
            }
            Some((start, c)) if c.is_alphabetic() || c == '_' => {
                let mut end = start;
                while let Some(&(i, c)) = chars.peek() {
                    if c.is_alphanumeric() || c == '_' {
                        end = i + c.len_utf8();
                        chars.next();
                    } else {
                        break;
                    }
                }
                path.push(text[start..end].to_string());
                skip_space(chars);
                let mut lookahead = chars.clone();
                if matches!(lookahead.next(), Some((_, ':')))
                    && matches!(lookahead.next(), Some((_, ':')))
                {
                    chars.next();
                    chars.next();
                    continue;
                }
                // `name as alias`: the path names the same item.
                if text[chars.peek().map_or(text.len(), |&(i, _)| i)..].starts_with("as ") {
                    for _ in 0..3 {
                        chars.next();
                    }
                    skip_space(chars);
                    while chars
                        .peek()
                        .is_some_and(|(_, c)| c.is_alphanumeric() || *c == '_')
                    {
                        chars.next();
                    }
                }
                out.push(path);
                return;
            }
            _ => {
                if !path.is_empty() {
                    out.push(path);
                }
                return;
            }
        }
    }
}

struct Crate {
    files: Vec<SourceFile>,
    modules: BTreeSet<ModPath>,
    /// For each module, the names it re-exports (`pub use`) and the absolute paths they stand for.
    reexports: HashMap<ModPath, HashMap<String, ModPath>>,
}

/// Every absolute path a file's code names, from where in the code.
fn paths_in(file: &SourceFile, modules: &BTreeSet<ModPath>) -> Vec<(usize, ModPath)> {
    let code = &file.code;
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts_word = i == 0 || !(is_ident(bytes[i - 1]) || bytes[i - 1] == b'$');
        let prefix = ["crate::", "super::", "self::"]
            .into_iter()
            .find(|p| starts_word && bytes[i..].starts_with(p.as_bytes()));
        let Some(prefix) = prefix else {
            i += 1;
            continue;
        };
        let in_tests = file.tests_from.is_some_and(|t| i > t);
        let mut here: ModPath = file.module.clone();
        if in_tests {
            here.push("tests".into());
        }
        let mut base: ModPath = match prefix {
            "crate::" => Vec::new(),
            "self::" => here.clone(),
            _ => {
                let mut b = here.clone();
                b.pop();
                b
            }
        };
        let mut j = i + prefix.len();
        while bytes[j..].starts_with(b"super::") {
            base.pop();
            j += "super::".len();
        }
        for rest in use_tree(&code[j..]) {
            let mut full = base.clone();
            full.extend(rest);
            found.push((i, full));
        }
        i = j;
    }
    // Plain `use child::…` in a module with children names its own children.
    let _ = modules;
    found
}

/// Re-exports of one file: `pub use` (and `pub(crate) use`) statements.
fn reexports_of(file: &SourceFile, modules: &BTreeSet<ModPath>) -> HashMap<String, ModPath> {
    let mut map = HashMap::new();
    let code = &file.code;
    for marker in ["pub use ", "pub(crate) use "] {
        let mut from = 0;
        while let Some(found) = code[from..].find(marker) {
            let at = from + found + marker.len();
            from = at;
            let text = &code[at..];
            let (base, rest): (ModPath, &str) = if let Some(r) = text.strip_prefix("crate::") {
                (Vec::new(), r)
            } else if let Some(r) = text.strip_prefix("self::") {
                (file.module.clone(), r)
            } else if let Some(mut r) = text.strip_prefix("super::") {
                let mut b = file.module.clone();
                b.pop();
                while let Some(rr) = r.strip_prefix("super::") {
                    b.pop();
                    r = rr;
                }
                (b, r)
            } else {
                (file.module.clone(), text)
            };
            for tail in use_tree(rest) {
                let Some(name) = tail.last().cloned() else {
                    continue;
                };
                let mut full = base.clone();
                full.extend(tail);
                // A relative path that names no module of ours is an external crate.
                let mut first = base.clone();
                first.push(full[base.len()].clone());
                if base == file.module && !modules.contains(&first) {
                    continue;
                }
                map.insert(name, full);
            }
        }
    }
    map
}

impl Crate {
    fn read() -> Crate {
        let src = src_dir();
        let mut paths = Vec::new();
        rust_files(&src, &mut paths);
        let mut files = Vec::new();
        for path in paths {
            let relative = path.strip_prefix(&src).unwrap().to_path_buf();
            if relative.starts_with("bin") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = strip(&text);
            files.push(SourceFile {
                module: module_of(&relative),
                tests_from: inline_tests_start(&code),
                code,
                path: relative,
            });
        }
        let modules: BTreeSet<ModPath> = files.iter().map(|f| f.module.clone()).collect();
        let reexports = files
            .iter()
            .map(|f| (f.module.clone(), reexports_of(f, &modules)))
            .collect();
        Crate {
            files,
            modules,
            reexports,
        }
    }

    /// The module that defines what `path` names, following re-exports.
    fn resolve(&self, path: &[String], depth: usize) -> ModPath {
        let mut current: ModPath = Vec::new();
        for (k, segment) in path.iter().enumerate() {
            let mut next = current.clone();
            next.push(segment.clone());
            if self.modules.contains(&next) {
                current = next;
                continue;
            }
            if depth < 8 {
                if let Some(target) = self.reexports.get(&current).and_then(|m| m.get(segment)) {
                    let mut rest = target.clone();
                    rest.extend(path[k + 1..].iter().cloned());
                    return self.resolve(&rest, depth + 1);
                }
            }
            return current;
        }
        current
    }

    /// The deepest module that `path` names as written, before any re-export is followed.
    fn written_module(&self, path: &[String]) -> ModPath {
        let mut current: ModPath = Vec::new();
        for segment in path {
            let mut next = current.clone();
            next.push(segment.clone());
            if !self.modules.contains(&next) {
                break;
            }
            current = next;
        }
        current
    }

    /// (importing module, imported module, the path as written) for every path in the code: one
    /// entry for the module that defines the item and, when the path reaches it through another
    /// module's re-export, one for that module too (a rename there breaks the importer as well).
    fn imports(&self) -> Vec<(ModPath, ModPath, String)> {
        let mut out = Vec::new();
        for file in &self.files {
            for (_, path) in paths_in(file, &self.modules) {
                let through = self.written_module(&path);
                let target = self.resolve(&path, 0);
                for module in [target.clone(), through] {
                    // A module's own items, and its ancestors' (mod.rs files re-exporting their
                    // parts), are not imports across parts.
                    if module != file.module && !file.module.starts_with(&module) {
                        out.push((file.module.clone(), module, path.join("::")));
                    }
                }
            }
        }
        out
    }
}

fn layer_of(room: &str) -> Option<(usize, &'static str)> {
    LAYERS
        .iter()
        .enumerate()
        .find(|(_, (_, rooms))| rooms.contains(&room))
        .map(|(k, (name, _))| (k, *name))
}

fn shown(module: &[String]) -> String {
    if module.is_empty() {
        "crate root".into()
    } else {
        module.join("::")
    }
}

#[test]
fn no_room_imports_from_a_higher_layer() {
    let krate = Crate::read();
    let mut wrong = BTreeSet::new();
    for file in &krate.files {
        if let Some(room) = file.module.first() {
            if layer_of(room).is_none() {
                wrong.insert(format!(
                    "{} is in room '{room}', which no layer holds (tests/layers.rs LAYERS)",
                    file.path.display()
                ));
            }
        }
    }
    for (from, to, written) in krate.imports() {
        let Some((la, na)) = from.first().and_then(|a| layer_of(a)) else {
            continue;
        };
        // Both the room the path goes through (a re-export there is still a way into that
        // room) and the room that defines the item must be at or below the importer's layer.
        let through = written.split("::").next().unwrap_or_default().to_string();
        for room in [through, to.first().cloned().unwrap_or_default()] {
            if let Some((lb, nb)) = layer_of(&room) {
                if lb > la {
                    wrong.insert(format!(
                        "{} (layer '{na}') imports crate::{written} from layer '{nb}', above it",
                        shown(&from)
                    ));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layer order:\n{}",
        wrong.into_iter().collect::<Vec<_>>().join("\n")
    );
}

/// The strongly connected groups of more than one node (Tarjan's algorithm).
fn circles(
    nodes: &BTreeSet<String>,
    edges: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: HashMap<String, usize>,
        low: HashMap<String, usize>,
        stack: Vec<String>,
        on_stack: BTreeSet<String>,
        next: usize,
        groups: Vec<Vec<String>>,
    }
    fn visit(s: &mut State, v: &str) {
        s.index.insert(v.to_string(), s.next);
        s.low.insert(v.to_string(), s.next);
        s.next += 1;
        s.stack.push(v.to_string());
        s.on_stack.insert(v.to_string());
        let targets: Vec<String> = s
            .edges
            .get(v)
            .map(|t| t.iter().cloned().collect())
            .unwrap_or_default();
        for w in targets {
            if !s.index.contains_key(&w) {
                visit(s, &w);
                let lw = s.low[&w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(&w) {
                let iw = s.index[&w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut group = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on_stack.remove(&w);
                let done = w == v;
                group.push(w);
                if done {
                    break;
                }
            }
            if group.len() > 1 {
                group.sort();
                s.groups.push(group);
            }
        }
    }
    let mut s = State {
        edges,
        index: HashMap::new(),
        low: HashMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        groups: Vec::new(),
    };
    for v in nodes {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.groups
}

#[test]
fn the_parts_of_every_module_import_each_other_without_a_circle() {
    let krate = Crate::read();
    let imports = krate.imports();
    let mut wrong = Vec::new();
    // Every module with parts: the crate root and each folder.
    let parents: BTreeSet<ModPath> = krate
        .modules
        .iter()
        .filter(|m| {
            krate
                .modules
                .iter()
                .any(|c| c.len() == m.len() + 1 && c.starts_with(m))
        })
        .cloned()
        .collect();
    for parent in &parents {
        let depth = parent.len();
        let part = |m: &ModPath| -> Option<String> {
            (m.len() > depth && m.starts_with(parent)).then(|| m[depth].clone())
        };
        let nodes: BTreeSet<String> = krate.modules.iter().filter_map(part).collect();
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut example: BTreeMap<(String, String), String> = BTreeMap::new();
        for (from, to, written) in &imports {
            if let (Some(a), Some(b)) = (part(from), part(to)) {
                if a != b {
                    edges.entry(a.clone()).or_default().insert(b.clone());
                    example
                        .entry((a, b))
                        .or_insert_with(|| format!("{} uses crate::{written}", shown(from)));
                }
            }
        }
        for group in circles(&nodes, &edges) {
            let mut why = Vec::new();
            for a in &group {
                for b in &group {
                    if let Some(e) = example.get(&(a.clone(), b.clone())) {
                        why.push(format!("    {a} → {b}: {e}"));
                    }
                }
            }
            wrong.push(format!(
                "in {}: a circle among {}\n{}",
                shown(parent),
                group.join(", "),
                why.join("\n")
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn no_source_file_is_over_a_thousand_lines() {
    let src = src_dir();
    let mut all = Vec::new();
    rust_files(&src, &mut all);
    assert!(!all.is_empty());
    let long: Vec<String> = all
        .iter()
        .filter_map(|path| {
            let lines = std::fs::read_to_string(path).unwrap().lines().count();
            let name = path.strip_prefix(&src).unwrap().display();
            (lines > MAX_LINES).then(|| format!("{name} has {lines} lines"))
        })
        .collect();
    assert!(
        long.is_empty(),
        "files over {MAX_LINES} lines:\n{}",
        long.join("\n")
    );
}

/// The reader itself: a circle, a re-export followed, an upward import seen, comments skipped.
#[test]
fn the_reader_resolves_reexports_and_skips_comments() {
    let code = strip("use crate::a::{b::C, d}; // crate::x::y\nlet s = \"crate::z\"; /* crate::w */ super::e::f();");
    assert!(!code.contains("crate::x") && !code.contains("crate::z") && !code.contains("crate::w"));
    let tree = use_tree("a::{b::C, d as D, e::{f, g::*}}");
    let shown: Vec<String> = tree.iter().map(|p| p.join("::")).collect();
    assert_eq!(shown, ["a::b::C", "a::d", "a::e::f", "a::e::g"]);
    let nodes: BTreeSet<String> = ["a", "b", "c"].map(String::from).into();
    let mut edges = BTreeMap::new();
    edges.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    edges.insert(
        "b".to_string(),
        BTreeSet::from(["a".to_string(), "c".to_string()]),
    );
    assert_eq!(
        circles(&nodes, &edges),
        vec![vec!["a".to_string(), "b".to_string()]]
    );
    assert_eq!(
        inline_tests_start("fn x() {}\n#[cfg(test)]\nmod tests {\n}"),
        Some(10)
    );
}
