//! The rules for `.svg` files of a package. They are only ever used as images
//! (`<img src>` or SVG `<image href>`, inlined as `data:` URIs), but a browser
//! that opens one directly runs its scripts, and an XML parser with DTDs on can
//! be made to expand entities without end or read local files. So the file must
//! be plain SVG: no DTD, no script, no event handler, no foreign HTML content,
//! no reference outside the file, and CSS that passes [`crate::css`].
//!
//! This module must not rewrite the file or depend on how it will be displayed.

use roxmltree::{Document, Node, ParsingOptions};

use crate::css;
use crate::diagnostics::{Diagnostics, LineIndex};
use crate::html::{ANIMATION_ELEMENTS, forbidden_animation_target};
use crate::urls::{UrlKind, classify_url};

const SVG_NS: &str = "http://www.w3.org/2000/svg";
const XHTML_NS: &str = "http://www.w3.org/1999/xhtml";

/// Deepest element nesting that is accepted.
pub const MAX_SVG_DEPTH: usize = 256;

/// SVG attributes whose values are CSS that may hold `url()` (presentation
/// attributes) plus the animation values that can set them.
const CSS_VALUED_ATTRIBUTES: [&str; 14] = [
    "fill",
    "stroke",
    "filter",
    "mask",
    "clip-path",
    "marker",
    "marker-start",
    "marker-mid",
    "marker-end",
    "cursor",
    "to",
    "from",
    "by",
    "values",
];

/// Checks one `.svg` file of the package and records every problem.
pub fn check_svg(file: &str, text: &str, diagnostics: &mut Diagnostics) {
    let options = ParsingOptions {
        allow_dtd: false,
        ..ParsingOptions::default()
    };
    let document = match Document::parse_with_options(text, options) {
        Ok(document) => document,
        Err(roxmltree::Error::DtdDetected) => {
            push_dtd(file, text, text.find("<!DOCTYPE").unwrap_or(0), diagnostics);
            return;
        }
        Err(error) => {
            diagnostics.push(
                file,
                Some(error.pos().row),
                "SVG_PARSE",
                format!("the file is not well-formed XML ({error}); fix the markup"),
            );
            return;
        }
    };

    // roxmltree accepts a DOCTYPE without an internal subset; refuse every
    // DOCTYPE anyway, since it can only ever be a way to bring in a DTD.
    let lines = LineIndex::new(text);
    let root = document.root_element();
    if let Some(offset) = text[..root.range().start].find("<!DOCTYPE") {
        push_dtd(file, text, offset, diagnostics);
    }
    if !root.tag_name().name().eq_ignore_ascii_case("svg")
        || root.tag_name().namespace() != Some(SVG_NS)
    {
        diagnostics.push(
            file,
            Some(lines.line(root.range().start)),
            "SVG_ROOT",
            format!("the root element must be <svg xmlns=\"{SVG_NS}\">"),
        );
    }

    // An explicit stack instead of recursion: the nesting depth is the
    // author's to choose.
    let mut too_deep = false;
    let mut stack: Vec<(Node<'_, '_>, usize)> = vec![(document.root(), 0)];
    while let Some((node, depth)) = stack.pop() {
        if node.is_pi() {
            diagnostics.push(
                file,
                Some(lines.line(node.range().start)),
                "SVG_PROCESSING_INSTRUCTION",
                "processing instructions such as <?xml-stylesheet?> are not allowed; remove them",
            );
            continue;
        }
        if node.is_element() {
            if depth > MAX_SVG_DEPTH {
                if !too_deep {
                    too_deep = true;
                    diagnostics.push(
                        file,
                        Some(lines.line(node.range().start)),
                        "SVG_TOO_DEEP",
                        format!("elements nest more than {MAX_SVG_DEPTH} levels deep; flatten the drawing"),
                    );
                }
                continue;
            }
            check_element(file, &lines, node, diagnostics);
        }
        let children: Vec<_> = node.children().collect();
        for child in children.into_iter().rev() {
            stack.push((child, depth + usize::from(child.is_element())));
        }
    }
}

fn push_dtd(file: &str, text: &str, offset: usize, diagnostics: &mut Diagnostics) {
    diagnostics.push(
        file,
        Some(LineIndex::new(text).line(offset)),
        "SVG_DTD",
        "DOCTYPE and ENTITY declarations are not allowed in SVG files; delete the <!DOCTYPE …> block",
    );
}

fn check_element(file: &str, lines: &LineIndex, node: Node<'_, '_>, diagnostics: &mut Diagnostics) {
    let line = lines.line(node.range().start);
    let name = node.tag_name().name().to_ascii_lowercase();
    if node.tag_name().namespace() == Some(XHTML_NS) {
        diagnostics.push(
            file,
            Some(line),
            "SVG_HTML_CONTENT",
            format!("HTML elements (<{name}>) are not allowed inside SVG files; draw with SVG elements only"),
        );
    }
    match name.as_str() {
        "script" => diagnostics.push(
            file,
            Some(line),
            "SVG_SCRIPT",
            "<script> is not allowed in SVG files; app code belongs in the package's .js files",
        ),
        "foreignobject" => diagnostics.push(
            file,
            Some(line),
            "SVG_FOREIGN_OBJECT",
            "<foreignObject> is not allowed in SVG files; draw with SVG elements only",
        ),
        "style" => {
            // The browser applies the concatenated text of the element, so a
            // comment between two halves of `url(` must not hide it.
            let text: String = node
                .children()
                .filter(|child| child.is_text())
                .filter_map(|child| child.text())
                .collect();
            let base = node
                .children()
                .find(|child| child.is_text())
                .map_or(line, |child| lines.line(child.range().start));
            for finding in css::scan(&text) {
                diagnostics.push(
                    file,
                    Some(base.saturating_add(finding.line - 1)),
                    finding.code,
                    finding.reason,
                );
            }
        }
        _ => {}
    }
    if ANIMATION_ELEMENTS.contains(&name.as_str())
        && let Some((suffix, reason)) = node
            .attributes()
            .find(|attribute| attribute.name() == "attributeName")
            .and_then(|attribute| forbidden_animation_target(&name, attribute.value()))
    {
        diagnostics.push(file, Some(line), &format!("SVG_{suffix}"), reason);
    }

    for attribute in node.attributes() {
        let line = lines.line(attribute.range().start);
        let local = attribute.name().to_ascii_lowercase();
        if local.starts_with("on") {
            diagnostics.push(
                file,
                Some(line),
                "SVG_EVENT_HANDLER",
                format!("event handler attribute {local} is not allowed in SVG files; remove it"),
            );
        } else if local == "href" {
            match classify_url(attribute.value()) {
                UrlKind::Fragment => {}
                UrlKind::Script => diagnostics.push(
                    file,
                    Some(line),
                    "SVG_SCRIPT_URL",
                    "javascript: URLs are not allowed; use #fragment references only",
                ),
                _ => diagnostics.push(
                    file,
                    Some(line),
                    "SVG_EXTERNAL_REFERENCE",
                    format!(
                        "href=\"{}\" points outside this file; SVG files may only reference their own elements with #fragment",
                        attribute.value()
                    ),
                ),
            }
        } else if attribute.namespace().is_none() && local == "style" {
            for finding in css::scan(attribute.value()) {
                diagnostics.push(file, Some(line), finding.code, finding.reason);
            }
        } else if attribute.namespace().is_none() && CSS_VALUED_ATTRIBUTES.contains(&local.as_str())
        {
            for finding in css::scan_tokens(attribute.value()) {
                diagnostics.push(file, Some(line), finding.code, finding.reason);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(text: &str) -> Vec<String> {
        let mut diagnostics = Diagnostics::new();
        check_svg("icon.svg", text, &mut diagnostics);
        diagnostics.iter().map(|d| d.code.clone()).collect()
    }

    #[track_caller]
    fn check(text: &str, expected: &[&str]) {
        assert_eq!(codes(text), expected, "for {text:?}");
    }

    fn svg(inner: &str) -> String {
        format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" xmlns:xlink=\"http://www.w3.org/1999/xlink\" viewBox=\"0 0 10 10\">{inner}</svg>"
        )
    }

    #[test]
    fn plain_svg_is_allowed() {
        check(
            &format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!-- icon -->\n{}",
                svg(
                    "<defs><linearGradient id=\"g\"><stop offset=\"0\" stop-color=\"red\"/></linearGradient>\
                     <symbol id=\"s\"><path d=\"M0 0L10 10\"/></symbol></defs>\
                     <style>.a { fill: url(#g) } @media (prefers-color-scheme: dark) { .a { fill: white } }</style>\
                     <use href=\"#s\"/><use xlink:href=\"#s\"/>\
                     <rect class=\"a\" width=\"10\" height=\"10\" fill=\"url(#g)\" style=\"stroke: red\"/>\
                     <animate attributeName=\"opacity\" values=\"0;1\" dur=\"1s\"/>\
                     <text>a &lt; b &amp; c</text><![CDATA[ text ]]>"
                )
            ),
            &[],
        );
        // Editors' metadata in other namespaces stays allowed.
        check(
            &svg(
                "<metadata><rdf:RDF xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\"/></metadata>",
            ),
            &[],
        );
    }

    #[test]
    fn dtds_and_entities_are_refused() {
        check(
            "<?xml version=\"1.0\"?>\n<!DOCTYPE svg [<!ENTITY e SYSTEM \"file:///etc/passwd\">]>\n<svg xmlns=\"http://www.w3.org/2000/svg\">&e;</svg>",
            &["SVG_DTD"],
        );
        let laughs = "<?xml version=\"1.0\"?>\n<!DOCTYPE lolz [\n <!ENTITY lol \"lol\">\n \
            <!ENTITY lol2 \"&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;\">\n \
            <!ENTITY lol3 \"&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;\">\n]>\n\
            <svg xmlns=\"http://www.w3.org/2000/svg\">&lol3;</svg>";
        check(laughs, &["SVG_DTD"]);
        check(
            "<!DOCTYPE svg PUBLIC \"-//W3C//DTD SVG 1.1//EN\" \"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd\">\n<svg xmlns=\"http://www.w3.org/2000/svg\"/>",
            &["SVG_DTD"],
        );
        check(
            "<!DOCTYPE svg>\n<svg xmlns=\"http://www.w3.org/2000/svg\"/>",
            &["SVG_DTD"],
        );
        // An undeclared entity is simply not well-formed.
        check(&svg("&e;"), &["SVG_PARSE"]);
    }

    #[test]
    fn the_root_must_be_svg() {
        check(
            "<html xmlns=\"http://www.w3.org/1999/xhtml\"/>",
            &["SVG_ROOT", "SVG_HTML_CONTENT"],
        );
        check("<svg/>", &["SVG_ROOT"]);
        check("not xml", &["SVG_PARSE"]);
        check("", &["SVG_PARSE"]);
    }

    #[test]
    fn scripts_and_handlers_are_refused() {
        check(&svg("<script>alert(1)</script>"), &["SVG_SCRIPT"]);
        check(
            &svg("<script href=\"app.js\"/>"),
            &["SVG_SCRIPT", "SVG_EXTERNAL_REFERENCE"],
        );
        check(&svg("<SCRIPT>alert(1)</SCRIPT>"), &["SVG_SCRIPT"]);
        check(&svg("<rect onclick=\"alert(1)\"/>"), &["SVG_EVENT_HANDLER"]);
        check(
            &svg("<animate onbegin=\"alert(1)\" attributeName=\"x\"/>"),
            &["SVG_EVENT_HANDLER"],
        );
        check(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" onload=\"alert(1)\"/>",
            &["SVG_EVENT_HANDLER"],
        );
        check(
            &svg(
                "<foreignObject><div xmlns=\"http://www.w3.org/1999/xhtml\">x</div></foreignObject>",
            ),
            &["SVG_FOREIGN_OBJECT", "SVG_HTML_CONTENT"],
        );
        check(
            &svg("<h:iframe xmlns:h=\"http://www.w3.org/1999/xhtml\" src=\"//attacker.test\"/>"),
            &["SVG_HTML_CONTENT"],
        );
        check(
            &format!(
                "<?xml-stylesheet href=\"//attacker.test/a.css\"?>{}",
                svg("")
            ),
            &["SVG_PROCESSING_INSTRUCTION"],
        );
    }

    #[test]
    fn references_must_be_fragments() {
        check(
            &svg("<a href=\"javascript:alert(1)\"><rect/></a>"),
            &["SVG_SCRIPT_URL"],
        );
        check(
            &svg("<a xlink:href=\" JaVa&#x09;ScRiPt:alert(1)\"><rect/></a>"),
            &["SVG_SCRIPT_URL"],
        );
        check(
            &svg("<use href=\"//attacker.test/s.svg#x\"/>"),
            &["SVG_EXTERNAL_REFERENCE"],
        );
        check(
            &svg("<image href=\"https://attacker.test/x.png\"/>"),
            &["SVG_EXTERNAL_REFERENCE"],
        );
        check(
            &svg("<feImage xlink:href=\"other.svg\"/>"),
            &["SVG_EXTERNAL_REFERENCE"],
        );
        check(
            &svg("<image href=\"data:image/png;base64,AA==\"/>"),
            &["SVG_EXTERNAL_REFERENCE"],
        );
        check(
            &svg("<set attributeName=\"href\" to=\"javascript:alert(1)\"/>"),
            &["SVG_ANIMATE_HREF"],
        );
        check(
            &svg("<animate attributeName=\"xlink:href\" values=\"#a;#b\"/>"),
            &["SVG_ANIMATE_HREF"],
        );
        check(
            &svg("<set attributeName=\"onload\" to=\"alert(1)\"/>"),
            &["SVG_ANIMATE_EVENT_HANDLER"],
        );
    }

    #[test]
    fn css_inside_svg_is_checked() {
        check(&svg("<style>@import 'x.css';</style>"), &["CSS_IMPORT"]);
        check(
            &svg("<style><![CDATA[ a { background: url(//attacker.test) } ]]></style>"),
            &["CSS_URL"],
        );
        check(
            &svg("<style>a { background: u<!-- -->rl(//attacker.test) }</style>"),
            &["CSS_URL"],
        );
        check(
            &svg("<rect style=\"fill: url(//attacker.test/x)\"/>"),
            &["CSS_URL"],
        );
        check(
            &svg("<rect fill=\"url(https://attacker.test/p.svg#g)\"/>"),
            &["CSS_URL"],
        );
        check(&svg("<rect filter=\"url(//x#f)\"/>"), &["CSS_URL"]);
        check(
            &svg("<set attributeName=\"fill\" to=\"url(//attacker.test/#g)\"/>"),
            &["CSS_URL"],
        );
        check(
            &svg("<rect style=\"background: image-set('a.png' 1x)\"/>"),
            &["CSS_IMAGE_SET"],
        );
    }

    #[test]
    fn lines_point_at_the_problem() {
        let mut diagnostics = Diagnostics::new();
        check_svg(
            "a.svg",
            "<svg xmlns=\"http://www.w3.org/2000/svg\">\n<rect/>\n<rect\n  onclick=\"x\"/>\n<style>\na{}\nb{background:url(x)}</style></svg>",
            &mut diagnostics,
        );
        let lines: Vec<_> = diagnostics
            .iter()
            .map(|d| (d.code.as_str(), d.line))
            .collect();
        assert_eq!(
            lines,
            [("SVG_EVENT_HANDLER", Some(4)), ("CSS_URL", Some(7))]
        );
    }

    #[test]
    fn deep_nesting_is_refused_without_overflow() {
        let deep = svg(&format!(
            "{}{}",
            "<g>".repeat(100_000),
            "</g>".repeat(100_000)
        ));
        check(&deep, &["SVG_TOO_DEEP"]);
        let fine = svg(&format!("{}{}", "<g>".repeat(200), "</g>".repeat(200)));
        check(&fine, &[]);
        check(&svg(&"&#x".repeat(100_000)), &["SVG_PARSE"]);
        let flat = svg(&"<rect width=\"1\" onclick=\"x\"/>\n".repeat(50_000));
        let mut diagnostics = Diagnostics::new();
        check_svg("flat.svg", &flat, &mut diagnostics);
        assert_eq!(diagnostics.len(), 50_000);
    }
}
