//! The rules for a package's `index.html` and what the assembler needs from
//! it. The document is parsed with a spec-compliant HTML5 parser (html5ever
//! through scraper, scripting enabled) and every node is checked, template
//! contents and SVG/MathML content included, so the rules judge the tree a
//! browser builds and not the text. The assembled app gets its body from
//! [`HtmlDocument::render_body`], which re-serializes that same tree, so
//! markup that only a sloppier parser would read differently never reaches a
//! browser.
//!
//! The rules keep app markup static: no inline or module scripts, no event
//! handlers, no inline styles, no nested browsing contexts, no navigation or
//! form destinations, and no URL that is not a `#fragment` or a file of the
//! package. This module must not execute, fetch or rewrite anything beyond
//! what `render_body` documents.
//!
//! A small, linear pre-scan of the source (module `prescan`) runs first: it
//! gives the line numbers (scraper's tree sink does not keep html5ever's, and
//! html5ever is not a direct dependency of this crate), and it refuses input
//! on which html5ever would take quadratic time (deep nesting in its tree
//! builder, tags with huge attribute lists in its tokenizer) before the
//! parser sees it.

use std::collections::BTreeSet;

use scraper::{ElementRef, Html, Node};

use crate::css;
use crate::diagnostics::{Diagnostics, LineIndex};
use crate::urls::{UrlKind, classify_url, normalize_url, package_path};

/// Deepest element nesting that is accepted (the `<html>` element is depth 1).
pub const MAX_HTML_DEPTH: usize = 256;

const HTML_NS: &str = "http://www.w3.org/1999/xhtml";
const SVG_NS: &str = "http://www.w3.org/2000/svg";
const MATHML_NS: &str = "http://www.w3.org/1998/Math/MathML";
const XLINK_NS: &str = "http://www.w3.org/1999/xlink";
const XML_NS: &str = "http://www.w3.org/XML/1998/namespace";
const XMLNS_NS: &str = "http://www.w3.org/2000/xmlns/";

/// Attributes that hold a URL on some element of HTML, SVG or MathML (or did
/// in an older version of HTML that browsers still honour).
const URL_ATTRIBUTES: [&str; 20] = [
    "href",
    "xlink:href",
    "src",
    "poster",
    "action",
    "formaction",
    "data",
    "background",
    "cite",
    "longdesc",
    "manifest",
    "codebase",
    "ping",
    "lowsrc",
    "dynsrc",
    "icon",
    "profile",
    "archive",
    "classid",
    "usemap",
];

/// Elements that create a nested browsing context (or plugin).
const NESTED_CONTEXTS: [&str; 8] = [
    "iframe",
    "frame",
    "frameset",
    "object",
    "embed",
    "applet",
    "fencedframe",
    "portal",
];

/// Obsolete raw-text elements: their text is written unescaped, and
/// `<plaintext>` would swallow everything the assembler appends after the body.
const RAW_TEXT_ELEMENTS: [&str; 4] = ["xmp", "plaintext", "noembed", "noframes"];

/// SVG animation elements: they can set any attribute, `href` included.
pub(crate) const ANIMATION_ELEMENTS: [&str; 5] = [
    "set",
    "animate",
    "animatemotion",
    "animatetransform",
    "animatecolor",
];

/// What an animation element's `attributeName` must never name, for markup
/// and `.svg` files alike: a link (`href`, `xlink:href`; links may not change
/// at run time) or an event handler (`onload`, `xlink:onclick`, …; it would
/// set a handler the markup rules refuse). Returns the diagnostic's suffix
/// and reason, or `None` when the target is allowed.
pub(crate) fn forbidden_animation_target(
    element: &str,
    target: &str,
) -> Option<(&'static str, String)> {
    let target = target.trim().to_ascii_lowercase();
    let local = target.rsplit(':').next().unwrap_or_default();
    if local == "href" {
        Some((
            "ANIMATE_HREF",
            format!("<{element}> must not animate {target}; links may not change at run time"),
        ))
    } else if local.starts_with("on") {
        Some((
            "ANIMATE_EVENT_HANDLER",
            format!(
                "<{element}> must not animate {target}; event handler attributes are not allowed in any namespace"
            ),
        ))
    } else {
        None
    }
}

/// SVG presentation attributes whose CSS values may hold `url()`.
const CSS_VALUED_ATTRIBUTES: [&str; 10] = [
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
];

/// Elements whose `name` becomes a property of `document` (named access, which
/// overrides the built-in properties of `document`).
const DOCUMENT_NAMED_ELEMENTS: [&str; 8] = [
    "img", "form", "embed", "object", "iframe", "frame", "frameset", "applet",
];

/// What a reference of the document loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReferenceKind {
    /// `<link rel="stylesheet" href>`: a `.css` file, inlined into `<style>`.
    Stylesheet,
    /// `<script src>`: a `.js` file, inlined into `<script>`.
    Script,
    /// `img[src]`, each URL of `img[srcset]` and `source[srcset]`,
    /// `video[poster]`, SVG `<image href|xlink:href>`: an image of the package
    /// (`.svg .png .jpg .jpeg .webp .gif`), inlined as a `data:` URI.
    Asset,
}

/// One reference from the document to a file of the package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    pub kind: ReferenceKind,
    /// Normalized package-relative POSIX path of an existing package file.
    pub path: String,
    /// 1-based line of the referencing attribute.
    pub line: u32,
}

/// A parsed `index.html` and what was learned from it.
#[derive(Debug, Clone)]
pub struct HtmlDocument {
    html: Html,
    /// Folder of the document inside the package ("" at the root), which
    /// relative references are resolved against.
    base: String,
    references: Vec<Reference>,
    lang: Option<String>,
    title: Option<String>,
}

/// Parses `text` (the package's `index.html` at package path `file`), checks
/// every node against the rules and records a diagnostic for every violation.
/// `files` is the set of package-relative paths that exist in the package.
///
/// Returns `None` only when the document cannot be used at all (it nests too
/// deeply to be parsed in bounded time); otherwise returns the document even
/// when diagnostics were recorded.
pub fn analyze_html(
    file: &str,
    text: &str,
    files: &BTreeSet<String>,
    diagnostics: &mut Diagnostics,
) -> Option<HtmlDocument> {
    let scanned = prescan::scan(text);
    let lines = LineIndex::new(text);
    for finding in &scanned.findings {
        diagnostics.push(
            file,
            Some(lines.line(finding.offset)),
            finding.code,
            finding.reason,
        );
    }
    // The parser drops a <frame> outside a <frameset> without a trace, so the
    // tree alone would let it pass unnoticed; the source still shows it. (A
    // frame that is in the tree gets the same diagnostic again, which the
    // sorted output removes as an exact duplicate.)
    for tag in scanned.tags.iter().filter(|tag| tag.name == "frame") {
        diagnostics.push(
            file,
            Some(lines.line(tag.offset)),
            "HTML_NESTED_CONTEXT",
            nested_context_reason("frame"),
        );
    }
    // html5ever does work proportional to the depth of its stack of open
    // elements for many tokens (and to the attributes before it for every
    // attribute), so a deeply nested or crowded document would take minutes.
    // Estimate first and refuse before parsing.
    if let Err(refusal) = prescan::check_limits(&scanned) {
        diagnostics.push(
            file,
            Some(lines.line(refusal.offset)),
            refusal.code,
            refusal.reason,
        );
        return None;
    }

    let html = Html::parse_document(text);
    let base = file
        .rsplit_once('/')
        .map_or(String::new(), |(folder, _)| format!("{folder}/"));
    let mut checker = Checker {
        file,
        lines: &lines,
        files,
        base: &base,
        tags: &scanned.tags,
        cursor: 0,
        last_line: 1,
        diagnostics,
        references: Vec::new(),
        too_deep: false,
    };

    // QuirksMode is not nameable without html5ever as a direct dependency; a
    // new document is always in no-quirks mode, so compare with that.
    if html.quirks_mode != Html::new_document().quirks_mode {
        checker.push(
            Some(1),
            "HTML_QUIRKS_MODE",
            "index.html must start with <!DOCTYPE html> (the document is otherwise parsed in quirks mode, and the assembled app is not)",
        );
    }
    checker.walk(&html);
    let too_deep = checker.too_deep;
    let references = checker.references;
    if !too_deep && !serialization_is_stable(&html) {
        diagnostics.push(
            file,
            None,
            "HTML_UNSTABLE_MARKUP",
            "the markup reads differently once serialized and parsed again (for example nested forms or misnested tables); write well-formed, properly nested HTML",
        );
    }

    let root = html.root_element();
    let lang = root.value().attr("lang").map(str::to_owned);
    let title = document_title(&html);
    Some(HtmlDocument {
        html,
        base,
        references,
        lang,
        title,
    })
}

impl HtmlDocument {
    /// References to package files in document order: `<link rel=stylesheet
    /// href>` (Stylesheet, a `.css` file), `<script src>` (Script, a `.js`
    /// file) and image references (Asset): `img[src]`, every URL of
    /// `img[srcset]` and `source[srcset]`, SVG `<image href|xlink:href>`,
    /// `video[poster]`.
    pub fn references(&self) -> &[Reference] {
        &self.references
    }

    /// The `lang` attribute of `<html>`, if any.
    pub fn lang(&self) -> Option<&str> {
        self.lang.as_deref()
    }

    /// The text of `<title>` (whitespace collapsed as `document.title` does),
    /// if there is a title element.
    pub fn title(&self) -> Option<String> {
        self.title.clone()
    }

    /// Serializes the children of `<body>` for the assembled document, with
    /// the HTML fragment serialization algorithm (the same output as
    /// html5ever's serializer, see `serialize` for why it is not called):
    /// every `<link rel=stylesheet>` and `<script src>` element is removed
    /// (the assembler inlines them elsewhere), every Asset reference
    /// attribute value is replaced by `inline(path)`, and so is every package
    /// URL of a `srcset` (its descriptors kept). Only called on
    /// documents without diagnostics. Deterministic output: the same
    /// document always gives the same bytes.
    pub fn render_body(&self, inline: &dyn Fn(&str) -> String) -> String {
        let mut html = self.html.clone();
        let Some(body) = html
            .root_element()
            .children()
            .filter_map(ElementRef::wrap)
            .find(|child| child.value().name() == "body" && &*child.value().name.ns == HTML_NS)
            .map(|body| body.id())
        else {
            return String::new();
        };

        let mut removed = Vec::new();
        let mut replaced = Vec::new();
        for node in html
            .tree
            .get(body)
            .into_iter()
            .flat_map(|body| body.descendants())
        {
            let Node::Element(element) = node.value() else {
                continue;
            };
            let name = element.name().to_ascii_lowercase();
            let namespace: &str = &element.name.ns;
            if namespace == HTML_NS
                && ((name == "script" && element.attr("src").is_some())
                    || (name == "link" && is_stylesheet_link(element.attr("rel"))))
            {
                removed.push(node.id());
                continue;
            }
            for (index, (qualified, value)) in element.attrs.iter().enumerate() {
                let attribute = attribute_name(&qualified.ns, &qualified.local);
                if is_srcset(namespace, &name, &attribute) {
                    if let Ok(candidates) = parse_srcset(value) {
                        replaced.push((
                            node.id(),
                            index,
                            render_srcset(&self.base, &candidates, inline),
                        ));
                    }
                    continue;
                }
                if reference_kind(namespace, &name, &attribute) == Some(ReferenceKind::Asset)
                    && let Ok(path) = package_path(&self.base, &normalize_url(value))
                {
                    replaced.push((node.id(), index, inline(&path)));
                }
            }
        }
        for (id, index, value) in replaced {
            if let Some(mut node) = html.tree.get_mut(id)
                && let Node::Element(element) = node.value()
            {
                element.attrs[index].1 = value.as_str().into();
            }
        }
        for id in removed {
            if let Some(mut node) = html.tree.get_mut(id) {
                node.detach();
            }
        }
        html.tree
            .get(body)
            .and_then(ElementRef::wrap)
            .map(|body| serialize(body, false))
            .unwrap_or_default()
    }
}

/// The kind of package reference an attribute makes on an element, if that
/// attribute may name a package file at all (every other URL attribute may
/// only hold a `#fragment`).
fn reference_kind(namespace: &str, element: &str, attribute: &str) -> Option<ReferenceKind> {
    match (namespace, element, attribute) {
        (HTML_NS, "link", "href") => Some(ReferenceKind::Stylesheet),
        (HTML_NS, "script", "src") => Some(ReferenceKind::Script),
        (HTML_NS, "img", "src") | (HTML_NS, "video", "poster") => Some(ReferenceKind::Asset),
        (SVG_NS, "image", "href" | "xlink:href") => Some(ReferenceKind::Asset),
        _ => None,
    }
}

/// Whether the attribute is a `srcset` whose URLs may name package images:
/// on HTML `<img>` and `<source>` (inside `<picture>`).
fn is_srcset(namespace: &str, element: &str, attribute: &str) -> bool {
    namespace == HTML_NS && matches!(element, "img" | "source") && attribute == "srcset"
}

/// One image candidate of a `srcset`: its URL and its descriptors (`2x`,
/// `480w`), as the browser reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub url: String,
    pub descriptors: Vec<String>,
}

fn is_html_whitespace(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0C')
}

/// Parses a `srcset` with the WHATWG "parse a srcset attribute" algorithm
/// (so the URLs are the ones a browser would fetch: a URL is a run without
/// whitespace, trailing commas removed), refusing what the browser would
/// drop: a descriptor that is not one width (`480w`), one density (`2x`) or
/// a height beside a width.
pub(crate) fn parse_srcset(value: &str) -> Result<Vec<Candidate>, String> {
    let chars: Vec<char> = value.chars().collect();
    let mut at = 0;
    let mut candidates = Vec::new();
    loop {
        while at < chars.len() && (is_html_whitespace(chars[at]) || chars[at] == ',') {
            at += 1;
        }
        if at >= chars.len() {
            return Ok(candidates);
        }
        let start = at;
        while at < chars.len() && !is_html_whitespace(chars[at]) {
            at += 1;
        }
        let mut url: String = chars[start..at].iter().collect();
        let mut descriptors = Vec::new();
        if url.ends_with(',') {
            url = url.trim_end_matches(',').to_owned();
        } else {
            let mut current = String::new();
            let mut in_parens = false;
            loop {
                let next = chars.get(at).copied();
                at += 1;
                match (in_parens, next) {
                    (_, None) => break,
                    (false, Some(c)) if is_html_whitespace(c) => {
                        if !current.is_empty() {
                            descriptors.push(std::mem::take(&mut current));
                        }
                    }
                    (false, Some(',')) => break,
                    (false, Some('(')) => {
                        current.push('(');
                        in_parens = true;
                    }
                    (true, Some(')')) => {
                        current.push(')');
                        in_parens = false;
                    }
                    (_, Some(c)) => current.push(c),
                }
            }
            if !current.is_empty() {
                descriptors.push(current);
            }
        }
        check_descriptors(&url, &descriptors)?;
        candidates.push(Candidate { url, descriptors });
    }
}

/// The descriptor rules of "parse a srcset attribute": at most one width
/// (`Nw`, N > 0) or one density (`Nx`, N ≥ 0) but not both, and a height
/// (`Nh`, N > 0) only beside a width.
fn check_descriptors(url: &str, descriptors: &[String]) -> Result<(), String> {
    let integer = |digits: &str| {
        !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && digits.bytes().any(|b| b != b'0')
    };
    let number = |text: &str| {
        let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
        (!whole.is_empty() || !fraction.is_empty())
            && whole.bytes().all(|b| b.is_ascii_digit())
            && fraction.bytes().all(|b| b.is_ascii_digit())
            && (!text.contains('.') || !fraction.is_empty())
    };
    let (mut width, mut density, mut height) = (false, false, false);
    for descriptor in descriptors {
        let (value, unit) = descriptor
            .split_at(descriptor.len() - descriptor.chars().last().map_or(0, char::len_utf8));
        let (seen, valid) = match unit {
            "w" => (&mut width, integer(value)),
            "x" => (&mut density, number(value)),
            "h" => (&mut height, integer(value)),
            _ => (&mut width, false),
        };
        if !valid || *seen {
            return Err(format!(
                "srcset candidate {url} has the descriptor {descriptor}; use one width (480w) or one density (2x)"
            ));
        }
        *seen = true;
    }
    if (width && density) || (height && !width) {
        return Err(format!(
            "srcset candidate {url} mixes descriptors; use one width (480w) or one density (2x)"
        ));
    }
    Ok(())
}

/// The `srcset` with each package URL replaced by `inline(path)`.
fn render_srcset(base: &str, candidates: &[Candidate], inline: &dyn Fn(&str) -> String) -> String {
    candidates
        .iter()
        .map(|candidate| {
            let url = match classify_url(&candidate.url) {
                UrlKind::Relative => package_path(base, &normalize_url(&candidate.url))
                    .map_or_else(|_| candidate.url.clone(), |path| inline(&path)),
                _ => candidate.url.clone(),
            };
            std::iter::once(url)
                .chain(candidate.descriptors.iter().cloned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The attribute's name as written in markup (`xlink:href`, `xml:lang`), in
/// lowercase.
fn attribute_name(namespace: &str, local: &str) -> String {
    let prefix = match namespace {
        XLINK_NS => "xlink:",
        XML_NS => "xml:",
        XMLNS_NS if local != "xmlns" => "xmlns:",
        _ => "",
    };
    format!("{prefix}{}", local.to_ascii_lowercase())
}

fn nested_context_reason(name: &str) -> String {
    format!("<{name}> would embed another document or plugin; apps cannot nest browsing contexts")
}

fn is_stylesheet_link(rel: Option<&str>) -> bool {
    let tokens: Vec<String> = rel
        .unwrap_or_default()
        .split_ascii_whitespace()
        .map(str::to_ascii_lowercase)
        .collect();
    tokens == ["stylesheet"]
}

fn is_ascii_whitespace(text: &str) -> bool {
    text.bytes()
        .all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | b'\x0C'))
}

/// `document.title`: the first HTML `<title>` in tree order (template contents
/// are another document), its text with ASCII whitespace collapsed.
fn document_title(html: &Html) -> Option<String> {
    let mut stack = vec![html.tree.root()];
    while let Some(node) = stack.pop() {
        match node.value() {
            Node::Element(element) if element.name() == "title" && &*element.name.ns == HTML_NS => {
                let text: String = node
                    .children()
                    .filter_map(|child| child.value().as_text().map(|text| String::from(&**text)))
                    .collect();
                return Some(text.split_ascii_whitespace().collect::<Vec<_>>().join(" "));
            }
            Node::Fragment => continue,
            _ => {}
        }
        let children: Vec<_> = node.children().collect();
        stack.extend(children.into_iter().rev());
    }
    None
}

/// Serializes `element` (with its start and end tag when `include_self`)
/// following the WHATWG algorithm for serializing HTML fragments, with the
/// same output as html5ever's serializer (attributes in the tree's order,
/// `<`, `>`, `&`, U+00A0 and, in attributes, `"` escaped) plus the spec's
/// extra newline after `<pre>`, `<textarea>` and `<listing>` whose text starts
/// with one (the parser drops the first newline there).
///
/// html5ever's serializer is not used itself because its escaping rescans the
/// rest of a text or attribute value for every `&` it escapes, which is
/// quadratic: 100k `&#x` in a text took minutes. This one is linear and walks
/// iteratively.
fn serialize(element: ElementRef<'_>, include_self: bool) -> String {
    let mut out = String::new();
    let mut stack = Vec::new();
    if include_self {
        stack.push((*element, false));
    } else {
        let children: Vec<_> = element.children().collect();
        stack.extend(children.into_iter().rev().map(|child| (child, false)));
    }
    while let Some((node, close)) = stack.pop() {
        match node.value() {
            Node::Element(element) => {
                let name: &str = &element.name.local;
                let html = &*element.name.ns == HTML_NS;
                if close {
                    out.push_str("</");
                    out.push_str(name);
                    out.push('>');
                    continue;
                }
                out.push('<');
                out.push_str(name);
                for (qualified, value) in &element.attrs {
                    out.push(' ');
                    let local: &str = &qualified.local;
                    match &*qualified.ns {
                        "" => {}
                        XML_NS => out.push_str("xml:"),
                        XMLNS_NS if local != "xmlns" => out.push_str("xmlns:"),
                        XLINK_NS => out.push_str("xlink:"),
                        _ => {
                            if let Some(prefix) = &qualified.prefix {
                                out.push_str(prefix);
                                out.push(':');
                            }
                        }
                    }
                    out.push_str(local);
                    out.push_str("=\"");
                    escape(value, true, &mut out);
                    out.push('"');
                }
                out.push('>');
                if html && VOID_ELEMENTS.contains(&name) {
                    continue;
                }
                stack.push((node, true));
                // A template's children are its contents (a fragment).
                let parent = if html && name == "template" {
                    node.first_child()
                        .filter(|child| matches!(child.value(), Node::Fragment))
                        .unwrap_or(node)
                } else {
                    node
                };
                let children: Vec<_> = parent.children().collect();
                if html
                    && matches!(name, "pre" | "textarea" | "listing")
                    && children
                        .first()
                        .and_then(|child| child.value().as_text())
                        .is_some_and(|text| text.starts_with('\n'))
                {
                    out.push('\n');
                }
                stack.extend(children.into_iter().rev().map(|child| (child, false)));
            }
            Node::Text(text) => {
                let raw = node
                    .parent()
                    .and_then(|parent| {
                        parent
                            .value()
                            .as_element()
                            .map(|element| (element.name(), &*element.name.ns == HTML_NS))
                    })
                    .is_some_and(|(name, html)| html && RAW_TEXT_PARENTS.contains(&name));
                if raw {
                    out.push_str(text);
                } else {
                    escape(text, false, &mut out);
                }
            }
            Node::Comment(comment) => {
                out.push_str("<!--");
                out.push_str(comment);
                out.push_str("-->");
            }
            Node::ProcessingInstruction(instruction) => {
                out.push_str("<?");
                out.push_str(&instruction.target);
                out.push(' ');
                out.push_str(&instruction.data);
                out.push('>');
            }
            Node::Doctype(doctype) => {
                out.push_str("<!DOCTYPE ");
                out.push_str(doctype.name());
                out.push('>');
            }
            Node::Document | Node::Fragment => {
                let children: Vec<_> = node.children().collect();
                stack.extend(children.into_iter().rev().map(|child| (child, false)));
            }
        }
    }
    out
}

/// Elements that have no end tag and no children in HTML.
const VOID_ELEMENTS: [&str; 18] = [
    "area", "base", "basefont", "bgsound", "br", "col", "embed", "frame", "hr", "img", "input",
    "keygen", "link", "meta", "param", "source", "track", "wbr",
];

/// Elements whose text is written as it is (the browser's parser reads it
/// raw; `noscript` because apps run with scripting enabled).
const RAW_TEXT_PARENTS: [&str; 8] = [
    "style",
    "script",
    "xmp",
    "iframe",
    "noembed",
    "noframes",
    "plaintext",
    "noscript",
];

fn escape(text: &str, attribute: bool, out: &mut String) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '\u{A0}' => out.push_str("&nbsp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if attribute => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
}

/// True when serializing the parsed document and parsing the result again
/// gives the same tree: the assembled app is parsed from our serialization,
/// so a difference here is exactly a mutation-XSS style surprise.
fn serialization_is_stable(html: &Html) -> bool {
    let first = serialize(html.root_element(), true);
    let again = Html::parse_document(&format!("<!DOCTYPE html>{first}"));
    serialize(again.root_element(), true) == first
}

/// The attribute being checked and where it sits.
#[derive(Debug, Clone, Copy)]
struct Target<'a> {
    namespace: &'a str,
    element: &'a str,
    attribute: &'a str,
    /// False on elements whose URL attributes may not name package files
    /// even where the element usually can (a `<link>` that is no stylesheet).
    references_allowed: bool,
}

/// Where the walk is in the tree.
#[derive(Debug, Clone, Copy, Default)]
struct Context {
    /// Element depth of the parent (the `<html>` element is depth 1).
    depth: usize,
    /// Inside the contents of a `<template>`.
    in_template: bool,
    /// The parent is the document's `<head>`.
    in_head: bool,
}

struct Checker<'a> {
    file: &'a str,
    lines: &'a LineIndex,
    files: &'a BTreeSet<String>,
    base: &'a str,
    tags: &'a [prescan::Tag],
    /// Next source tag that elements are matched against for line numbers.
    cursor: usize,
    last_line: u32,
    diagnostics: &'a mut Diagnostics,
    references: Vec<Reference>,
    too_deep: bool,
}

/// How far ahead of the cursor an element's source tag is looked for; the
/// parser's implied elements (`tbody`, reopened formatting elements) have no
/// tag, and must not pull the cursor past the tags that follow.
const TAG_LOOKAHEAD: usize = 32;

impl Checker<'_> {
    fn push(&mut self, line: Option<u32>, code: &str, reason: impl Into<String>) {
        self.diagnostics.push(self.file, line, code, reason);
    }

    /// The source tag of the next element in document order, if it has one.
    fn source_tag(&mut self, name: &str) -> Option<usize> {
        let end = (self.cursor + TAG_LOOKAHEAD).min(self.tags.len());
        let found = (self.cursor..end).find(|&index| self.tags[index].name == name)?;
        self.cursor = found + 1;
        self.last_line = self.lines.line(self.tags[found].offset);
        Some(found)
    }

    /// Walks every node iteratively (an explicit stack, so the depth of the
    /// tree never reaches the call stack), template contents included.
    fn walk(&mut self, html: &Html) {
        let mut stack = vec![(html.tree.root(), Context::default())];
        while let Some((node, context)) = stack.pop() {
            let child_context = match node.value() {
                Node::Element(element) => {
                    let depth = context.depth + 1;
                    let name = element.name().to_ascii_lowercase();
                    let tag = self.source_tag(&name);
                    if depth > MAX_HTML_DEPTH {
                        if !self.too_deep {
                            self.too_deep = true;
                            let line = Some(self.last_line);
                            self.push(
                                line,
                                "HTML_TOO_DEEP",
                                format!("elements nest more than {MAX_HTML_DEPTH} levels deep; flatten the markup"),
                            );
                        }
                        continue;
                    }
                    let element_ref = ElementRef::wrap(node);
                    if let Some(element_ref) = element_ref {
                        self.check_element(element_ref, &name, tag, context);
                    }
                    let is_head = name == "head" && &*element.name.ns == HTML_NS;
                    Context {
                        depth,
                        in_template: context.in_template,
                        in_head: is_head,
                    }
                }
                // The contents of a <template>: inert, but cloned into the
                // document by app code, so checked like everything else.
                Node::Fragment => Context {
                    in_template: true,
                    in_head: false,
                    ..context
                },
                Node::Document => context,
                _ => continue,
            };
            let children: Vec<_> = node.children().collect();
            for child in children.into_iter().rev() {
                stack.push((child, child_context));
            }
        }
    }

    fn tag_line(&self, tag: Option<usize>) -> u32 {
        tag.map_or(self.last_line, |index| {
            self.lines.line(self.tags[index].offset)
        })
    }

    fn attribute_line(&self, tag: Option<usize>, attribute: &str) -> u32 {
        tag.and_then(|index| {
            self.tags[index]
                .attributes
                .iter()
                .find(|(name, _)| name == attribute)
                .map(|(_, offset)| self.lines.line(*offset))
        })
        .unwrap_or_else(|| self.tag_line(tag))
    }

    fn check_element(
        &mut self,
        element_ref: ElementRef<'_>,
        name: &str,
        tag: Option<usize>,
        context: Context,
    ) {
        let element = element_ref.value();
        let namespace: &str = &element.name.ns;
        let html = namespace == HTML_NS;
        let line = Some(self.tag_line(tag));
        let attr = |wanted: &str| {
            element
                .attrs
                .iter()
                .find(|(qualified, _)| attribute_name(&qualified.ns, &qualified.local) == wanted)
                .map(|(_, value)| &**value)
        };

        match name {
            "script" if html => {
                let content: String = element_ref.text().collect();
                if attr("src").is_none() || !is_ascii_whitespace(&content) {
                    self.push(
                        line,
                        "HTML_INLINE_SCRIPT",
                        "inline scripts are not allowed; move the code into a .js file and load it with <script src=\"app.js\"></script>",
                    );
                }
                if let Some(kind) = attr("type")
                    && !kind.trim_matches(|c: char| c.is_ascii_whitespace()).eq_ignore_ascii_case("text/javascript")
                {
                    self.push(
                        line,
                        "HTML_SCRIPT_TYPE",
                        format!("<script type=\"{kind}\"> is not allowed (module scripts could import code); remove the type attribute"),
                    );
                }
                if context.in_template {
                    self.push(
                        line,
                        "HTML_INERT_RESOURCE",
                        "<script> inside <template> would run once inlined; load scripts outside templates",
                    );
                }
            }
            "script" => self.push(
                line,
                "HTML_FOREIGN_SCRIPT",
                "<script> inside <svg> or <math> is not allowed; load app code with <script src> in the HTML document",
            ),
            "style" => self.push(
                line,
                "HTML_STYLE_ELEMENT",
                "<style> elements are not allowed; put the CSS in a .css file and load it with <link rel=\"stylesheet\">",
            ),
            "noscript" => self.push(
                line,
                "HTML_NOSCRIPT",
                "<noscript> is not allowed (parsers disagree on its content); remove it",
            ),
            "base" => self.push(
                line,
                "HTML_BASE",
                "<base> is not allowed; it would change where every URL of the document points",
            ),
            _ if NESTED_CONTEXTS.contains(&name) => {
                self.push(line, "HTML_NESTED_CONTEXT", nested_context_reason(name));
            }
            _ if RAW_TEXT_ELEMENTS.contains(&name) => self.push(
                line,
                "HTML_RAW_TEXT_ELEMENT",
                format!("<{name}> is obsolete and its text is not escaped when the app is assembled; use <pre> or ordinary elements"),
            ),
            "meta" if html => {
                let charset_only = attr("charset").is_some()
                    && attr("name").is_none()
                    && attr("http-equiv").is_none()
                    && attr("content").is_none();
                let viewport = attr("name").is_some_and(|value| value.trim().eq_ignore_ascii_case("viewport"))
                    && attr("http-equiv").is_none()
                    && attr("charset").is_none();
                if !charset_only && !viewport {
                    self.push(
                        line,
                        "HTML_META",
                        "only <meta charset> and <meta name=\"viewport\"> are allowed; remove this <meta> (http-equiv would change the app's policy or navigate)",
                    );
                }
            }
            "link" if html => {
                if !is_stylesheet_link(attr("rel")) {
                    self.push(
                        line,
                        "HTML_LINK_REL",
                        format!(
                            "<link rel=\"{}\"> is not allowed; only <link rel=\"stylesheet\" href=\"file.css\"> for package stylesheets",
                            attr("rel").unwrap_or_default()
                        ),
                    );
                } else if attr("href").is_none() {
                    self.push(line, "HTML_MISSING_HREF", "<link rel=\"stylesheet\"> needs href=\"file.css\"");
                }
                if context.in_template {
                    self.push(
                        line,
                        "HTML_INERT_RESOURCE",
                        "<link> inside <template> would apply once inlined; link stylesheets outside templates",
                    );
                }
                for dropped in ["media", "disabled"] {
                    if attr(dropped).is_some() {
                        self.push(
                            Some(self.attribute_line(tag, dropped)),
                            "HTML_LINK_ATTRIBUTE",
                            format!("{dropped} on a stylesheet link is lost when the stylesheet is inlined; use @media (or a class) inside the stylesheet"),
                        );
                    }
                }
            }
            "input" if html && attr("type").is_some_and(|kind| kind.trim().eq_ignore_ascii_case("image")) => {
                self.push(
                    line,
                    "HTML_INPUT_IMAGE",
                    "<input type=\"image\"> loads an image and submits with coordinates; use <button> instead",
                );
            }
            "annotation-xml"
                if namespace == MATHML_NS
                    && attr("encoding").is_some_and(|encoding| {
                        let encoding = encoding.trim();
                        encoding.eq_ignore_ascii_case("text/html") || encoding.eq_ignore_ascii_case("application/xhtml+xml")
                    }) =>
            {
                self.push(
                    line,
                    "HTML_ANNOTATION_XML",
                    "<annotation-xml> with an HTML encoding switches parsers back to HTML inside MathML; remove it",
                );
            }
            _ => {}
        }
        if ANIMATION_ELEMENTS.contains(&name)
            && !html
            && let Some((suffix, reason)) =
                attr("attributename").and_then(|target| forbidden_animation_target(name, target))
        {
            self.push(line, &format!("HTML_{suffix}"), reason);
        }
        if context.in_head
            && !matches!(
                name,
                "title" | "meta" | "link" | "script" | "style" | "base" | "noscript"
            )
        {
            self.push(
                line,
                "HTML_HEAD_CONTENT",
                format!("<{name}> in <head> would be dropped when the app is assembled; move it into <body>"),
            );
        }
        if html && DOCUMENT_NAMED_ELEMENTS.contains(&name) && attr("name").is_some() {
            self.push(
                Some(self.attribute_line(tag, "name")),
                "HTML_DOM_CLOBBERING",
                format!("name on <{name}> becomes a property of document (DOM clobbering); use id or class instead"),
            );
        }

        // Only a stylesheet link's href names a package file; every other
        // link is refused above and its href judged like any other URL.
        let references_allowed = !(html && name == "link") || is_stylesheet_link(attr("rel"));
        for (qualified, value) in &element.attrs {
            let attribute = attribute_name(&qualified.ns, &qualified.local);
            let target = Target {
                namespace,
                element: name,
                attribute: &attribute,
                references_allowed,
            };
            self.check_attribute(&target, value, tag);
        }
    }

    fn check_attribute(&mut self, target: &Target<'_>, value: &str, tag: Option<usize>) {
        let Target {
            namespace,
            element,
            attribute,
            ..
        } = *target;
        let line = Some(self.attribute_line(tag, attribute));
        let html = namespace == HTML_NS;
        if attribute.starts_with("on") {
            self.push(
                line,
                "HTML_EVENT_HANDLER",
                format!("event handler attribute {attribute} is not allowed; attach listeners with addEventListener in a .js file"),
            );
        } else if attribute == "style" {
            self.push(
                line,
                "HTML_INLINE_STYLE",
                "style attributes are not allowed; use a class and put the CSS in a .css file",
            );
        } else if matches!(
            attribute,
            "action" | "formaction" | "formtarget" | "formmethod"
        ) || (attribute == "target" && element == "form")
        {
            // The spec wins over catalogue case A7 here: a <form> without a
            // destination stays allowed so native submit events fire (CSP
            // form-action 'none' blocks any navigation); only attributes
            // that give it a destination or target are refused.
            self.push(
                line,
                "HTML_FORM_DESTINATION",
                format!("{attribute} is not allowed; handle the form's submit event in a .js file instead of sending it anywhere"),
            );
        } else if matches!(attribute, "target" | "download" | "ping") {
            self.push(
                line,
                "HTML_NAVIGATION_ATTRIBUTE",
                format!(
                    "{attribute} is not allowed; apps cannot open windows, download or ping URLs"
                ),
            );
        } else if is_srcset(namespace, element, attribute) {
            self.check_srcset(element, value, line);
        } else if matches!(attribute, "srcset" | "imagesrcset") {
            self.push(
                line,
                "HTML_SRCSET",
                format!("{attribute} is not allowed here; srcset is only for package images on <img> and <source>"),
            );
        } else if attribute == "href" && element == "area" && html {
            self.push(
                line,
                "HTML_AREA_HREF",
                "<area href> is not allowed; image maps cannot link",
            );
        } else if URL_ATTRIBUTES.contains(&attribute) {
            self.check_url(target, value, line);
        } else if !html
            && ANIMATION_ELEMENTS.contains(&element)
            && matches!(attribute, "to" | "from" | "by" | "values")
        {
            self.check_animation_value(attribute, value, line);
        } else if !html && CSS_VALUED_ATTRIBUTES.contains(&attribute) {
            for finding in css::scan_tokens(value) {
                self.push(line, finding.code, finding.reason);
            }
        }
    }

    /// Every URL of a `srcset` is judged like an `<img src>`.
    fn check_srcset(&mut self, element: &str, value: &str, line: Option<u32>) {
        match parse_srcset(value) {
            Ok(candidates) if candidates.is_empty() => self.push(
                line,
                "HTML_SRCSET",
                "srcset names no image; remove it or name package images",
            ),
            Ok(candidates) => {
                for candidate in candidates {
                    self.check_url_as(
                        Some(ReferenceKind::Asset),
                        element,
                        "srcset",
                        &candidate.url,
                        line,
                    );
                }
            }
            Err(reason) => self.push(line, "HTML_SRCSET", reason),
        }
    }

    fn check_url(&mut self, target: &Target<'_>, value: &str, line: Option<u32>) {
        let Target {
            namespace,
            element,
            attribute,
            references_allowed,
        } = *target;
        let reference =
            reference_kind(namespace, element, attribute).filter(|_| references_allowed);
        self.check_url_as(reference, element, attribute, value, line);
    }

    /// Judges one URL that may name a package file of kind `reference`
    /// (`None`: only a `#fragment` may stay).
    fn check_url_as(
        &mut self,
        reference: Option<ReferenceKind>,
        element: &str,
        attribute: &str,
        value: &str,
        line: Option<u32>,
    ) {
        match classify_url(value) {
            UrlKind::Fragment => {}
            UrlKind::Empty => self.push(
                line,
                "HTML_EMPTY_URL",
                format!("{attribute} is empty (it would point at the document itself); remove it or use #fragment"),
            ),
            UrlKind::Script => self.push(
                line,
                "HTML_SCRIPT_URL",
                format!("{attribute} holds a javascript: URL; attach behaviour with addEventListener in a .js file"),
            ),
            UrlKind::Data => self.push(
                line,
                "HTML_DATA_URL",
                format!("{attribute} holds a data: URL; put the content in a package file and reference it by path"),
            ),
            UrlKind::External => self.push(
                line,
                "HTML_EXTERNAL_URL",
                format!("{attribute}=\"{value}\" points outside the package; apps cannot load or link anything from the network"),
            ),
            UrlKind::Relative => match reference {
                None => self.push(
                    line,
                    "HTML_URL_NOT_ALLOWED",
                    format!("{attribute} on <{element}> may only hold a #fragment of this document"),
                ),
                Some(kind) => self.reference(kind, attribute, value, line),
            },
        }
    }

    fn reference(&mut self, kind: ReferenceKind, attribute: &str, value: &str, line: Option<u32>) {
        let path = match package_path(self.base, &normalize_url(value)) {
            Ok(path) => path,
            Err(reason) => {
                self.push(
                    line,
                    "HTML_BAD_PATH",
                    format!("{attribute}=\"{value}\": {reason}"),
                );
                return;
            }
        };
        if !self.files.contains(&path) {
            self.push(
                line,
                "HTML_MISSING_FILE",
                format!("{attribute}=\"{value}\" names {path}, which is not a file of the package"),
            );
            return;
        }
        let (fits, what) = match kind {
            ReferenceKind::Stylesheet => (path.ends_with(".css"), "stylesheets must be .css files"),
            ReferenceKind::Script => (path.ends_with(".js"), "scripts must be .js files"),
            ReferenceKind::Asset => (
                crate::asset::is_image_path(&path),
                "images must be image files of the package: .svg .png .jpg .jpeg .webp .gif",
            ),
        };
        if !fits {
            self.push(
                line,
                "HTML_WRONG_FILE_TYPE",
                format!("{attribute}=\"{value}\": {what}"),
            );
            return;
        }
        self.references.push(Reference {
            kind,
            path,
            line: line.unwrap_or(self.last_line),
        });
    }

    /// `to`/`from`/`by`/`values` of an SVG animation: plain values are fine,
    /// but anything URL-like must stay inside the document.
    fn check_animation_value(&mut self, attribute: &str, value: &str, line: Option<u32>) {
        for part in value.split(';') {
            match classify_url(part) {
                UrlKind::Script => self.push(
                    line,
                    "HTML_SCRIPT_URL",
                    format!(
                        "{attribute} holds a javascript: URL; animations may not set script URLs"
                    ),
                ),
                UrlKind::Data => self.push(
                    line,
                    "HTML_DATA_URL",
                    format!("{attribute} holds a data: URL; animations may not set URLs"),
                ),
                UrlKind::External => self.push(
                    line,
                    "HTML_EXTERNAL_URL",
                    format!("{attribute} holds an external URL; animations may not set URLs"),
                ),
                _ => {}
            }
        }
        for finding in css::scan_tokens(value) {
            self.push(line, finding.code, finding.reason);
        }
    }
}

mod prescan;

#[cfg(test)]
mod tests;
