//! The CSS rules of a package: app stylesheets are inlined into one `<style>`
//! element of the assembled document and `style` values inside SVG assets are
//! checked the same way, so CSS must not fetch anything (every URL would reach
//! outside the package) and must not end the `<style>` element it is inlined
//! into. Everything else in CSS stays allowed: apps are fully customisable.
//!
//! The check works on cssparser's tokens, never on regular expressions, so
//! escapes (`u\72l(`), comments and case tricks are seen the way a browser sees
//! them. It must not rewrite CSS or judge what a rule looks like.

use cssparser::{ParseError, Parser, Token};

use crate::diagnostics::Diagnostics;
use crate::html::LineIndex;

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

/// Checks one stylesheet of the package and records every problem.
pub fn check_css(file: &str, text: &str, diagnostics: &mut Diagnostics) {
    for finding in scan(text) {
        diagnostics.push(file, Some(finding.line), finding.code, finding.reason);
    }
}

/// Every problem in `text`, which is a stylesheet, a declaration list (a
/// `style` attribute) or a single value: the rules are the same for all three
/// because they look only at tokens.
pub(crate) fn scan(text: &str) -> Vec<Finding> {
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

    findings.extend(scan_tokens(text));
    findings
}

/// The token rules alone, for CSS values that are never inlined into a
/// `<style>` element (SVG presentation attributes such as `fill`).
pub(crate) fn scan_tokens(text: &str) -> Vec<Finding> {
    let mut parser = Parser::new(text);
    let mut walk = Walk {
        findings: Vec::new(),
        too_deep: false,
    };
    walk.block(&mut parser, 0);
    walk.findings
}

struct Walk {
    findings: Vec<Finding>,
    too_deep: bool,
}

impl Walk {
    fn push(&mut self, line: u32, code: &'static str, reason: impl Into<String>) {
        self.findings.push(Finding {
            line,
            code,
            reason: reason.into(),
        });
    }

    /// Checks the tokens of one block; `depth` is how many blocks enclose it.
    fn block(&mut self, parser: &mut Parser<'_>, depth: usize) {
        loop {
            // cssparser counts lines from 0.
            let line = parser.current_source_location().line.saturating_add(1);
            let token = match parser.next_including_whitespace_and_comments() {
                Ok(token) => token.clone(),
                Err(_) => return,
            };
            match &token {
                Token::AtKeyword(name) => self.at_rule(line, name),
                Token::UnquotedUrl(url) if !url.starts_with('#') => {
                    self.url(line, &format!("url({url})"));
                }
                Token::BadUrl(_) => self.url(line, "a malformed url()"),
                Token::Function(name) => {
                    let name = name.to_ascii_lowercase();
                    match name.as_str() {
                        // `url("…")` with a quoted argument: only a lone
                        // `#fragment` string may stay.
                        "url" => {
                            if !self.enter(parser, depth, |walk, nested| walk.url_argument(nested))
                            {
                                self.url(line, "url(…)");
                            }
                            continue;
                        }
                        // src() and image() take a URL string; neither has a
                        // use inside a package.
                        "src" | "image" => self.url(line, &format!("{name}(…)")),
                        "image-set" | "-webkit-image-set" => self.push(
                            line,
                            "CSS_IMAGE_SET",
                            format!("{name}() loads images by URL; use an SVG file from the package through <img src> or a gradient instead"),
                        ),
                        _ => {}
                    }
                    self.descend(parser, depth);
                }
                Token::ParenthesisBlock | Token::SquareBracketBlock | Token::CurlyBracketBlock => {
                    self.descend(parser, depth);
                }
                _ => {}
            }
        }
    }

    fn at_rule(&mut self, line: u32, name: &str) {
        let (code, reason) = match name.to_ascii_lowercase().as_str() {
            "import" => (
                "CSS_IMPORT",
                "@import loads another stylesheet by URL; link each stylesheet from index.html with <link rel=\"stylesheet\"> instead",
            ),
            "font-face" => (
                "CSS_FONT_FACE",
                "@font-face loads fonts by URL; use the system font stacks instead",
            ),
            "namespace" => (
                "CSS_NAMESPACE",
                "@namespace is not allowed in app stylesheets; remove it",
            ),
            _ => return,
        };
        self.push(line, code, reason);
    }

    fn url(&mut self, line: u32, what: &str) {
        self.push(
            line,
            "CSS_URL",
            format!("{what} would load a resource by URL; only url(#fragment) references to elements of the document are allowed"),
        );
    }

    /// Walks into the block that was just opened, unless that would pass the
    /// depth limit.
    fn descend(&mut self, parser: &mut Parser<'_>, depth: usize) {
        self.enter(parser, depth, |walk, nested| {
            walk.block(nested, depth + 1);
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
        inside: impl FnOnce(&mut Walk, &mut Parser<'_>) -> bool,
    ) -> bool {
        if depth + 1 > MAX_CSS_DEPTH {
            if !self.too_deep {
                self.too_deep = true;
                let line = parser.current_source_location().line.saturating_add(1);
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

    /// The argument of `url(` when it is a quoted string: true when it is
    /// exactly one `#fragment` string (whitespace and comments aside).
    fn url_argument(&mut self, parser: &mut Parser<'_>) -> bool {
        let mut fragment = false;
        let mut others = 0usize;
        while let Ok(token) = parser.next_including_whitespace_and_comments() {
            match token {
                Token::WhiteSpace(_) | Token::Comment(_) => {}
                Token::QuotedString(value) if value.starts_with('#') => fragment = true,
                _ => others += 1,
            }
        }
        fragment && others == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(text: &str) -> Vec<String> {
        let mut diagnostics = Diagnostics::new();
        check_css("styles.css", text, &mut diagnostics);
        diagnostics.iter().map(|d| d.code.clone()).collect()
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
        check("@import url(x.css);", &["CSS_IMPORT", "CSS_URL"]);
        check("@IMPORT \"x.css\";", &["CSS_IMPORT"]);
        check("@\\69mport \"x.css\";", &["CSS_IMPORT"]);
        check(
            "@font-face { font-family: x; src: url(//attacker.test/f.woff) }",
            &["CSS_FONT_FACE", "CSS_URL"],
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
        check("a { background: url(x.png) }", &["CSS_URL"]);
        check("a { background: URL(x.png) }", &["CSS_URL"]);
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
            &["CSS_URL", "CSS_URL"],
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
            &["CSS_IMAGE_SET", "CSS_URL"],
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
            "a {}\n\nb { background: url(x) }\n@import 'y';",
            &mut diagnostics,
        );
        let lines: Vec<_> = diagnostics
            .iter()
            .map(|d| (d.code.as_str(), d.line))
            .collect();
        assert_eq!(lines, [("CSS_URL", Some(3)), ("CSS_IMPORT", Some(4))]);
        assert!(diagnostics.iter().all(|d| d.file == "a.css"));
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
        let shallow = format!("{}url(x){}", "a{".repeat(10), "}".repeat(10));
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
        check_css("a.css", &"</style\n".repeat(50_000), &mut diagnostics);
        assert_eq!(diagnostics.len(), 50_000);
        let mut diagnostics = Diagnostics::new();
        check_css(
            "a.css",
            &"a { b: url(x) }\n".repeat(50_000),
            &mut diagnostics,
        );
        assert_eq!(diagnostics.len(), 50_000);
    }
}
