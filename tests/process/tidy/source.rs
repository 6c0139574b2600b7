//! Reading a crate's Rust source the way the structural checks need it:
//! its production files (no test file, no inline `#[cfg(test)]` module),
//! their code without comments, strings and character literals, the
//! file-level import graph their `use crate::…`, `crate::…` and `super::…`
//! paths draw, and the circles in it.
//!
//! What it must never do: count a path in a comment, a string or a test as
//! an import, or resolve a path to a file it does not name (a path is
//! followed to the deepest module that is a file of its own; an item in a
//! file's inline module belongs to that file).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Whether a file below a crate's `src/` is test code by its path: a
/// `tests.rs`, a `*_tests.rs` or `test_*.rs` file, or anything below a
/// `tests/` folder.
pub(super) fn is_test_file(relative: &str) -> bool {
    let mut parts: Vec<&str> = relative.split('/').collect();
    let name = parts.pop().unwrap_or_default();
    parts.contains(&"tests")
        || name == "tests.rs"
        || name.ends_with("_tests.rs")
        || name.starts_with("test_")
}

/// The production `.rs` files of the crate whose source folder is `src`, by
/// path relative to it, with their code (see [`code`]).
pub(super) fn production_files(src: &Path) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    let mut folders = vec![src.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
                continue;
            }
            let relative = path
                .strip_prefix(src)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            if !relative.ends_with(".rs") || is_test_file(&relative) {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            files.insert(relative, code(&text));
        }
    }
    files
}

/// `text` without comments, with every string and character literal
/// emptied (`""`, `' '`), and without its inline `#[cfg(test)]` modules.
pub(super) fn code(text: &str) -> String {
    without_test_modules(&without_comments_and_literals(text))
}

fn without_comments_and_literals(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while at < bytes.len() {
        let rest = &text[at..];
        if rest.starts_with("//") {
            at += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            let mut depth = 0;
            while at < bytes.len() {
                if text[at..].starts_with("/*") {
                    depth += 1;
                    at += 2;
                } else if text[at..].starts_with("*/") {
                    depth -= 1;
                    at += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    at += 1;
                }
            }
        } else if let Some(length) = raw_string(rest, at == 0 || !is_ident(bytes[at - 1])) {
            out.push_str("\"\"");
            at += length;
        } else if bytes[at] == b'"' {
            let mut end = at + 1;
            while end < bytes.len() && bytes[end] != b'"' {
                end += if bytes[end] == b'\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            at = end + 1;
        } else if let Some(length) = char_literal(rest) {
            out.push_str("' '");
            at += length;
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            at += c.len_utf8();
        }
    }
    out
}

fn is_ident(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

/// The length of the raw string (`r"…"`, `r#"…"#`, `br"…"`) `rest` starts
/// with, if it starts with one and `at_word_start`.
fn raw_string(rest: &str, at_word_start: bool) -> Option<usize> {
    if !at_word_start {
        return None;
    }
    let after_prefix = rest.strip_prefix("br").or_else(|| rest.strip_prefix('r'))?;
    let hashes = after_prefix.len() - after_prefix.trim_start_matches('#').len();
    let body = after_prefix[hashes..].strip_prefix('"')?;
    let closing = format!("\"{}", "#".repeat(hashes));
    let end = body
        .find(&closing)
        .map_or(body.len(), |end| end + closing.len());
    Some(rest.len() - body.len() + end)
}

/// The length of the character literal `rest` starts with (`'a'`, `'\''`,
/// `'\u{1F600}'`), if it is one rather than a lifetime.
fn char_literal(rest: &str) -> Option<usize> {
    let inner = rest.strip_prefix('\'')?;
    if let Some(escaped) = inner.strip_prefix('\\') {
        let close = escaped.find('\'')?;
        return Some(2 + close + 1);
    }
    let c = inner.chars().next()?;
    inner[c.len_utf8()..]
        .starts_with('\'')
        .then(|| 1 + c.len_utf8() + 1)
}

/// `code` without the `#[cfg(test)]` modules written inline (`mod x { … }`);
/// a `#[cfg(test)] mod x;` names a file, which [`is_test_file`] leaves out.
fn without_test_modules(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(start) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..start]);
        let after = &rest[start + "#[cfg(test)]".len()..];
        let item = after.trim_start();
        let is_inline_module = item
            .strip_prefix("pub(crate) ")
            .or_else(|| item.strip_prefix("pub "))
            .unwrap_or(item)
            .strip_prefix("mod ")
            .and_then(|named| {
                named
                    .find(['{', ';'])
                    .map(|at| named.as_bytes()[at] == b'{')
            })
            .unwrap_or(false);
        if !is_inline_module {
            out.push_str("#[cfg(test)]");
            rest = after;
            continue;
        }
        let open = after.find('{').unwrap();
        let mut depth = 0;
        let mut end = after.len();
        for (offset, c) in after[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + offset + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// The module path a file below `src/` is (`lib.rs` the root, `a.rs` and
/// `a/mod.rs` the module `a`, `a/b.rs` the module `a::b`).
fn module_of(relative: &str) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_owned)
        .collect();
    if parts.last().is_some_and(|last| last == "mod") || parts == ["lib"] {
        parts.pop();
    }
    parts
}

/// The use trees of `use …;` items, each expanded into its paths
/// (`a::{b, c::d}` into `a::b`, `a::c::d`), with the byte offset of its
/// `use`.
fn use_paths(code: &str) -> Vec<(usize, Vec<String>)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(found_at) = code[from..].find("use ") {
        let at = from + found_at;
        from = at + 4;
        if at > 0 && is_ident(code.as_bytes()[at - 1]) {
            continue;
        }
        let Some(end) = code[from..].find(';') else {
            break;
        };
        for path in expand(&code[from..from + end]) {
            found.push((at, path));
        }
    }
    found
}

/// The paths of one use tree.
fn expand(tree: &str) -> Vec<Vec<String>> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or(tree);
        return vec![
            path.split("::")
                .map(str::trim)
                .filter(|segment| !segment.is_empty())
                .map(str::to_owned)
                .collect(),
        ];
    };
    let prefix: Vec<String> = tree[..open]
        .split("::")
        .map(str::trim)
        .filter(|segment| !segment.is_empty())
        .map(str::to_owned)
        .collect();
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut branches = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (offset, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                branches.push(&inner[start..offset]);
                start = offset + 1;
            }
            _ => {}
        }
    }
    branches.push(&inner[start..]);
    branches
        .into_iter()
        .filter(|branch| !branch.trim().is_empty())
        .flat_map(expand)
        .map(|tail| prefix.iter().cloned().chain(tail).collect())
        .collect()
}

/// The `crate::…` and `super::…` paths written in code outside `use` items
/// (`crate::ledger::record(…)`), with their byte offsets.
fn inline_paths(code: &str) -> Vec<(usize, Vec<String>)> {
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    for keyword in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(found_at) = code[from..].find(keyword) {
            let at = from + found_at;
            from = at + keyword.len();
            if at > 0 && (is_ident(bytes[at - 1]) || bytes[at - 1] == b':') {
                continue;
            }
            let mut end = at;
            while end < bytes.len() && (is_ident(bytes[end]) || bytes[end] == b':') {
                end += 1;
            }
            let path: Vec<String> = code[at..end]
                .split("::")
                .filter(|segment| !segment.is_empty())
                .map(str::to_owned)
                .collect();
            found.push((at, path));
        }
    }
    found
}

/// The inline modules (`mod x { … }`) open at each byte offset of `code`,
/// outermost first, as a function of the offset.
fn inline_modules(code: &str) -> impl Fn(usize) -> Vec<String> + '_ {
    let bytes = code.as_bytes();
    // (offset of `{`, module name) for every inline module.
    let mut openings = BTreeMap::new();
    let mut from = 0;
    while let Some(found_at) = code[from..].find("mod ") {
        let at = from + found_at;
        from = at + 4;
        if at > 0 && is_ident(bytes[at - 1]) {
            continue;
        }
        let name: String = code[from..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let after = code[from + name.len()..].trim_start();
        if after.starts_with('{') {
            openings.insert(code.len() - after.len(), name);
        }
    }
    move |offset| {
        let mut open: Vec<(usize, String)> = Vec::new();
        let mut depth = 0;
        for (at, c) in code[..offset].char_indices() {
            match c {
                '{' => {
                    depth += 1;
                    if let Some(name) = openings.get(&at) {
                        open.push((depth, name.clone()));
                    }
                }
                '}' => {
                    if open.last().is_some_and(|(level, _)| *level == depth) {
                        open.pop();
                    }
                    depth -= 1;
                }
                _ => {}
            }
        }
        open.into_iter().map(|(_, name)| name).collect()
    }
}

/// The file-level import graph of one crate's library files: for each file,
/// the other files whose items its `crate::` and `super::` paths name. A
/// binary's root (`main.rs`, `bin/`) is a crate of its own and is left out.
pub(super) fn import_graph(files: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let files: BTreeMap<&String, &String> = files
        .iter()
        .filter(|(relative, _)| *relative != "main.rs" && !relative.starts_with("bin/"))
        .collect();
    let by_module: BTreeMap<Vec<String>, &String> = files
        .keys()
        .map(|relative| (module_of(relative), *relative))
        .collect();
    let resolve = |segments: &[String]| {
        (0..=segments.len())
            .rev()
            .find_map(|length| by_module.get(&segments[..length]).copied())
    };
    let mut graph = BTreeMap::new();
    for (relative, code) in files {
        let module = module_of(relative);
        let inline_at = inline_modules(code);
        let mut edges = BTreeSet::new();
        for (at, path) in use_paths(code).into_iter().chain(inline_paths(code)) {
            let segments = match path.first().map(String::as_str) {
                Some("crate") => path[1..].to_vec(),
                Some("super") => {
                    let mut base = module.clone();
                    base.extend(inline_at(at));
                    let mut rest = path.as_slice();
                    while rest.first().is_some_and(|segment| segment == "super") {
                        base.pop();
                        rest = &rest[1..];
                    }
                    base.extend(rest.iter().cloned());
                    base
                }
                _ => continue,
            };
            if let Some(target) = resolve(&segments)
                && target != relative
            {
                edges.insert(target.clone());
            }
        }
        graph.insert((*relative).clone(), edges);
    }
    graph
}

/// The circles of `graph`: its strongly connected components of more than
/// one file (Tarjan's algorithm), each sorted.
pub(super) fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Search<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    impl<'g> Search<'g> {
        fn visit(&mut self, file: &'g str) {
            let number = self.index.len();
            self.index.insert(file, number);
            self.low.insert(file, number);
            self.stack.push(file);
            self.on_stack.insert(file);
            for next in self.graph.get(file).into_iter().flatten() {
                let next = next.as_str();
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[file].min(self.low[next]);
                    self.low.insert(file, low);
                } else if self.on_stack.contains(next) {
                    let low = self.low[file].min(self.index[next]);
                    self.low.insert(file, low);
                }
            }
            if self.low[file] == self.index[file] {
                let mut component = Vec::new();
                while let Some(member) = self.stack.pop() {
                    self.on_stack.remove(member);
                    component.push(member.to_owned());
                    if member == file {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut search = Search {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for file in graph.keys() {
        if !search.index.contains_key(file.as_str()) {
            search.visit(file);
        }
    }
    search.found
}

#[test]
fn code_is_read_without_comments_literals_or_test_modules() {
    let text = r##"//! header crate::a
use crate::b::{c, d::{e, f as g}};
/* crate::h /* nested */ */
fn x() { let s = "crate::i"; let r = r#"crate::j"#; let c = '"'; crate::k::l(); }
fn y<'a>(v: &'a str) -> &'a str { v }
#[cfg(test)]
mod tests { use crate::m; }
#[cfg(test)]
mod tests_file;
"##;
    let code = code(text);
    for gone in ["crate::a", "crate::h", "crate::i", "crate::j", "crate::m"] {
        assert!(!code.contains(gone), "{gone} is not code: {code}");
    }
    assert!(code.contains("crate::k::l()") && code.contains("fn y<'a>"));
    assert!(code.contains("mod tests_file;"));
    let paths: Vec<String> = use_paths(&code)
        .into_iter()
        .map(|(_, path)| path.join("::"))
        .collect();
    assert_eq!(paths, ["crate::b::c", "crate::b::d::e", "crate::b::d::f"]);
}

#[test]
fn a_circle_between_files_is_found_and_a_parent_using_its_child_is_not_one() {
    let files: BTreeMap<String, String> = [
        ("lib.rs", "mod api; mod drafts; mod leaf; pub(crate) struct Core;"),
        // The route table registers the drafts handler; the handler imports
        // a helper back from the route table: the shape of the old circle.
        ("api.rs", "fn routes() { crate::drafts::review(); }\npub(crate) fn wire_user() {}"),
        ("drafts.rs", "use crate::api::wire_user;\nuse crate::Core;\nmod inner { use super::super::leaf::x; }"),
        ("leaf.rs", "pub(crate) fn x() {}\nmod child;"),
        ("leaf/child.rs", "use super::x;"),
    ]
    .into_iter()
    .map(|(path, text)| (path.to_owned(), code(text)))
    .collect();
    let graph = import_graph(&files);
    assert_eq!(
        graph["drafts.rs"],
        ["api.rs", "leaf.rs", "lib.rs"].map(str::to_owned).into()
    );
    assert_eq!(graph["leaf/child.rs"], ["leaf.rs".to_owned()].into());
    assert_eq!(circles(&graph), [["api.rs", "drafts.rs"]]);
}
