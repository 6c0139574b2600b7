//! The CSS rules of a package: app stylesheets are inlined into one `<style>`
//! element of the assembled document and `style` values inside SVG assets are
//! checked the same way, so CSS must not fetch anything and must not end the
//! `<style>` element it is inlined into. Everything else in CSS stays allowed:
//! apps are fully customisable.
//!
//! A package stylesheet ([`check_css`]) may name the package's own assets:
//! `url()` of an image (`.svg .png .jpg .jpeg .webp .gif`) anywhere, and of a
//! `.woff2` font inside `@font-face`, resolved against the stylesheet's folder.
//! At assembly [`inline_urls`] replaces each such `url()` by a `data:` URL, so
//! the document still loads nothing. Every other URL (external, `data:`, a
//! missing or wrong file) is refused; so is every non-fragment URL in CSS
//! inside SVG files ([`scan`]), which are images and load nothing at all.
//!
//! The check works on cssparser's tokens, never on regular expressions, so
//! escapes (`u\72l(`), comments and case tricks are seen the way a browser sees
//! them. It must not rewrite CSS (beyond [`inline_urls`]) or judge what a rule
//! looks like.

use std::collections::BTreeSet;

use cssparser::{ParseError, Parser, Token};

use crate::asset::{IMAGE_EXTENSIONS, is_font_path, is_image_path};
use crate::diagnostics::{Diagnostics, LineIndex};
use crate::urls::{UrlKind, classify_url, normalize_url, package_path};

/// Deepest nesting of blocks (`{}`, `()`, `[]`, functions) that is checked; a
/// deeper stylesheet is refused instead of being walked, so the walk (which
/// recurses once per level) has a small, fixed stack budget.
pub const MAX_CSS_DEPTH: usize = 64;

/// One problem found in a piece of CSS, with its 1-based line relative to the
/// start of the text that was scanned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finding {
    pub line: u32,
    pub code: &'static str,
    pub reason: String,
}

/// One `url()` of a package stylesheet that names a package asset: the byte
/// range of the whole `url(…)` in the stylesheet's text and the asset's
/// package path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CssReference {
    pub start: usize,
    pub end: usize,
    pub path: String,
    /// 1-based line of the `url(`.
    pub line: u32,
}

/// Where a package stylesheet sits and which files the package holds: what
/// `url()` needs to name an asset.
#[derive(Debug, Clone, Copy)]
struct Package<'a> {
    /// The stylesheet's folder with a trailing `/`, or "" at the root.
    base: &'a str,
    files: &'a BTreeSet<String>,
}

/// The folder of `file` with a trailing `/`, or "" at the root.
fn folder_of(file: &str) -> String {
    file.rsplit_once('/')
        .map_or(String::new(), |(folder, _)| format!("{folder}/"))
}

/// Checks one stylesheet of the package (at package path `file`; `files` is
/// every path of the package) and records every problem.
pub fn check_css(file: &str, text: &str, files: &BTreeSet<String>, diagnostics: &mut Diagnostics) {
    let base = folder_of(file);
    let package = Package { base: &base, files };
    for finding in scan_with(text, Some(package)).0 {
        diagnostics.push(file, Some(finding.line), finding.code, finding.reason);
    }
}

/// The `url()`s of a package stylesheet that name package assets, in order.
/// Only meaningful for a stylesheet [`check_css`] accepted.
pub fn asset_references(file: &str, text: &str, files: &BTreeSet<String>) -> Vec<CssReference> {
    let base = folder_of(file);
    scan_with(text, Some(Package { base: &base, files })).1
}

/// The stylesheet with each `url()` that names a package asset replaced by
/// `url("<inline(path)>")` (a `data:` URL at assembly; it must hold no `"`,
/// `\` or newline). Text without such references comes back unchanged.
pub fn inline_urls(
    file: &str,
    text: &str,
    files: &BTreeSet<String>,
    inline: &dyn Fn(&str) -> String,
) -> String {
    let references = asset_references(file, text, files);
    if references.is_empty() {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for reference in references {
        out.push_str(&text[at..reference.start]);
        out.push_str("url(\"");
        out.push_str(&inline(&reference.path));
        out.push_str("\")");
        at = reference.end;
    }
    out.push_str(&text[at..]);
    out
}

/// Every problem in `text`, which is a stylesheet, a declaration list (a
/// `style` attribute) or a single value inside an SVG file: the rules are the
/// same for all three because they look only at tokens, and no URL but a
/// `#fragment` is allowed.
pub(crate) fn scan(text: &str) -> Vec<Finding> {
    scan_with(text, None).0
}

fn scan_with(text: &str, package: Option<Package<'_>>) -> (Vec<Finding>, Vec<CssReference>) {
    let mut findings = Vec::new();
    // A byte search rather than a token rule: the HTML parser ends a <style>
    // element at `</style` wherever it appears, inside CSS strings and
    // comments too.
    let lower = text.to_ascii_lowercase();
    let lines = LineIndex::new(text);
    let mut from = 0;
    while let Some(found) = lower[from..].find("</style") {
        let offset = from + found;
        findings.push(Finding {
            line: lines.line(offset),
            code: "CSS_STYLE_END",
            reason: "the text </style would end the inlined <style> element; split or escape it (for example <\\/style in a string)".to_owned(),
        });
        from = offset + "</style".len();
    }

    let (tokens, references) = walk_tokens(text, package);
    findings.extend(tokens);
    (findings, references)
}

/// The token rules alone, for CSS values that are never inlined into a
/// `<style>` element (SVG presentation attributes such as `fill`).
pub(crate) fn scan_tokens(text: &str) -> Vec<Finding> {
    walk_tokens(text, None).0
}

fn walk_tokens(text: &str, package: Option<Package<'_>>) -> (Vec<Finding>, Vec<CssReference>) {
    let mut parser = Parser::new(text);
    let mut walk = Walk {
        findings: Vec::new(),
        references: Vec::new(),
        package,
        too_deep: false,
        lines: LineIndex::new(text),
    };
    walk.block(&mut parser, 0, false);
    (walk.findings, walk.references)
}

struct Walk<'a> {
    findings: Vec<Finding>,
    references: Vec<CssReference>,
    /// `None`: CSS inside an SVG file, where only `#fragment` URLs may stay.
    package: Option<Package<'a>>,
    too_deep: bool,
    /// Lines as an editor and every other diagnostic count them (at `\n`):
    /// cssparser also ends a line at a form feed or a lone `\r`, as CSS's
    /// syntax does, which would point past the line a person sees.
    lines: LineIndex,
}

impl Walk<'_> {
    fn push(&mut self, line: u32, code: &'static str, reason: impl Into<String>) {
        self.findings.push(Finding {
            line,
            code,
            reason: reason.into(),
        });
    }

    /// Checks the tokens of one block; `depth` is how many blocks enclose it,
    /// `font_face` whether it is (inside) the block of an `@font-face` rule.
    fn block(&mut self, parser: &mut Parser<'_>, depth: usize, font_face: bool) {
        // An `@font-face` was seen and its block has not started yet.
        let mut pending_font_face = false;
        loop {
            let line = self.lines.line(parser.position().byte_index());
            let start = parser.position().byte_index();
            let token = match parser.next_including_whitespace_and_comments() {
                Ok(token) => token.clone(),
                Err(_) => return,
            };
            match &token {
                Token::AtKeyword(name) => {
                    pending_font_face = self.at_rule(line, name);
                }
                Token::Semicolon => pending_font_face = false,
                Token::UnquotedUrl(url) => {
                    let end = parser.position().byte_index();
                    self.url_value(line, url, (start, end), font_face);
                }
                Token::BadUrl(_) => self.url(line, "a malformed url()"),
                Token::Function(name) => {
                    let name = name.to_ascii_lowercase();
                    match name.as_str() {
                        // `url("…")` with a quoted argument: one string, which
                        // is judged like an unquoted url.
                        "url" => {
                            // Past the depth limit the argument is not read
                            // (`None`), and CSS_TOO_DEEP refuses the sheet.
                            let mut argument = None;
                            self.enter(parser, depth, |_, nested| {
                                argument = Some(url_argument(nested));
                                true
                            });
                            let end = parser.position().byte_index();
                            match argument {
                                Some(Some(value)) => {
                                    self.url_value(line, &value, (start, end), font_face);
                                }
                                Some(None) => self.url(line, "url(…)"),
                                None => {}
                            }
                            continue;
                        }
                        // src() and image() take a URL string; neither has a
                        // use inside a package.
                        "src" | "image" => self.url(line, &format!("{name}(…)")),
                        "image-set" | "-webkit-image-set" => self.push(
                            line,
                            "CSS_IMAGE_SET",
                            format!("{name}() loads images by URL; use url() of one package image, <img src> or a gradient instead"),
                        ),
                        _ => {}
                    }
                    self.descend(parser, depth, font_face);
                }
                Token::CurlyBracketBlock => {
                    let inside = font_face || std::mem::take(&mut pending_font_face);
                    self.descend(parser, depth, inside);
                }
                Token::ParenthesisBlock | Token::SquareBracketBlock => {
                    self.descend(parser, depth, font_face);
                }
                _ => {}
            }
        }
    }

    /// Records what an at-rule breaks; true for an allowed `@font-face`.
    fn at_rule(&mut self, line: u32, name: &str) -> bool {
        let (code, reason) = match name.to_ascii_lowercase().as_str() {
            "import" => (
                "CSS_IMPORT",
                "@import loads another stylesheet by URL; link each stylesheet from index.html with <link rel=\"stylesheet\"> instead",
            ),
            "font-face" if self.package.is_some() => return true,
            "font-face" => (
                "CSS_FONT_FACE",
                "@font-face loads fonts by URL; use the system font stacks instead",
            ),
            "namespace" => (
                "CSS_NAMESPACE",
                "@namespace is not allowed in app stylesheets; remove it",
            ),
            _ => return false,
        };
        self.push(line, code, reason);
        false
    }

    fn url(&mut self, line: u32, what: &str) {
        let allowed = if self.package.is_some() {
            "only url(#fragment) and url() of an image or (in @font-face) a .woff2 font of the package are allowed"
        } else {
            "only url(#fragment) references to elements of the document are allowed"
        };
        self.push(
            line,
            "CSS_URL",
            format!("{what} would load a resource by URL; {allowed}"),
        );
    }

    /// Judges the value of one `url()` spanning `range` of the text: a
    /// `#fragment` stays; in a package stylesheet a relative path must name
    /// an image of the package (a `.woff2` font inside `@font-face`) and
    /// becomes a reference; everything else is refused.
    fn url_value(&mut self, line: u32, value: &str, range: (usize, usize), font_face: bool) {
        let kind = classify_url(value);
        if kind == UrlKind::Fragment {
            return;
        }
        let Some(package) = self.package.filter(|_| kind == UrlKind::Relative) else {
            self.url(line, &format!("url({value})"));
            return;
        };
        let path = match package_path(package.base, &normalize_url(value)) {
            Ok(path) => path,
            Err(reason) => {
                self.push(line, "CSS_BAD_PATH", format!("url({value}): {reason}"));
                return;
            }
        };
        if !package.files.contains(&path) {
            self.push(
                line,
                "CSS_MISSING_FILE",
                format!("url({value}) names {path}, which is not a file of the package"),
            );
            return;
        }
        let wrong = if font_face {
            (!is_font_path(&path)).then(|| {
                format!("url({value}) in @font-face must name a .woff2 font of the package")
            })
        } else {
            (!is_image_path(&path)).then(|| {
                format!("url({value}) must name an image of the package ({IMAGE_EXTENSIONS}); fonts belong in @font-face src")
            })
        };
        if let Some(reason) = wrong {
            self.push(line, "CSS_WRONG_FILE_TYPE", reason);
            return;
        }
        self.references.push(CssReference {
            start: range.0,
            end: range.1,
            path,
            line,
        });
    }

    /// Walks into the block that was just opened, unless that would pass the
    /// depth limit.
    fn descend(&mut self, parser: &mut Parser<'_>, depth: usize, font_face: bool) {
        self.enter(parser, depth, |walk, nested| {
            walk.block(nested, depth + 1, font_face);
            true
        });
    }

    /// Runs `inside` on the block that was just opened and returns its answer;
    /// past the depth limit it records CSS_TOO_DEEP once and returns false
    /// (cssparser then skips the block without recursing).
    fn enter(
        &mut self,
        parser: &mut Parser<'_>,
        depth: usize,
        inside: impl FnOnce(&mut Self, &mut Parser<'_>) -> bool,
    ) -> bool {
        if depth + 1 > MAX_CSS_DEPTH {
            if !self.too_deep {
                self.too_deep = true;
                let line = self.lines.line(parser.position().byte_index());
                self.push(
                    line,
                    "CSS_TOO_DEEP",
                    format!(
                        "blocks nest more than {MAX_CSS_DEPTH} levels deep; flatten the stylesheet"
                    ),
                );
            }
            // The caller must not also report the block as a bad url().
            return true;
        }
        parser
            .parse_nested_block(|nested| Ok::<bool, ParseError<()>>(inside(self, nested)))
            .unwrap_or(false)
    }
}

/// The argument of `url(` when it is a quoted string: the string, when it is
/// exactly one string (whitespace and comments aside).
fn url_argument(parser: &mut Parser<'_>) -> Option<String> {
    let mut value = None;
    let mut others = 0usize;
    while let Ok(token) = parser.next_including_whitespace_and_comments() {
        match token {
            Token::WhiteSpace(_) | Token::Comment(_) => {}
            Token::QuotedString(string) if value.is_none() => value = Some(string.to_string()),
            _ => others += 1,
        }
    }
    value.filter(|_| others == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The files of the package the stylesheets are checked in.
    fn files() -> BTreeSet<String> {
        [
            "APP.md",
            "styles.css",
            "css/theme.css",
            "app.js",
            "assets/logo.svg",
            "assets/logo.png",
            "assets/photo.jpg",
            "assets/photo.webp",
            "assets/spinner.gif",
            "fonts/brand.woff2",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect()
    }

    fn codes_in(file: &str, text: &str) -> Vec<String> {
        let mut diagnostics = Diagnostics::new();
        check_css(file, text, &files(), &mut diagnostics);
        diagnostics.iter().map(|d| d.code.clone()).collect()
    }

    fn codes(text: &str) -> Vec<String> {
        codes_in("styles.css", text)
    }

    #[track_caller]
    fn check(text: &str, expected: &[&str]) {
        assert_eq!(codes(text), expected, "for {text:?}");
    }

    #[test]
    fn ordinary_css_is_allowed() {
        check("", &[]);
        check(
            ":root { --accent: #0a7; --gap: calc(1rem + 2px); }\n\
             body { font: 14px/1.4 system-ui, sans-serif; color: var(--accent, red); }\n\
             .a > .b:not(.c)::before { content: \"url(x) \\\"\"; }\n\
             @media (min-width: 40em) { @media (prefers-color-scheme: dark) { .x { color: white } } }\n\
             @supports (display: grid) { .g { display: grid; grid-template: \"a b\" 1fr / auto } }\n\
             @keyframes spin { from { transform: rotate(0) } to { transform: rotate(1turn) } }\n\
             @layer base { .y { background: linear-gradient(red, blue) } }\n\
             .n { & .m { color: red } }\n\
             @container card (width > 30em) { .z { inset: 0 } }\n\
             /* url(//a) inside a comment is not a token */",
            &[],
        );
    }

    #[test]
    fn fragment_urls_are_allowed() {
        check(
            ".a { filter: url(#blur); mask: url('#m'); fill: url( \"#g\" ) }",
            &[],
        );
        // A comment right after `url(` makes a bad url token, even before a
        // fragment: refused like every other malformed url.
        check(".a { clip-path: url(/* c */ \"#c\") }", &["CSS_URL"]);
    }

    #[test]
    fn imports_fonts_and_namespaces_are_refused() {
        check("@import 'x.css';", &["CSS_IMPORT"]);
        check("@import url(x.css);", &["CSS_IMPORT", "CSS_MISSING_FILE"]);
        check(
            "@import url(//attacker.test/x.css);",
            &["CSS_IMPORT", "CSS_URL"],
        );
        check("@IMPORT \"x.css\";", &["CSS_IMPORT"]);
        check("@\\69mport \"x.css\";", &["CSS_IMPORT"]);
        // A package stylesheet may declare fonts, but only from the package.
        check(
            "@font-face { font-family: x; src: url(//attacker.test/f.woff) }",
            &["CSS_URL"],
        );
        check(
            "@namespace svg url(http://www.w3.org/2000/svg);",
            &["CSS_NAMESPACE", "CSS_URL"],
        );
        check(".a { @import 'x.css'; }", &["CSS_IMPORT"]);
    }

    #[test]
    fn every_non_fragment_url_is_refused() {
        check("a { background: url(//attacker.test/x) }", &["CSS_URL"]);
        check("a { background: url(x.png) }", &["CSS_MISSING_FILE"]);
        check("a { background: URL(x.png) }", &["CSS_MISSING_FILE"]);
        check(
            "a { background: url(data:image/png;base64,AA==) }",
            &["CSS_URL"],
        );
        check(
            "a { background: url('data:image/png;base64,AA==') }",
            &["CSS_URL"],
        );
        check("a { background: url(javascript:x) }", &["CSS_URL"]);
        check(
            "a { cursor: url(https://attacker.test/c), auto }",
            &["CSS_URL"],
        );
        check("a { filter: url(//x#f) }", &["CSS_URL"]);
        check("a { background: url('//attacker.test') }", &["CSS_URL"]);
        check("a { background: url(\"#a\" \"b\") }", &["CSS_URL"]);
        check("a { background: url(var(--u)) }", &["CSS_URL"]);
        check("a { --u: url(//attacker.test) }", &["CSS_URL"]);
        check("a { background: src(\"x.png\") }", &["CSS_URL"]);
        check("a { background: src(var(--x)) }", &["CSS_URL"]);
        check("a { background: image(\"x.png\") }", &["CSS_URL"]);
        check(
            "a { list-style: url(x) } b { content: url(y) }",
            &["CSS_MISSING_FILE", "CSS_MISSING_FILE"],
        );
        check("a { background: url(x y) }", &["CSS_URL"]);
    }

    #[test]
    fn escape_and_comment_tricks_are_refused() {
        check("a { background: u\\72l(//attacker.test) }", &["CSS_URL"]);
        check("a { background: \\75 rl(//attacker.test) }", &["CSS_URL"]);
        check(
            "a { background: \\75 \\72 \\6c (//attacker.test) }",
            &["CSS_URL"],
        );
        check("a { background: url(/*c*/'//a') }", &["CSS_URL"]);
        check("a { background: uRl( '//a' ) }", &["CSS_URL"]);
    }

    #[test]
    fn image_sets_are_refused() {
        check(
            "a { background: image-set(\"a.png\" 1x) }",
            &["CSS_IMAGE_SET"],
        );
        check(
            "a { background: -webkit-image-set(url(a.png) 1x) }",
            &["CSS_IMAGE_SET", "CSS_MISSING_FILE"],
        );
        check(
            "a { background: Image-Set(\"a.png\" 1x) }",
            &["CSS_IMAGE_SET"],
        );
    }

    #[test]
    fn style_end_is_refused_anywhere() {
        check(
            "a { content: \"</style><base href=//attacker.test/>\" }",
            &["CSS_STYLE_END"],
        );
        check("/* </STYLE> */", &["CSS_STYLE_END"]);
        check("</style", &["CSS_STYLE_END"]);
        check(
            "a{}\n</StYlE x>\n</style>",
            &["CSS_STYLE_END", "CSS_STYLE_END"],
        );
        check("a { content: \"<\\/style>\" }", &[]);
    }

    #[test]
    fn lines_point_at_the_problem() {
        let mut diagnostics = Diagnostics::new();
        check_css(
            "a.css",
            "a {}\n\nb { background: url(//x) }\n@import 'y';",
            &files(),
            &mut diagnostics,
        );
        let lines: Vec<_> = diagnostics
            .iter()
            .map(|d| (d.code.as_str(), d.line))
            .collect();
        assert_eq!(lines, [("CSS_URL", Some(3)), ("CSS_IMPORT", Some(4))]);
        assert!(diagnostics.iter().all(|d| d.file == "a.css"));
    }

    /// CSS ends a line at a form feed or a lone `\r` too; a diagnostic counts
    /// lines at `\n` only, as an editor and every other check do (found by
    /// the `formats` fuzz target: a two-line file was told of line 8).
    #[test]
    fn lines_count_only_line_feeds() {
        let mut diagnostics = Diagnostics::new();
        check_css(
            "a.css",
            "a {\x0c\x0c\r\r}\r\nb { background: url(//x) }\x0c@import 'y';",
            &files(),
            &mut diagnostics,
        );
        let lines: Vec<_> = diagnostics.iter().map(|d| d.line).collect();
        assert_eq!(lines, [Some(2), Some(2)], "{diagnostics:?}");
    }

    #[test]
    fn deep_nesting_is_refused_without_overflow() {
        let deep = format!("{}{}", "a{".repeat(10_000), "}".repeat(10_000));
        check(&deep, &["CSS_TOO_DEEP"]);
        let unclosed = "(".repeat(100_000);
        check(&unclosed, &["CSS_TOO_DEEP"]);
        let brackets = "[".repeat(100_000);
        check(&brackets, &["CSS_TOO_DEEP"]);
        let functions = "f(".repeat(100_000);
        check(&functions, &["CSS_TOO_DEEP"]);
        // A url hidden below the limit is still found before the walk stops.
        let shallow = format!("{}url(//x){}", "a{".repeat(10), "}".repeat(10));
        check(&shallow, &["CSS_URL"]);
        let at_limit = format!(
            "{}x{}",
            "(".repeat(MAX_CSS_DEPTH),
            ")".repeat(MAX_CSS_DEPTH)
        );
        check(&at_limit, &[]);
    }

    #[test]
    fn pathological_inputs_complete() {
        check(
            &format!("a {{ b: url({}", " ".repeat(100_000)),
            &["CSS_URL"],
        );
        check(
            &format!("a {{ b: url({})", " ".repeat(100_000)),
            &["CSS_URL"],
        );
        check(&"\\".repeat(100_000), &[]);
        check(&"/*".repeat(100_000), &[]);
        check(&"u\\72l(".repeat(10_000), &["CSS_URL"]);
        let mut diagnostics = Diagnostics::new();
        check_css(
            "a.css",
            &"</style\n".repeat(50_000),
            &files(),
            &mut diagnostics,
        );
        assert_eq!(diagnostics.len(), 50_000);
        let mut diagnostics = Diagnostics::new();
        check_css(
            "a.css",
            &"a { b: url(x) }\n".repeat(50_000),
            &files(),
            &mut diagnostics,
        );
        assert_eq!(diagnostics.len(), 50_000);
    }

    /// Security catalogue A9 refuses every non-fragment URL token. Issue 23
    /// (binary assets) lets `url()` name an image or font of the package, on
    /// A8's terms for markup ("package-relative, and then inlined"): assembly
    /// replaces each by a `data:` URL, so the emitted CSS still loads nothing
    /// (CSP `img-src data:; font-src data:`). Every other URL stays refused.
    #[test]
    fn package_images_and_fonts_are_references() {
        check(
            "a { background: url(assets/logo.png) }\n\
             b { background-image: url('assets/photo.jpg'), url( \"assets/photo.webp\" ) }\n\
             c { list-style: url(assets/spinner.gif); cursor: url(assets/logo.svg), auto }\n\
             @font-face { font-family: brand; src: url(fonts/brand.woff2) format(\"woff2\"); }\n\
             @media print { @font-face { font-family: b2; src: url(\"fonts/brand.woff2\") } }\n\
             d { background: url(./assets/logo.png) }",
            &[],
        );
        let references = asset_references(
            "styles.css",
            "a{b:url(assets/logo.png)}@font-face{src:url('fonts/brand.woff2')}",
            &files(),
        );
        let paths: Vec<_> = references.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(paths, ["assets/logo.png", "fonts/brand.woff2"]);
    }

    #[test]
    fn references_resolve_against_the_stylesheets_folder() {
        assert_eq!(
            codes_in("css/theme.css", "a { background: url(../assets/logo.png) }"),
            Vec::<String>::new()
        );
        assert_eq!(
            codes_in("css/theme.css", "a { background: url(assets/logo.png) }"),
            ["CSS_MISSING_FILE"]
        );
        assert_eq!(
            codes_in("styles.css", "a { background: url(../assets/logo.png) }"),
            ["CSS_BAD_PATH"]
        );
        check(
            "a { background: url(assets/logo.png?v=1) }",
            &["CSS_BAD_PATH"],
        );
        check(
            "a { background: url(assets/logo%2epng) }",
            &["CSS_BAD_PATH"],
        );
        check("a { background: url(/assets/logo.png) }", &["CSS_BAD_PATH"]);
        // cssparser unescapes like a browser: this names assets/logo.png.
        check("a { background: url(assets/logo\\2e png) }", &[]);
    }

    #[test]
    fn a_missing_file_or_a_file_of_the_wrong_kind_is_refused() {
        check(
            "a { background: url(assets/missing.png) }",
            &["CSS_MISSING_FILE"],
        );
        check("a { background: url(app.js) }", &["CSS_WRONG_FILE_TYPE"]);
        check(
            "a { background: url(fonts/brand.woff2) }",
            &["CSS_WRONG_FILE_TYPE"],
        );
        check(
            "@font-face { font-family: x; src: url(assets/logo.png) }",
            &["CSS_WRONG_FILE_TYPE"],
        );
        check(
            "@font-face { font-family: x; src: url(fonts/missing.woff2) }",
            &["CSS_MISSING_FILE"],
        );
        // A font outside @font-face's block, even right after one.
        check(
            "@font-face { font-family: x } a { background: url(fonts/brand.woff2) }",
            &["CSS_WRONG_FILE_TYPE"],
        );
        check(
            "@font-face; a { background: url(fonts/brand.woff2) }",
            &["CSS_WRONG_FILE_TYPE"],
        );
    }

    #[test]
    fn urls_become_data_urls_in_place() {
        let inline = |path: &str| format!("data:x/y;base64,{}", path.len());
        let text = "a{b:url(assets/logo.png)}\n@font-face { src: url( 'fonts/brand.woff2' ) format('woff2') }\nc{d:url(#f)}";
        assert_eq!(
            inline_urls("styles.css", text, &files(), &inline),
            "a{b:url(\"data:x/y;base64,15\")}\n@font-face { src: url(\"data:x/y;base64,17\") format('woff2') }\nc{d:url(#f)}"
        );
        let plain = "a { color: red }";
        assert_eq!(inline_urls("styles.css", plain, &files(), &inline), plain);
        // An unclosed url( at the end still becomes one whole url().
        assert_eq!(
            inline_urls("styles.css", "a{b:url('assets/logo.png'", &files(), &inline),
            "a{b:url(\"data:x/y;base64,15\")"
        );
    }

    #[test]
    fn css_inside_svg_files_still_names_no_file() {
        let scanned: Vec<_> =
            scan("a { fill: url(assets/logo.png) } @font-face { src: url(fonts/brand.woff2) }")
                .into_iter()
                .map(|finding| finding.code)
                .collect();
        assert_eq!(scanned, ["CSS_URL", "CSS_FONT_FACE", "CSS_URL"]);
        let tokens: Vec<_> = scan_tokens("url(assets/logo.png)")
            .into_iter()
            .map(|finding| finding.code)
            .collect();
        assert_eq!(tokens, ["CSS_URL"]);
    }
}
