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
//! on which html5ever's tree builder would take quadratic time (deep nesting,
//! tags with huge attribute lists) before the parser sees it.

use std::collections::BTreeSet;

use scraper::{ElementRef, Html, Node};

use crate::css;
use crate::diagnostics::Diagnostics;

/// Deepest element nesting that is accepted (the `<html>` element is depth 1).
pub const MAX_HTML_DEPTH: usize = 256;

const HTML_NS: &str = "http://www.w3.org/1999/xhtml";
const SVG_NS: &str = "http://www.w3.org/2000/svg";
const MATHML_NS: &str = "http://www.w3.org/1998/Math/MathML";
const XLINK_NS: &str = "http://www.w3.org/1999/xlink";
const XML_NS: &str = "http://www.w3.org/XML/1998/namespace";
const XMLNS_NS: &str = "http://www.w3.org/2000/xmlns/";

/// The base that relative URLs are resolved against to find out whether they
/// stay inside the package: anything that leaves this origin is external.
const PACKAGE_BASE: &str = "https://package.invalid/";

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
    /// `img[src]`, `video[poster]`, SVG `<image href|xlink:href>`: an `.svg`
    /// file, inlined as a `data:` URI.
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
    /// file) and asset references (Asset): `img[src]`, SVG `<image
    /// href|xlink:href>`, `video[poster]`.
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
    /// (the assembler inlines them elsewhere), and every Asset reference
    /// attribute value is replaced by `inline(path)`. Only called on
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

/// 1-based line numbers by byte offset in logarithmic time, for the many
/// lookups of one file (`diagnostics::line_of` counts from the start of the
/// text on every call, which is quadratic over a whole document).
#[derive(Debug, Clone)]
pub(crate) struct LineIndex {
    /// Byte offset where each line starts.
    starts: Vec<usize>,
}

impl LineIndex {
    pub(crate) fn new(text: &str) -> LineIndex {
        let starts = std::iter::once(0)
            .chain(
                text.bytes()
                    .enumerate()
                    .filter(|(_, byte)| *byte == b'\n')
                    .map(|(offset, _)| offset + 1),
            )
            .collect();
        LineIndex { starts }
    }

    /// The line of byte `offset`, as `diagnostics::line_of` counts it.
    pub(crate) fn line(&self, offset: usize) -> u32 {
        u32::try_from(self.starts.partition_point(|&start| start <= offset)).unwrap_or(u32::MAX)
    }
}

/// What a URL attribute value is, after the clean-up that WHATWG URL parsing
/// does (leading/trailing C0 controls and spaces stripped, tabs and newlines
/// removed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UrlKind {
    /// Nothing left: the document itself.
    Empty,
    /// `#…`: an element of the same document.
    Fragment,
    /// A `javascript:` URL.
    Script,
    /// A `data:` URL.
    Data,
    /// Another scheme, or a relative URL that leaves the package's origin
    /// (`//host`, `\\host`).
    External,
    /// A path relative to the package.
    Relative,
}

/// The value as the URL parser sees it.
pub(crate) fn normalize_url(value: &str) -> String {
    value
        .trim_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect()
}

pub(crate) fn classify_url(value: &str) -> UrlKind {
    let normalized = normalize_url(value);
    if normalized.is_empty() {
        return UrlKind::Empty;
    }
    if normalized.starts_with('#') {
        return UrlKind::Fragment;
    }
    match url::Url::parse(&normalized) {
        Ok(parsed) => match parsed.scheme() {
            "javascript" => UrlKind::Script,
            "data" => UrlKind::Data,
            _ => UrlKind::External,
        },
        Err(url::ParseError::RelativeUrlWithoutBase) => {
            let Ok(base) = url::Url::parse(PACKAGE_BASE) else {
                return UrlKind::External;
            };
            match base.join(&normalized) {
                Ok(joined) if joined.origin() == base.origin() => UrlKind::Relative,
                _ => UrlKind::External,
            }
        }
        // A scheme followed by something unparsable: still not ours.
        Err(_) => UrlKind::External,
    }
}

/// The package path a relative reference names, resolved against `base` (the
/// document's folder with a trailing `/`, or ""), or why it is not a plain
/// package path.
fn package_path(base: &str, normalized: &str) -> Result<String, &'static str> {
    if normalized.contains('\\') {
        return Err("backslashes are not allowed in package paths; use /");
    }
    if normalized.contains('%') {
        return Err("percent escapes are not allowed in package paths; name the file as it is");
    }
    if normalized.contains('?') {
        return Err("package paths cannot carry a query (?…)");
    }
    if normalized.contains('#') {
        return Err("package file references cannot carry a #fragment");
    }
    if normalized.starts_with('/') {
        return Err("package paths are relative to index.html; remove the leading /");
    }
    if normalized.chars().any(char::is_control) {
        return Err("package paths cannot contain control characters");
    }
    let mut segments: Vec<&str> = base
        .split('/')
        .filter(|segment| !segment.is_empty())
        .collect();
    for segment in normalized.split('/') {
        match segment {
            "" => return Err("package paths cannot contain empty segments (//) or end with /"),
            "." => {}
            ".." => {
                if segments.pop().is_none() {
                    return Err("the path leaves the package (..)");
                }
            }
            other => segments.push(other),
        }
    }
    if segments.is_empty() {
        return Err("the path names no file");
    }
    Ok(segments.join("/"))
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
        } else if matches!(attribute, "srcset" | "imagesrcset") {
            self.push(
                line,
                "HTML_SRCSET",
                format!("{attribute} is not allowed; use src with one package file"),
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

    fn check_url(&mut self, target: &Target<'_>, value: &str, line: Option<u32>) {
        let Target {
            namespace,
            element,
            attribute,
            references_allowed,
        } = *target;
        let reference =
            reference_kind(namespace, element, attribute).filter(|_| references_allowed);
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
        let (extension, what) = match kind {
            ReferenceKind::Stylesheet => (".css", "stylesheets must be .css files"),
            ReferenceKind::Script => (".js", "scripts must be .js files"),
            ReferenceKind::Asset => (".svg", "images must be .svg files of the package"),
        };
        if !path.ends_with(extension) {
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

/// A small, linear pre-scan of the source: start tags with the offsets of
/// their attributes (for line numbers), the problems only the text shows
/// (CDATA sections, comments that parsers end in different places), and an
/// estimate of how deep html5ever's stack of open elements will get.
mod prescan {
    /// One start tag in the source.
    #[derive(Debug, Clone)]
    pub(super) struct Tag {
        /// Lowercase tag name.
        pub name: String,
        /// Byte offset of the `<`.
        pub offset: usize,
        /// Lowercase attribute names with the byte offset of each name.
        pub attributes: Vec<(String, usize)>,
    }

    /// A problem visible in the text itself.
    #[derive(Debug, Clone)]
    pub(super) struct Finding {
        pub offset: usize,
        pub code: &'static str,
        pub reason: &'static str,
    }

    /// What the tree builder will see, in order.
    #[derive(Debug, Clone)]
    enum Event {
        /// Index into `tags`, whether the tag ended with `/>`, and its
        /// attributes (lowercase name, raw value).
        Start(usize, bool, Vec<(String, String)>),
        /// Lowercase tag name and byte offset of the `<`.
        End(String, usize),
        /// Text with something other than whitespace.
        Text,
    }

    #[derive(Debug, Default)]
    pub(super) struct Scan {
        pub tags: Vec<Tag>,
        pub findings: Vec<Finding>,
        events: Vec<Event>,
        /// Offset of the first tag with more than [`MAX_ATTRIBUTES`].
        crowded_tag: Option<usize>,
    }

    fn is_space(byte: u8) -> bool {
        matches!(byte, b' ' | b'\t' | b'\n' | b'\r' | b'\x0C')
    }

    /// The end (exclusive) of a bogus comment or DOCTYPE starting at `from`:
    /// just past the next `>`, or the end of the text.
    fn past_gt(bytes: &[u8], from: usize) -> usize {
        bytes[from.min(bytes.len())..]
            .iter()
            .position(|&b| b == b'>')
            .map_or(bytes.len(), |found| from + found + 1)
    }

    /// Tokenizes like the HTML tokenizer's data state does, without character
    /// references (they never change structure) and without raw-text states:
    /// content of `<script>`, `<style>`, `<title>` and friends is scanned as
    /// markup, which can only make the depth estimate larger.
    pub(super) fn scan(text: &str) -> Scan {
        let bytes = text.as_bytes();
        let mut scan = Scan::default();
        let mut index = 0;
        let mut text_start = 0;
        while index < bytes.len() {
            if bytes[index] != b'<' {
                index += 1;
                continue;
            }
            let flush = |scan: &mut Scan, end: usize| {
                if bytes[text_start..end].iter().any(|&b| !is_space(b)) {
                    scan.events.push(Event::Text);
                }
            };
            let next = bytes.get(index + 1).copied();
            match next {
                Some(b) if b.is_ascii_alphabetic() => {
                    flush(&mut scan, index);
                    index = scan_tag(bytes, index, false, &mut scan);
                }
                Some(b'/') => match bytes.get(index + 2).copied() {
                    Some(b) if b.is_ascii_alphabetic() => {
                        flush(&mut scan, index);
                        index = scan_tag(bytes, index, true, &mut scan);
                    }
                    Some(b'>') => {
                        flush(&mut scan, index);
                        index += 3;
                    }
                    None => {
                        index += 2;
                        continue;
                    }
                    Some(_) => {
                        flush(&mut scan, index);
                        index = past_gt(bytes, index + 2);
                    }
                },
                Some(b'!') => {
                    flush(&mut scan, index);
                    index = scan_declaration(bytes, index, &mut scan);
                }
                Some(b'?') => {
                    flush(&mut scan, index);
                    index = past_gt(bytes, index + 2);
                }
                _ => {
                    index += 1;
                    continue;
                }
            }
            text_start = index;
        }
        if bytes[text_start.min(bytes.len())..]
            .iter()
            .any(|&b| !is_space(b))
        {
            scan.events.push(Event::Text);
        }
        scan
    }

    /// `<!…` at `start`: a comment, DOCTYPE, CDATA section or bogus comment.
    fn scan_declaration(bytes: &[u8], start: usize, scan: &mut Scan) -> usize {
        let rest = &bytes[start..];
        if rest.starts_with(b"<!--") {
            return scan_comment(bytes, start, scan);
        }
        if rest.starts_with(b"<![CDATA[") {
            scan.findings.push(Finding {
                offset: start,
                code: "HTML_CDATA",
                reason: "CDATA sections hide markup from some parsers; write the text with character references (&lt;) instead",
            });
        }
        // DOCTYPE, CDATA outside foreign content and every other `<!` end at
        // the first `>`; inside SVG a CDATA section runs to `]]>`, but
        // ending it earlier only shows the estimate more tags.
        past_gt(bytes, start + 2)
    }

    fn scan_comment(bytes: &[u8], start: usize, scan: &mut Scan) -> usize {
        let body = start + 4;
        let malformed = |scan: &mut Scan, reason| {
            scan.findings.push(Finding {
                offset: start,
                code: "HTML_MALFORMED_COMMENT",
                reason,
            });
        };
        const ABRUPT: &str = "comments must end with a plain --> after some text (<!--> and <!---> end early in HTML5 parsers); write <!-- text -->";
        if bytes.get(body) == Some(&b'>') {
            malformed(scan, ABRUPT);
            return body + 1;
        }
        if bytes[body.min(bytes.len())..].starts_with(b"->") {
            malformed(scan, ABRUPT);
            return body + 2;
        }
        // One pass to the first `-->` or `--!>` (whichever comes first, as the
        // tokenizer sees it), noting a `<!--` on the way: searching for each
        // ending separately would rescan the rest of the text per comment.
        let mut nested = false;
        let mut index = body;
        while index < bytes.len() {
            let rest = &bytes[index..];
            if rest.starts_with(b"-->") {
                if nested {
                    malformed(
                        scan,
                        "comments must not contain <!--; parsers disagree on where nested comments end",
                    );
                }
                return index + 3;
            }
            if rest.starts_with(b"--!>") {
                malformed(
                    scan,
                    "--!> ends a comment in HTML5 parsers but not in others; end comments with -->",
                );
                return index + 4;
            }
            nested |= rest.starts_with(b"<!--");
            index += 1;
        }
        malformed(scan, "the comment is never closed; end it with -->");
        bytes.len()
    }

    /// A start or end tag at `start`; returns the offset just past it.
    fn scan_tag(bytes: &[u8], start: usize, end_tag: bool, scan: &mut Scan) -> usize {
        let mut index = start + if end_tag { 2 } else { 1 };
        let name_start = index;
        while index < bytes.len()
            && !is_space(bytes[index])
            && bytes[index] != b'/'
            && bytes[index] != b'>'
        {
            index += 1;
        }
        let name = String::from_utf8_lossy(&bytes[name_start..index]).to_ascii_lowercase();
        let mut attributes: Vec<(String, usize)> = Vec::new();
        let mut values: Vec<(String, String)> = Vec::new();
        let mut self_closing = false;
        // The attribute states of the HTML tokenizer: quoted values may hold
        // `>`, unquoted ones end at whitespace or `>`.
        loop {
            while index < bytes.len() && is_space(bytes[index]) {
                index += 1;
            }
            let Some(&byte) = bytes.get(index) else {
                // EOF inside a tag: the tokenizer drops the tag.
                return bytes.len();
            };
            match byte {
                b'>' => {
                    index += 1;
                    break;
                }
                b'/' => {
                    index += 1;
                    if bytes.get(index) == Some(&b'>') {
                        self_closing = true;
                        index += 1;
                        break;
                    }
                }
                _ => {
                    let attribute_start = index;
                    // An attribute name may start with `=`; after that it
                    // runs to whitespace, `/`, `>` or `=`.
                    index += 1;
                    while index < bytes.len()
                        && !is_space(bytes[index])
                        && !matches!(bytes[index], b'/' | b'>' | b'=')
                    {
                        index += 1;
                    }
                    let attribute = String::from_utf8_lossy(&bytes[attribute_start..index])
                        .to_ascii_lowercase();
                    while index < bytes.len() && is_space(bytes[index]) {
                        index += 1;
                    }
                    let mut value = String::new();
                    if bytes.get(index) == Some(&b'=') {
                        index += 1;
                        while index < bytes.len() && is_space(bytes[index]) {
                            index += 1;
                        }
                        match bytes.get(index).copied() {
                            Some(quote @ (b'"' | b'\'')) => {
                                let value_start = index + 1;
                                let Some(close) =
                                    bytes[value_start..].iter().position(|&b| b == quote)
                                else {
                                    return bytes.len();
                                };
                                value = String::from_utf8_lossy(
                                    &bytes[value_start..value_start + close],
                                )
                                .into_owned();
                                index = value_start + close + 1;
                            }
                            Some(b'>') | None => {}
                            Some(_) => {
                                let value_start = index;
                                while index < bytes.len()
                                    && !is_space(bytes[index])
                                    && bytes[index] != b'>'
                                {
                                    index += 1;
                                }
                                value = String::from_utf8_lossy(&bytes[value_start..index])
                                    .into_owned();
                            }
                        }
                    }
                    attributes.push((attribute.clone(), attribute_start));
                    values.push((attribute, value));
                }
            }
        }
        if attributes.len() > MAX_ATTRIBUTES && scan.crowded_tag.is_none() {
            scan.crowded_tag = Some(start);
        }
        if end_tag {
            scan.events.push(Event::End(name, start));
        } else {
            scan.tags.push(Tag {
                name,
                offset: start,
                attributes,
            });
            scan.events
                .push(Event::Start(scan.tags.len() - 1, self_closing, values));
        }
        index
    }

    /// Why the document is refused before parsing.
    #[derive(Debug, Clone)]
    pub(super) struct Refusal {
        pub offset: usize,
        pub code: &'static str,
        pub reason: String,
    }

    /// Most attributes one tag may have: html5ever compares every attribute
    /// of a tag with the ones before it, so a tag with 100k attributes takes
    /// quadratic time; no real element needs more than a few dozen.
    pub(super) const MAX_ATTRIBUTES: usize = 128;

    /// Deepest estimated stack of open elements that is still parsed; the
    /// real limit is checked on the parsed tree, this only keeps html5ever's
    /// work bounded, so it leaves room for the estimate's imprecision.
    pub(super) const MAX_ESTIMATED_DEPTH: usize = 2 * super::MAX_HTML_DEPTH;
    /// Most stack entries the tree builder may have to look at in total.
    pub(super) const MAX_ESTIMATED_WORK: u64 = 16_000_000;

    const VOID: [&str; 19] = [
        "area", "base", "basefont", "bgsound", "br", "col", "embed", "hr", "img", "image", "input",
        "keygen", "link", "meta", "param", "source", "track", "wbr", "frame",
    ];
    const FORMATTING: [&str; 14] = [
        "a", "b", "big", "code", "em", "font", "i", "nobr", "s", "small", "strike", "strong", "tt",
        "u",
    ];
    /// Start tags that close an open `<p>` in button scope.
    const CLOSES_P: [&str; 40] = [
        "address",
        "article",
        "aside",
        "blockquote",
        "center",
        "details",
        "dialog",
        "dir",
        "div",
        "dl",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "header",
        "hgroup",
        "main",
        "menu",
        "nav",
        "ol",
        "p",
        "search",
        "section",
        "summary",
        "ul",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "pre",
        "listing",
        "form",
        "plaintext",
        "table",
        "hr",
        "xmp",
        "li",
        "dd",
    ];
    /// Elements that bound "has an element in scope" and that push a marker
    /// onto the list of active formatting elements.
    const SCOPE: [&str; 9] = [
        "applet", "caption", "html", "table", "td", "th", "marquee", "object", "template",
    ];
    const MARKERS: [&str; 7] = [
        "applet", "caption", "td", "th", "marquee", "object", "template",
    ];
    /// End tags handled with "in scope" rather than "stop at a special element".
    const BLOCK_END_TAGS: [&str; 36] = [
        "address",
        "article",
        "aside",
        "blockquote",
        "button",
        "center",
        "details",
        "dialog",
        "dir",
        "div",
        "dl",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "header",
        "hgroup",
        "listing",
        "main",
        "menu",
        "nav",
        "ol",
        "pre",
        "search",
        "section",
        "summary",
        "ul",
        "li",
        "dd",
        "dt",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
    ];
    /// The HTML "special" category (void elements are never on the stack).
    const SPECIAL: [&str; 61] = [
        "address",
        "applet",
        "article",
        "aside",
        "blockquote",
        "body",
        "button",
        "caption",
        "center",
        "colgroup",
        "dd",
        "details",
        "dir",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "frameset",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "head",
        "header",
        "hgroup",
        "html",
        "iframe",
        "li",
        "listing",
        "main",
        "marquee",
        "menu",
        "nav",
        "noembed",
        "noframes",
        "noscript",
        "object",
        "ol",
        "p",
        "plaintext",
        "pre",
        "script",
        "search",
        "section",
        "select",
        "style",
        "summary",
        "table",
        "tbody",
        "td",
        "template",
        "textarea",
        "tfoot",
        "th",
        "ul",
    ];
    /// Start tags that leave SVG/MathML content for HTML.
    const BREAKOUT: [&str; 45] = [
        "b",
        "big",
        "blockquote",
        "body",
        "br",
        "center",
        "code",
        "dd",
        "div",
        "dl",
        "dt",
        "em",
        "embed",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "head",
        "hr",
        "i",
        "img",
        "li",
        "listing",
        "menu",
        "meta",
        "nobr",
        "ol",
        "p",
        "pre",
        "ruby",
        "s",
        "small",
        "span",
        "strong",
        "strike",
        "sub",
        "sup",
        "table",
        "tt",
        "u",
        "ul",
        "var",
        "font",
    ];

    #[derive(Debug)]
    struct Entry {
        name: String,
        foreign: bool,
        id: u64,
    }

    #[derive(Debug)]
    enum Formatting {
        /// Pushed by the entry with this id.
        Marker(u64),
        /// A formatting element: its name, attributes (for the "Noah's Ark"
        /// clause) and the id of its entry on the stack.
        Element(String, Vec<(String, String)>, u64),
    }

    /// A model of html5ever's tree builder reduced to what decides the size
    /// of its stack of open elements: implied end tags, scope, foreign
    /// content, and the list of active formatting elements, which can reopen
    /// elements without any tag in the source. Where it cannot be exact it
    /// keeps more elements open than the parser would.
    #[derive(Debug, Default)]
    struct Model {
        stack: Vec<Entry>,
        formatting: Vec<Formatting>,
        on_stack: std::collections::HashSet<u64>,
        next_id: u64,
        work: u64,
    }

    impl Model {
        fn push(&mut self, name: &str, foreign: bool) -> u64 {
            self.next_id += 1;
            let id = self.next_id;
            self.stack.push(Entry {
                name: name.to_owned(),
                foreign,
                id,
            });
            self.on_stack.insert(id);
            if !foreign && MARKERS.contains(&name) {
                self.formatting.push(Formatting::Marker(id));
            }
            id
        }

        /// Pops every entry from `index` up.
        fn truncate(&mut self, index: usize) {
            while self.stack.len() > index {
                let Some(entry) = self.stack.pop() else { break };
                self.on_stack.remove(&entry.id);
                if !entry.foreign && MARKERS.contains(&entry.name.as_str()) {
                    // Leaving a marker's element clears the list back to
                    // (and including) its marker.
                    while let Some(item) = self.formatting.pop() {
                        if matches!(item, Formatting::Marker(id) if id == entry.id) {
                            break;
                        }
                    }
                }
            }
        }

        fn top(&self) -> Option<&Entry> {
            self.stack.last()
        }

        fn top_is(&self, names: &[&str]) -> bool {
            self.top()
                .is_some_and(|entry| !entry.foreign && names.contains(&entry.name.as_str()))
        }

        /// Index of the nearest HTML entry named one of `names`, looking down
        /// from the top and stopping at any entry for which `stop` holds.
        fn find(&self, names: &[&str], stop: impl Fn(&Entry) -> bool) -> Option<usize> {
            for (index, entry) in self.stack.iter().enumerate().rev() {
                if !entry.foreign && names.contains(&entry.name.as_str()) {
                    return Some(index);
                }
                if stop(entry) {
                    return None;
                }
            }
            None
        }

        fn is_scope_boundary(entry: &Entry) -> bool {
            if entry.foreign {
                matches!(
                    entry.name.as_str(),
                    "mi" | "mo"
                        | "mn"
                        | "ms"
                        | "mtext"
                        | "annotation-xml"
                        | "foreignobject"
                        | "desc"
                        | "title"
                )
            } else {
                SCOPE.contains(&entry.name.as_str())
            }
        }

        fn is_special(entry: &Entry) -> bool {
            Model::is_scope_boundary(entry)
                || (!entry.foreign && SPECIAL.contains(&entry.name.as_str()))
        }

        fn close_p(&mut self) {
            if let Some(index) = self.find(&["p"], |entry| {
                Model::is_scope_boundary(entry) || (!entry.foreign && entry.name == "button")
            }) {
                self.truncate(index);
            }
        }

        /// Reopens every formatting element of the list that is not on the
        /// stack (the parser reopens at most these).
        fn reconstruct(&mut self) {
            self.work += self.formatting.len() as u64;
            let start = self
                .formatting
                .iter()
                .rposition(|item| matches!(item, Formatting::Marker(_)))
                .map_or(0, |index| index + 1);
            for index in start..self.formatting.len() {
                let Formatting::Element(name, _, id) = &self.formatting[index] else {
                    continue;
                };
                if self.on_stack.contains(id) {
                    continue;
                }
                let name = name.clone();
                let new_id = self.push(&name, false);
                if let Formatting::Element(_, _, id) = &mut self.formatting[index] {
                    *id = new_id;
                }
            }
        }

        /// True when the current node is SVG/MathML content that is not an
        /// HTML integration point for a start tag named `name`.
        fn in_foreign_content(&self, name: &str) -> bool {
            let Some(top) = self.top() else { return false };
            if !top.foreign {
                return false;
            }
            match top.name.as_str() {
                "foreignobject" | "desc" | "title" => false,
                "mi" | "mo" | "mn" | "ms" | "mtext" => matches!(name, "mglyph" | "malignmark"),
                _ => true,
            }
        }

        fn start(&mut self, name: &str, self_closing: bool, attributes: &[(String, String)]) {
            self.work += self.stack.len() as u64;
            if self.in_foreign_content(name) {
                let font_breakout = name == "font"
                    && attributes.iter().any(|(attribute, _)| {
                        matches!(attribute.as_str(), "color" | "face" | "size")
                    });
                if !BREAKOUT.contains(&name) || (name == "font" && !font_breakout) {
                    if !self_closing {
                        self.push(name, true);
                    }
                    return;
                }
                while self.in_foreign_content(name) {
                    self.truncate(self.stack.len() - 1);
                }
            }
            match name {
                "html" | "head" | "body" => {}
                _ if VOID.contains(&name) => self.reconstruct(),
                "svg" | "math" => {
                    self.reconstruct();
                    if !self_closing {
                        self.push(name, true);
                    }
                }
                "li" | "dd" | "dt" => {
                    let same: &[&str] = if name == "li" { &["li"] } else { &["dd", "dt"] };
                    if let Some(index) = self.find(same, |entry| {
                        Model::is_special(entry)
                            && !matches!(entry.name.as_str(), "address" | "div" | "p")
                    }) {
                        self.truncate(index);
                    }
                    self.close_p();
                    self.push(name, false);
                }
                "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                    self.close_p();
                    if self.top_is(&["h1", "h2", "h3", "h4", "h5", "h6"]) {
                        self.truncate(self.stack.len() - 1);
                    }
                    self.push(name, false);
                }
                _ if CLOSES_P.contains(&name) => {
                    self.close_p();
                    self.push(name, false);
                }
                "option" | "optgroup" => {
                    if self.top_is(&["option"]) {
                        self.truncate(self.stack.len() - 1);
                    }
                    self.reconstruct();
                    self.push(name, false);
                }
                "tr" | "td" | "th" | "tbody" | "thead" | "tfoot" => {
                    let closes: &[&str] = match name {
                        "tr" => &["tr"],
                        "td" | "th" => &["td", "th"],
                        _ => &["tbody", "thead", "tfoot"],
                    };
                    let table = |entry: &Entry| {
                        !entry.foreign && matches!(entry.name.as_str(), "table" | "template")
                    };
                    if let Some(index) = self.find(closes, table) {
                        self.truncate(index);
                    }
                    // The parser inserts the implied row group and row.
                    if matches!(name, "tr" | "td" | "th") && self.top_is(&["table"]) {
                        self.push("tbody", false);
                    }
                    if matches!(name, "td" | "th") && self.top_is(&["tbody", "thead", "tfoot"]) {
                        self.push("tr", false);
                    }
                    self.push(name, false);
                }
                "rb" | "rp" | "rt" | "rtc" => {
                    while self.top_is(&["rb", "rp", "rt", "rtc"]) {
                        self.truncate(self.stack.len() - 1);
                    }
                    self.reconstruct();
                    self.push(name, false);
                }
                _ if FORMATTING.contains(&name) => {
                    self.reconstruct();
                    let id = self.push(name, false);
                    let mut attributes = attributes.to_vec();
                    attributes.sort();
                    // Noah's Ark: at most three identical entries after the
                    // last marker.
                    let start = self
                        .formatting
                        .iter()
                        .rposition(|item| matches!(item, Formatting::Marker(_)))
                        .map_or(0, |index| index + 1);
                    let same: Vec<usize> = (start..self.formatting.len())
                        .filter(|&index| {
                            matches!(&self.formatting[index], Formatting::Element(n, a, _) if n == name && *a == attributes)
                        })
                        .collect();
                    if same.len() >= 3 {
                        self.formatting.remove(same[0]);
                    }
                    self.formatting
                        .push(Formatting::Element(name.to_owned(), attributes, id));
                }
                _ => {
                    self.reconstruct();
                    self.push(name, false);
                }
            }
        }

        fn end(&mut self, name: &str) {
            self.work += self.stack.len() as u64;
            // In foreign content an end tag closes the nearest SVG/MathML
            // element of that name, until an HTML element is reached.
            if self.top().is_some_and(|top| top.foreign) {
                for index in (0..self.stack.len()).rev() {
                    let entry = &self.stack[index];
                    if !entry.foreign {
                        break;
                    }
                    if entry.name == name {
                        self.truncate(index);
                        return;
                    }
                }
            }
            match name {
                "html" | "head" | "body" | "br" => {}
                "p" => self.close_p(),
                _ if FORMATTING.contains(&name) => self.adoption(name),
                _ => {
                    let block = BLOCK_END_TAGS.contains(&name);
                    let found = self.find(&[name], |entry| {
                        Model::is_scope_boundary(entry) || (!block && Model::is_special(entry))
                    });
                    if let Some(index) = found {
                        self.truncate(index);
                    }
                }
            }
        }

        /// The adoption agency algorithm, reduced to its effect on the size
        /// of the stack: the formatting element is popped with everything
        /// above it only when nothing special is above it; otherwise the
        /// stack keeps its size.
        fn adoption(&mut self, name: &str) {
            let start = self
                .formatting
                .iter()
                .rposition(|item| matches!(item, Formatting::Marker(_)))
                .map_or(0, |index| index + 1);
            let Some(position) = (start..self.formatting.len())
                .rev()
                .find(|&index| matches!(&self.formatting[index], Formatting::Element(n, _, _) if n == name))
            else {
                // Not a formatting element after all: "any other end tag".
                if let Some(index) = self.find(&[name], Model::is_special) {
                    self.truncate(index);
                }
                return;
            };
            let Formatting::Element(_, _, id) = self.formatting[position] else {
                return;
            };
            let Some(index) = self.stack.iter().rposition(|entry| entry.id == id) else {
                self.formatting.remove(position);
                return;
            };
            let above = &self.stack[index + 1..];
            if above.iter().any(Model::is_scope_boundary) {
                return;
            }
            if above.iter().any(Model::is_special) {
                return;
            }
            self.formatting.remove(position);
            self.truncate(index);
        }
    }

    /// Refuses documents whose stack of open elements would get too deep, or
    /// which would make the tree builder do too much work, before html5ever
    /// sees them.
    pub(super) fn check_limits(scan: &Scan) -> Result<(), Refusal> {
        if let Some(offset) = scan.crowded_tag {
            return Err(Refusal {
                offset,
                code: "HTML_TOO_MANY_ATTRIBUTES",
                reason: format!(
                    "a tag has more than {MAX_ATTRIBUTES} attributes; split the element or move data into a .js file"
                ),
            });
        }
        let mut model = Model::default();
        for event in &scan.events {
            let offset = match event {
                Event::Start(index, self_closing, attributes) => {
                    let tag = &scan.tags[*index];
                    model.start(&tag.name, *self_closing, attributes);
                    tag.offset
                }
                Event::End(name, offset) => {
                    model.end(name);
                    *offset
                }
                Event::Text => {
                    model.work += 1;
                    if !model.in_foreign_content("") {
                        model.reconstruct();
                    }
                    continue;
                }
            };
            if model.stack.len() + 3 > MAX_ESTIMATED_DEPTH {
                return Err(Refusal {
                    offset,
                    code: "HTML_TOO_DEEP",
                    reason: format!(
                        "elements nest far more than {} levels deep; flatten the markup",
                        super::MAX_HTML_DEPTH
                    ),
                });
            }
            if model.work > MAX_ESTIMATED_WORK {
                return Err(Refusal {
                    offset,
                    code: "HTML_TOO_DEEP",
                    reason: "the markup is too large and too deeply nested to check; flatten it"
                        .to_owned(),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostics::Diagnostic;

    fn files() -> BTreeSet<String> {
        [
            "index.html",
            "APP.md",
            "styles.css",
            "theme.css",
            "app.js",
            "lib/util.js",
            "icons/logo.svg",
            "notes.txt",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect()
    }

    fn analyze(text: &str) -> (Option<HtmlDocument>, Vec<Diagnostic>) {
        let mut diagnostics = Diagnostics::new();
        let document = analyze_html("index.html", text, &files(), &mut diagnostics);
        assert!(diagnostics.iter().all(|d| d.file == "index.html"));
        assert!(
            diagnostics.iter().all(|d| !d.reason.ends_with('.')),
            "{diagnostics:?}"
        );
        (document, diagnostics.iter().cloned().collect())
    }

    fn sorted_codes(diagnostics: &[Diagnostic]) -> Vec<String> {
        let mut codes: Vec<String> = diagnostics.iter().map(|d| d.code.clone()).collect();
        codes.sort();
        codes
    }

    /// A valid document with `body` inside its `<body>`.
    fn page(body: &str) -> String {
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"viewport\" content=\"width=device-width\">\n<title>Time</title>\n\
             <link rel=\"stylesheet\" href=\"styles.css\">\n</head>\n<body>\n{body}\n\
             <script src=\"app.js\"></script>\n</body>\n</html>\n"
        )
    }

    /// Exactly these codes (in any order) for `body` inside a valid page.
    #[track_caller]
    fn check(body: &str, expected: &[&str]) {
        check_document(&page(body), expected);
    }

    #[track_caller]
    fn check_document(text: &str, expected: &[&str]) {
        let (document, diagnostics) = analyze(text);
        assert!(document.is_some(), "no document for {text:?}");
        let mut expected: Vec<String> = expected.iter().map(|code| (*code).to_owned()).collect();
        expected.sort();
        assert_eq!(
            sorted_codes(&diagnostics),
            expected,
            "for {text:?}: {diagnostics:#?}"
        );
    }

    /// At least these codes for `body` inside a valid page (for payloads
    /// whose full set of findings is incidental).
    #[track_caller]
    fn check_includes(body: &str, expected: &[&str]) {
        let (_, diagnostics) = analyze(&page(body));
        let codes = sorted_codes(&diagnostics);
        for code in expected {
            assert!(
                codes.iter().any(|found| found == code),
                "{code} missing for {body:?}: {codes:?}"
            );
        }
    }

    #[test]
    fn a_normal_document_is_allowed() {
        let text = "<!DOCTYPE html>\n<html lang=\"de\">\n<head>\n  <meta charset=\"utf-8\">\n  \
            <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n  \
            <title>  Time \n sheet </title>\n  <link rel=\"stylesheet\" href=\"styles.css\">\n  \
            <link rel=\"Stylesheet\" href=\"./theme.css\">\n  <script src=\"lib/util.js\"></script>\n</head>\n\
            <body>\n  <!-- a comment -->\n  <main id=\"app\" class=\"x\" data-state=\"idle\" aria-live=\"polite\">\n    \
            <a href=\"#top\">top</a>\n    <img src=\"icons/logo.svg\" alt=\"logo\">\n    \
            <svg viewBox=\"0 0 10 10\"><defs><linearGradient id=\"g\"/></defs>\
            <use href=\"#g\"/><rect fill=\"url(#g)\" width=\"1\"/>\
            <image href=\"icons/logo.svg\"/><animate attributeName=\"opacity\" values=\"0;1\"/></svg>\n    \
            <math><mi>x</mi><mo>&lt;</mo><mn>2</mn></math>\n    \
            <form class=\"entry\"><label>Hours <input name=\"hours\" type=\"number\"></label>\
            <button type=\"submit\">Save</button></form>\n    \
            <template id=\"row\"><tr><td><img src=\"icons/logo.svg\" alt=\"\"></td></tr></template>\n    \
            <video poster=\"icons/logo.svg\"></video>\n    <pre>\n\n  code</pre>\n  </main>\n  \
            <script src=\"app.js\" type=\"text/javascript\"></script>\n</body>\n</html>\n";
        let (document, diagnostics) = analyze(text);
        assert_eq!(diagnostics, [], "{diagnostics:#?}");
        let document = document.unwrap();
        assert_eq!(document.lang(), Some("de"));
        assert_eq!(document.title().as_deref(), Some("Time sheet"));
        let references: Vec<(ReferenceKind, &str, u32)> = document
            .references()
            .iter()
            .map(|r| (r.kind, r.path.as_str(), r.line))
            .collect();
        assert_eq!(
            references,
            [
                (ReferenceKind::Stylesheet, "styles.css", 8),
                (ReferenceKind::Stylesheet, "theme.css", 9),
                (ReferenceKind::Script, "lib/util.js", 10),
                (ReferenceKind::Asset, "icons/logo.svg", 16),
                (ReferenceKind::Asset, "icons/logo.svg", 17),
                (ReferenceKind::Asset, "icons/logo.svg", 20),
                (ReferenceKind::Asset, "icons/logo.svg", 21),
                (ReferenceKind::Script, "app.js", 26),
            ]
        );
    }

    #[test]
    fn title_and_lang_are_optional() {
        let (document, diagnostics) = analyze("<!DOCTYPE html><p>x</p>");
        assert_eq!(diagnostics, []);
        let document = document.unwrap();
        assert_eq!(document.lang(), None);
        assert_eq!(document.title(), None);
        assert!(document.references().is_empty());
        // An SVG title is not the document's title.
        let (document, _) =
            analyze("<!DOCTYPE html><svg><title>no</title></svg><title>yes</title>");
        assert_eq!(document.unwrap().title().as_deref(), Some("yes"));
    }

    #[test]
    fn the_document_must_be_in_no_quirks_mode() {
        check_document("<html><body><p>x</p></body></html>", &["HTML_QUIRKS_MODE"]);
        check_document(
            "<!DOCTYPE html PUBLIC \"-//W3C//DTD HTML 4.01 Transitional//EN\"><p>x",
            &["HTML_QUIRKS_MODE"],
        );
        check_document("", &["HTML_QUIRKS_MODE"]);
        check_document("<!doctype HTML><p>x", &[]);
    }

    #[test]
    fn scripts_must_be_package_files() {
        check("<script>alert(1)</script>", &["HTML_INLINE_SCRIPT"]);
        check("<SCRIPT>alert(1)</SCRIPT>", &["HTML_INLINE_SCRIPT"]);
        check("<script/x>alert(1)</script>", &["HTML_INLINE_SCRIPT"]);
        check("<script></script>", &["HTML_INLINE_SCRIPT"]);
        check(
            "<script src=\"app.js\">alert(1)</script>",
            &["HTML_INLINE_SCRIPT"],
        );
        check("<script src=\"app.js\">\n  </script>", &[]);
        check(
            "<script src=\"app.js\" type=\"module\"></script>",
            &["HTML_SCRIPT_TYPE"],
        );
        check(
            "<script src=\"app.js\" type=\"importmap\"></script>",
            &["HTML_SCRIPT_TYPE"],
        );
        check(
            "<script src=\"app.js\" type=\" TEXT/JavaScript \"></script>",
            &[],
        );
        check(
            "<script src=\"https://cdn.test/x.js\"></script>",
            &["HTML_EXTERNAL_URL"],
        );
        check(
            "<script src=\"//cdn.test/x.js\"></script>",
            &["HTML_EXTERNAL_URL"],
        );
        check(
            "<script src=\"missing.js\"></script>",
            &["HTML_MISSING_FILE"],
        );
        check(
            "<script src=\"styles.css\"></script>",
            &["HTML_WRONG_FILE_TYPE"],
        );
        check("<script src=\"./lib/../app.js\"></script>", &[]);
        check(
            "<script src=\"javascript:alert(1)\"></script>",
            &["HTML_SCRIPT_URL"],
        );
        check(
            "<script src=\"data:text/javascript,alert(1)\"></script>",
            &["HTML_DATA_URL"],
        );
        check(
            "<svg><script>alert(1)</script></svg>",
            &["HTML_FOREIGN_SCRIPT"],
        );
        check(
            "<svg><script href=\"app.js\"></script></svg>",
            &["HTML_FOREIGN_SCRIPT", "HTML_URL_NOT_ALLOWED"],
        );
        check(
            "<math><script>alert(1)</script></math>",
            &["HTML_FOREIGN_SCRIPT"],
        );
    }

    #[test]
    fn package_paths_are_plain() {
        for bad in [
            "../app.js",
            "lib/../../app.js",
            "/app.js",
            "app.js?v=1",
            "app.js#x",
            "%61pp.js",
            "lib\\util.js",
            "lib//util.js",
            "lib/",
            ".",
        ] {
            check(
                &format!("<script src=\"{bad}\"></script>"),
                &["HTML_BAD_PATH"],
            );
        }
        let traversal = "../".repeat(10_000);
        check(
            &format!("<img src=\"{traversal}icons/logo.svg\">"),
            &["HTML_BAD_PATH"],
        );
        // Whitespace, tabs and newlines are ignored the way URL parsing does.
        check("<img src=\"  icons/lo\tgo.svg\n\">", &[]);
    }

    #[test]
    fn a1_script_variants_are_refused() {
        check(
            "<img src=\"icons/logo.svg\" onerror=\"alert(1)\">",
            &["HTML_EVENT_HANDLER"],
        );
        check(
            "<img src=x onerror=alert(1)>",
            &["HTML_EVENT_HANDLER", "HTML_MISSING_FILE"],
        );
        check(
            "<svg><animate onbegin=alert(1) attributeName=x dur=1s></animate></svg>",
            &["HTML_EVENT_HANDLER"],
        );
        check("<details open ontoggle=alert(1)>", &["HTML_EVENT_HANDLER"]);
        check("<svg onload=alert(1)></svg>", &["HTML_EVENT_HANDLER"]);
        check(
            "<math><mi ONCLICK=alert(1)>x</mi></math>",
            &["HTML_EVENT_HANDLER"],
        );
        check(
            "<p OnMouseOver=\"x\" onfocus=\"y\">",
            &["HTML_EVENT_HANDLER", "HTML_EVENT_HANDLER"],
        );
        // A second <body> adds its attributes to the first.
        check("<body onload=alert(1)>", &["HTML_EVENT_HANDLER"]);
    }

    #[test]
    fn a2_script_urls_are_refused() {
        check(
            "<a href=\"jav&#x09;ascript:alert(1)\">x</a>",
            &["HTML_SCRIPT_URL"],
        );
        check(
            "<a href=\" JaVaScRiPt:alert(1)\">x</a>",
            &["HTML_SCRIPT_URL"],
        );
        check(
            "<a href=\"java\nscript:alert(1)\">x</a>",
            &["HTML_SCRIPT_URL"],
        );
        check(
            "<a href=\"&#106;avascript:alert(1)\">x</a>",
            &["HTML_SCRIPT_URL"],
        );
        check(
            "<a href=\"\u{1}javascript:alert(1)\">x</a>",
            &["HTML_SCRIPT_URL"],
        );
        check(
            "<svg><a xlink:href=\"javascript:alert(1)\"><rect/></a></svg>",
            &["HTML_SCRIPT_URL"],
        );
        check(
            "<svg><set attributeName=href to=\"javascript:alert(1)\"></set></svg>",
            &["HTML_ANIMATE_HREF", "HTML_SCRIPT_URL"],
        );
        // An animation may not set an event handler either, in any namespace.
        check(
            "<svg><set attributeName=\"onload\" to=\"alert(1)\"></set></svg>",
            &["HTML_ANIMATE_EVENT_HANDLER"],
        );
        check(
            "<svg><animate attributeName=\" OnClick \" values=\"a;b\"/></svg>",
            &["HTML_ANIMATE_EVENT_HANDLER"],
        );
        check(
            "<svg><set attributeName=\"xlink:onbegin\" to=\"x\"></set></svg>",
            &["HTML_ANIMATE_EVENT_HANDLER"],
        );
        check(
            "<svg><animate attributeName=\"xlink:href\" values=\"#a;javascript:alert(1)\"/></svg>",
            &["HTML_ANIMATE_HREF", "HTML_SCRIPT_URL"],
        );
        check(
            "<math href=\"javascript:alert(1)\">x</math>",
            &["HTML_SCRIPT_URL"],
        );
        check(
            "<button formaction=\"javascript:alert(1)\">x</button>",
            &["HTML_FORM_DESTINATION"],
        );
    }

    #[test]
    fn a3_parser_differentials_are_refused() {
        check_includes(
            "<noscript><p title=\"</noscript><img src=x onerror=alert(1)>\"></noscript>",
            &["HTML_NOSCRIPT", "HTML_EVENT_HANDLER"],
        );
        check_includes(
            "<svg><style><img src=x onerror=alert(1)></style></svg>",
            &["HTML_STYLE_ELEMENT", "HTML_EVENT_HANDLER"],
        );
        check_includes(
            "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)></style></mglyph></table></mtext></math>",
            &["HTML_STYLE_ELEMENT"],
        );
        check_includes(
            "<svg><![CDATA[</svg><img src=x onerror=alert(1)>]]></svg>",
            &["HTML_CDATA"],
        );
        check_includes(
            "<template><img src=x onerror=alert(1)></template>",
            &["HTML_EVENT_HANDLER"],
        );
        check_includes(
            "<template><template><div><svg><script>alert(1)</script></svg></div></template></template>",
            &["HTML_FOREIGN_SCRIPT"],
        );
        check_includes(
            "<!-- --!><img src=x onerror=alert(1)> -->",
            &["HTML_MALFORMED_COMMENT", "HTML_EVENT_HANDLER"],
        );
        check_includes(
            "<!--><img src=x onerror=alert(1)>-->",
            &["HTML_MALFORMED_COMMENT", "HTML_EVENT_HANDLER"],
        );
        check_includes(
            "<!---><img src=x onerror=alert(1)>-->",
            &["HTML_MALFORMED_COMMENT", "HTML_EVENT_HANDLER"],
        );
        check_includes("<!-- <!-- nested --> <p>x", &["HTML_MALFORMED_COMMENT"]);
        check_includes(
            "<!-- never closed <img src=x onerror=alert(1)>",
            &["HTML_MALFORMED_COMMENT"],
        );
        check_includes(
            "<form><math><mtext></form><form><mglyph><style></math><img src=x onerror=alert(1)>",
            &["HTML_STYLE_ELEMENT", "HTML_UNSTABLE_MARKUP"],
        );
        check_includes(
            "<math><annotation-xml encoding=\"text/html\"><style><img src=x onerror=alert(1)></style></annotation-xml></math>",
            &["HTML_ANNOTATION_XML", "HTML_STYLE_ELEMENT"],
        );
        check_includes(
            "<xmp><img src=x onerror=alert(1)></xmp>",
            &["HTML_RAW_TEXT_ELEMENT"],
        );
        check_includes(
            "<plaintext><script>alert(1)</script>",
            &["HTML_RAW_TEXT_ELEMENT"],
        );
        check_includes(
            "<noembed><img src=x onerror=alert(1)></noembed>",
            &["HTML_RAW_TEXT_ELEMENT"],
        );
        check_includes(
            "<noframes><img src=x onerror=alert(1)></noframes>",
            &["HTML_RAW_TEXT_ELEMENT"],
        );
    }

    #[test]
    fn markup_that_reparses_differently_is_refused() {
        // </form> inside a <div> leaves the first form open, so the second
        // form nests inside it; the serialization of nested forms parses
        // back into one form.
        check(
            "<form><div></form><form><input name=\"a\"></form>",
            &["HTML_UNSTABLE_MARKUP"],
        );
        // Ordinary sloppy markup reparses the same.
        check(
            "<p>a<p>b<ul><li>c<li>d</ul><table><tr><td>1<td>2</table><b><i>x</b>y</i>",
            &[],
        );
    }

    #[test]
    fn a4_inlined_files_cannot_break_out() {
        // Inline content is refused outright; package files are checked by
        // their own modules (css::check_css refuses `</style`).
        check(
            "<script>`</script><meta http-equiv=refresh content=\"0;url=https://attacker.test\">`</script>",
            &["HTML_INLINE_SCRIPT", "HTML_META"],
        );
    }

    #[test]
    fn a5_nested_browsing_contexts_are_refused() {
        check("<iframe src=\"#x\"></iframe>", &["HTML_NESTED_CONTEXT"]);
        check(
            "<iframe srcdoc=\"<script>alert(1)</script>\"></iframe>",
            &["HTML_NESTED_CONTEXT"],
        );
        check(
            "<object data=\"icons/logo.svg\"></object>",
            &["HTML_NESTED_CONTEXT", "HTML_URL_NOT_ALLOWED"],
        );
        check(
            "<embed src=\"//attacker.test/x\">",
            &["HTML_NESTED_CONTEXT", "HTML_EXTERNAL_URL"],
        );
        check("<applet code=\"x\"></applet>", &["HTML_NESTED_CONTEXT"]);
        check("<fencedframe></fencedframe>", &["HTML_NESTED_CONTEXT"]);
        check("<portal></portal>", &["HTML_NESTED_CONTEXT"]);
        check("<frame>", &["HTML_NESTED_CONTEXT"]);
        check(
            "<svg><foreignObject><iframe src=\"#x\"></iframe></foreignObject></svg>",
            &["HTML_NESTED_CONTEXT"],
        );
        let (_, diagnostics) =
            analyze("<!DOCTYPE html><frameset><frame src=\"x.html\"></frameset>");
        let codes = sorted_codes(&diagnostics);
        assert!(
            codes
                .iter()
                .filter(|code| *code == "HTML_NESTED_CONTEXT")
                .count()
                >= 2,
            "{codes:?}"
        );
    }

    #[test]
    fn a6_navigation_is_refused() {
        check(
            "<meta http-equiv=\"refresh\" content=\"0;url=https://attacker.test\">",
            &["HTML_META"],
        );
        check(
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src *\">",
            &["HTML_META"],
        );
        check("<meta name=\"description\" content=\"x\">", &["HTML_META"]);
        check(
            "<meta charset=\"utf-8\" http-equiv=\"refresh\" content=\"0\">",
            &["HTML_META"],
        );
        check(
            "<meta name=\"viewport\" content=\"width=device-width\">",
            &[],
        );
        check(
            "<base href=\"https://attacker.test/\">",
            &["HTML_BASE", "HTML_EXTERNAL_URL"],
        );
        check(
            "<base target=\"_top\">",
            &["HTML_BASE", "HTML_NAVIGATION_ATTRIBUTE"],
        );
        check(
            "<a href=\"#x\" target=\"_top\">x</a>",
            &["HTML_NAVIGATION_ATTRIBUTE"],
        );
        check(
            "<a href=\"#x\" target=\"_blank\">x</a>",
            &["HTML_NAVIGATION_ATTRIBUTE"],
        );
        check(
            "<a href=\"#x\" target=\"_parent\">x</a>",
            &["HTML_NAVIGATION_ATTRIBUTE"],
        );
        check(
            "<a href=\"#x\" download>x</a>",
            &["HTML_NAVIGATION_ATTRIBUTE"],
        );
        check(
            "<a href=\"#x\" ping=\"https://attacker.test\">x</a>",
            &["HTML_NAVIGATION_ATTRIBUTE"],
        );
        check(
            "<a href=\"https://attacker.test\">x</a>",
            &["HTML_EXTERNAL_URL"],
        );
        check("<a href=\"other.html\">x</a>", &["HTML_URL_NOT_ALLOWED"]);
        check("<a href=\"\">x</a>", &["HTML_EMPTY_URL"]);
        check("<a href=\"#\">x</a><a name=\"x\">y</a>", &[]);
        check(
            "<map name=\"m\"><area href=\"#x\"></map>",
            &["HTML_AREA_HREF"],
        );
        check("<img src=\"icons/logo.svg\" usemap=\"#m\">", &[]);
    }

    #[test]
    fn a7_forms_have_no_destination() {
        // The spec wins over catalogue case A7: a form without a destination
        // is allowed so native submit events fire; CSP form-action 'none'
        // blocks the navigation it would otherwise start.
        check("<form><input name=\"q\"><button>Go</button></form>", &[]);
        check("<form method=\"dialog\"><button>Close</button></form>", &[]);
        check(
            "<form action=\"https://attacker.test\"></form>",
            &["HTML_FORM_DESTINATION"],
        );
        check("<form action=\"\"></form>", &["HTML_FORM_DESTINATION"]);
        check(
            "<form target=\"_blank\"></form>",
            &["HTML_FORM_DESTINATION"],
        );
        check(
            "<form><button formaction=\"//attacker.test\">x</button></form>",
            &["HTML_FORM_DESTINATION"],
        );
        check(
            "<form><button formtarget=\"_top\">x</button></form>",
            &["HTML_FORM_DESTINATION"],
        );
        check(
            "<form><button formmethod=\"post\">x</button></form>",
            &["HTML_FORM_DESTINATION"],
        );
        check(
            "<form><input type=\"image\" src=\"icons/logo.svg\"></form>",
            &["HTML_INPUT_IMAGE", "HTML_URL_NOT_ALLOWED"],
        );
        check(
            "<form><input type=\" IMAGE \"></form>",
            &["HTML_INPUT_IMAGE"],
        );
    }

    #[test]
    fn a8_fetches_in_markup_are_refused() {
        check("<img src=//attacker.test>", &["HTML_EXTERNAL_URL"]);
        check("<img src=\"\\\\attacker.test\\x\">", &["HTML_EXTERNAL_URL"]);
        check("<img src=\"https:attacker.test\">", &["HTML_EXTERNAL_URL"]);
        check(
            "<img src=\"data:image/svg+xml,<svg/>\">",
            &["HTML_DATA_URL"],
        );
        check(
            "<img src=\"icons/logo.svg\" srcset=\"icons/logo.svg 2x\">",
            &["HTML_SRCSET"],
        );
        check(
            "<picture><source srcset=\"//attacker.test/a\"><img src=\"icons/logo.svg\"></picture>",
            &["HTML_SRCSET"],
        );
        check("<img src=\"notes.txt\">", &["HTML_WRONG_FILE_TYPE"]);
        check(
            "<video poster=\"//attacker.test/p.png\"></video>",
            &["HTML_EXTERNAL_URL"],
        );
        check(
            "<video src=\"icons/logo.svg\"></video>",
            &["HTML_URL_NOT_ALLOWED"],
        );
        check(
            "<video><track src=\"captions.vtt\"></video>",
            &["HTML_URL_NOT_ALLOWED"],
        );
        check(
            "<audio src=\"https://attacker.test/a.mp3\"></audio>",
            &["HTML_EXTERNAL_URL"],
        );
        for rel in [
            "preload",
            "prefetch",
            "modulepreload",
            "dns-prefetch",
            "preconnect",
            "icon",
            "manifest",
            "alternate stylesheet",
        ] {
            check(
                &format!("<link rel=\"{rel}\" href=\"//attacker.test\">"),
                &["HTML_LINK_REL", "HTML_EXTERNAL_URL"],
            );
        }
        check(
            "<link rel=\"icon\" href=\"icons/logo.svg\">",
            &["HTML_LINK_REL", "HTML_URL_NOT_ALLOWED"],
        );
        check(
            "<link rel=\"stylesheet\" href=\"//attacker.test/a.css\">",
            &["HTML_EXTERNAL_URL"],
        );
        check(
            "<link rel=\"stylesheet\" href=\"missing.css\">",
            &["HTML_MISSING_FILE"],
        );
        check(
            "<link rel=\"stylesheet\" href=\"app.js\">",
            &["HTML_WRONG_FILE_TYPE"],
        );
        check("<link rel=\"stylesheet\">", &["HTML_MISSING_HREF"]);
        check(
            "<link rel=\"stylesheet\" href=\"theme.css\" media=\"print\">",
            &["HTML_LINK_ATTRIBUTE"],
        );
        check(
            "<link rel=\"preload\" imagesrcset=\"a.png 2x\">",
            &["HTML_LINK_REL", "HTML_SRCSET"],
        );
        check(
            "<svg><image href=\"//attacker.test/x.png\"/></svg>",
            &["HTML_EXTERNAL_URL"],
        );
        check(
            "<svg><image xlink:href=\"missing.svg\"/></svg>",
            &["HTML_MISSING_FILE"],
        );
        check(
            "<svg><use href=\"//attacker.test/s.svg#x\"/></svg>",
            &["HTML_EXTERNAL_URL"],
        );
        check(
            "<svg><use href=\"icons/logo.svg#x\"/></svg>",
            &["HTML_URL_NOT_ALLOWED"],
        );
        check(
            "<svg><filter><feImage href=\"icons/logo.svg\"/></filter></svg>",
            &["HTML_URL_NOT_ALLOWED"],
        );
        check(
            "<svg><rect fill=\"url(https://attacker.test/p.svg#g)\"/></svg>",
            &["CSS_URL"],
        );
        check("<svg><rect filter=\"u\\72l(//x#f)\"/></svg>", &["CSS_URL"]);
        check(
            "<svg><animate attributeName=\"fill\" values=\"red;url(//attacker.test/#g)\"/></svg>",
            &["CSS_URL"],
        );
        check(
            "<svg><set attributeName=\"fill\" to=\"https://attacker.test/x\"/></svg>",
            &["HTML_EXTERNAL_URL"],
        );
        check(
            "<body background=\"//attacker.test/b.png\">",
            &["HTML_EXTERNAL_URL"],
        );
        check(
            "<blockquote cite=\"https://example.test\">x</blockquote>",
            &["HTML_EXTERNAL_URL"],
        );
        check(
            "<table background=\"x.png\"></table>",
            &["HTML_URL_NOT_ALLOWED"],
        );
        check_document(
            "<!DOCTYPE html><html manifest=\"x.appcache\"><p>x",
            &["HTML_URL_NOT_ALLOWED"],
        );
    }

    #[test]
    fn a9_inline_styles_are_refused() {
        check("<p style=\"color: red\">x</p>", &["HTML_INLINE_STYLE"]);
        check(
            "<svg><rect style=\"fill: url(//attacker.test)\"/></svg>",
            &["HTML_INLINE_STYLE"],
        );
        check("<style>p { color: red }</style>", &["HTML_STYLE_ELEMENT"]);
        check_document(
            "<!DOCTYPE html><head><style>@import '//attacker.test';</style></head>",
            &["HTML_STYLE_ELEMENT"],
        );
    }

    #[test]
    fn a13_clobbering_markup_is_refused() {
        check(
            "<img name=\"getElementById\" src=\"icons/logo.svg\">",
            &["HTML_DOM_CLOBBERING"],
        );
        // A form with an id and named controls is how every app finds its
        // form and reads its fields (the valid fixtures do it), so the
        // second A13 payload stays allowed: it can only clobber names in the
        // app's own document, and Studio never parses app markup.
        check(
            "<form id=\"config\"><input name=\"origin\" value=\"*\"></form>",
            &[],
        );
        check("<form name=\"cookie\"></form>", &["HTML_DOM_CLOBBERING"]);
        check(
            "<form class=\"config\"><input id=\"origin\" name=\"origin\"></form>",
            &[],
        );
    }

    #[test]
    fn templates_and_head_keep_their_meaning() {
        check(
            "<template><script src=\"app.js\"></script></template>",
            &["HTML_INERT_RESOURCE"],
        );
        check(
            "<template><link rel=\"stylesheet\" href=\"theme.css\"></template>",
            &["HTML_INERT_RESOURCE"],
        );
        check_document(
            "<!DOCTYPE html><head><template><p>x</p></template></head><body></body>",
            &["HTML_HEAD_CONTENT"],
        );
        let (_, diagnostics) = analyze("<!DOCTYPE html><head><noscript><p>x</p></noscript></head>");
        assert!(sorted_codes(&diagnostics).contains(&"HTML_NOSCRIPT".to_owned()));
    }

    #[test]
    fn lines_point_at_the_problem() {
        let text = "<!DOCTYPE html>\n<html>\n<body>\n<p>\n  <img\n    alt=\"x\"\n    onerror=\"alert(1)\"\n    src=\"icons/logo.svg\">\n</p>\n<a\nhref=\"javascript:x\">y</a>\n<iframe></iframe>\n<!-->\n</body></html>";
        let (_, diagnostics) = analyze(text);
        let mut lines: Vec<(&str, Option<u32>)> = diagnostics
            .iter()
            .map(|d| (d.code.as_str(), d.line))
            .collect();
        lines.sort();
        assert_eq!(
            lines,
            [
                ("HTML_EVENT_HANDLER", Some(7)),
                ("HTML_MALFORMED_COMMENT", Some(13)),
                ("HTML_NESTED_CONTEXT", Some(12)),
                ("HTML_SCRIPT_URL", Some(11)),
            ]
        );
    }

    #[test]
    fn every_problem_is_reported() {
        let (document, diagnostics) = analyze(&page(
            "<p style=\"x\" onclick=\"y\"><iframe></iframe><img src=\"//x\"></p><base>",
        ));
        assert!(document.is_some());
        assert_eq!(
            sorted_codes(&diagnostics),
            [
                "HTML_BASE",
                "HTML_EVENT_HANDLER",
                "HTML_EXTERNAL_URL",
                "HTML_INLINE_STYLE",
                "HTML_NESTED_CONTEXT"
            ]
        );
    }

    #[test]
    fn g2_deep_nesting_is_refused_without_overflow() {
        let deep = format!("<!DOCTYPE html>{}", "<div>".repeat(100_000));
        let (document, diagnostics) = analyze(&deep);
        assert!(document.is_none());
        assert_eq!(sorted_codes(&diagnostics), ["HTML_TOO_DEEP"]);

        // Just over the limit: parsed, and refused from the tree.
        let over = page(&format!("{}{}", "<div>".repeat(260), "</div>".repeat(260)));
        let (document, diagnostics) = analyze(&over);
        assert!(document.is_some());
        assert_eq!(sorted_codes(&diagnostics), ["HTML_TOO_DEEP"]);

        let fine = page(&format!("{}x{}", "<div>".repeat(200), "</div>".repeat(200)));
        check_document(&fine, &[]);

        // Closed siblings and implied end tags do not add up.
        check(&"<p>x".repeat(5_000), &[]);
        check(&"<li>x".repeat(5_000), &[]);
        check(&"<div>x</div>".repeat(5_000), &[]);
        check(
            &format!("<table>{}</table>", "<tr><td>x".repeat(2_000)),
            &[],
        );
        check(
            &format!("<svg>{}</svg>", "<path d=\"M0 0\"/>".repeat(5_000)),
            &[],
        );
        check(&"<b>x</b><i>y</i>".repeat(5_000), &[]);
    }

    #[test]
    fn g2_reopened_formatting_elements_are_counted() {
        // Each paragraph reopens every <b> of the ones before it: the tree
        // gets deep although no tag in the source nests.
        let reopened: String = (0..3_000)
            .map(|i| format!("<p><b class=\"c{i}\">x</p>"))
            .collect();
        let (document, diagnostics) = analyze(&page(&reopened));
        assert!(document.is_none());
        assert_eq!(sorted_codes(&diagnostics), ["HTML_TOO_DEEP"]);
        // Other unclosed wrappers nest too.
        for wrapper in [
            "<span>",
            "<b>",
            "<table><tr><td>",
            "<svg><g>",
            "<math><mrow>",
            "<select><option>",
            "<template>",
        ] {
            let (document, diagnostics) = analyze(&page(&wrapper.repeat(20_000)));
            assert!(
                document.is_none()
                    || sorted_codes(&diagnostics).contains(&"HTML_TOO_DEEP".to_owned()),
                "{wrapper}"
            );
        }
    }

    #[test]
    fn g3_large_flat_documents_are_linear() {
        // Each of these once cost time per element proportional to the size
        // of the whole document (line numbers, comment endings).
        check(&"<p class=\"a\">x <i>y</i></p>\n".repeat(40_000), &[]);
        check(&"<!-- c -->\n".repeat(50_000), &[]);
        let (_, diagnostics) = analyze(&page(&"<p style=\"a\">\n".repeat(20_000)));
        assert_eq!(diagnostics.len(), 20_000);
        assert_eq!(diagnostics.last().map(|d| d.line), Some(Some(20_009)));
    }

    #[test]
    fn g3_crowded_tags_are_refused_before_parsing() {
        let attributes: String = (0..100_000).map(|i| format!(" a{i}")).collect();
        let (document, diagnostics) = analyze(&page(&format!("<p{attributes}>x</p>")));
        assert!(document.is_none());
        assert_eq!(sorted_codes(&diagnostics), ["HTML_TOO_MANY_ATTRIBUTES"]);
        let (document, diagnostics) = analyze(&page(&format!("<p>x</p{attributes}>")));
        assert!(document.is_none());
        assert_eq!(sorted_codes(&diagnostics), ["HTML_TOO_MANY_ATTRIBUTES"]);
        let some: String = (0..100).map(|i| format!(" data-a{i}=\"{i}\"")).collect();
        check(&format!("<p{some}>x</p>"), &[]);
    }

    #[test]
    fn g3_pathological_inputs_complete() {
        let (document, _) = analyze(&page(&"&#x".repeat(100_000)));
        assert!(document.is_some());
        check(
            &format!("<svg><rect fill=\"url({}\"/></svg>", " ".repeat(100_000)),
            &["CSS_URL"],
        );
        check(
            &format!("<a href=\"#{}\">x</a>", "\u{FDFA}".repeat(1_000)),
            &[],
        );
        let (document, _) = analyze(&"<".repeat(100_000));
        assert!(document.is_some());
        let (document, _) = analyze(&"<a ".repeat(100_000));
        assert!(document.is_some());
        let (document, _) = analyze(&"<!--".repeat(100_000));
        assert!(document.is_some());
        let (document, _) = analyze(&"</".repeat(100_000));
        assert!(document.is_some());
    }

    fn render(text: &str) -> String {
        let (document, diagnostics) = analyze(text);
        assert_eq!(diagnostics, [], "{diagnostics:#?}");
        let document = document.unwrap();
        let inline = |path: &str| format!("data:test;{path}");
        let first = document.render_body(&inline);
        assert_eq!(
            first,
            document.render_body(&inline),
            "render_body must be deterministic"
        );
        first
    }

    #[test]
    fn render_body_inlines_assets_and_drops_loaded_files() {
        let body = render(&page(
            "<main class=\"app\" id=\"m\"><link rel=\"stylesheet\" href=\"theme.css\">\
             <img alt=\"a &amp; b\" src=\"icons/logo.svg\"><p>x &lt; y</p>\
             <svg><image href=\"./icons/logo.svg\"/><image xlink:href=\"icons/logo.svg\"/></svg>\
             <template><img src=\"icons/logo.svg\"></template>\
             <video poster=\"icons/logo.svg\"></video><script src=\"lib/util.js\"></script>\
             <a href=\"#top\">top</a><pre>\n\nkeep</pre><textarea>\n\nkeep</textarea></main>",
        ));
        assert!(!body.contains("<script"), "{body}");
        assert!(!body.contains("<link"), "{body}");
        assert!(!body.contains("<head"), "{body}");
        assert!(!body.contains("=\"icons/logo.svg\""), "{body}");
        assert!(!body.contains("=\"./icons/logo.svg\""), "{body}");
        assert_eq!(
            body.matches("data:test;icons/logo.svg").count(),
            5,
            "{body}"
        );
        assert!(
            body.contains("<img alt=\"a &amp; b\" src=\"data:test;icons/logo.svg\">"),
            "{body}"
        );
        assert!(
            body.contains("<image href=\"data:test;icons/logo.svg\"></image>"),
            "{body}"
        );
        assert!(
            body.contains("<image xlink:href=\"data:test;icons/logo.svg\"></image>"),
            "{body}"
        );
        assert!(
            body.contains("<template><img src=\"data:test;icons/logo.svg\"></template>"),
            "{body}"
        );
        assert!(body.contains("<p>x &lt; y</p>"), "{body}");
        assert!(body.contains("<a href=\"#top\">top</a>"), "{body}");
        assert!(body.contains("<pre>\n\nkeep</pre>"), "{body}");
        assert!(body.contains("<textarea>\n\nkeep</textarea>"), "{body}");
        assert!(
            body.starts_with("\n<main class=\"app\" id=\"m\">"),
            "{body}"
        );
    }

    #[test]
    fn render_body_escapes_inlined_values() {
        let (document, _) = analyze(&page("<img src=\"icons/logo.svg\">"));
        let body = document
            .unwrap()
            .render_body(&|_: &str| "\"><script>alert(1)</script>".to_owned());
        assert!(
            body.contains("src=\"&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;\""),
            "{body}"
        );
    }

    #[test]
    fn render_body_output_is_stable_when_parsed_again() {
        let body = render(&page(
            "<p>a<p>b<table><tr><td>1</table><ul><li>x<li>y</ul><b><i>z</b>w</i>",
        ));
        let again = Html::parse_document(&format!("<!DOCTYPE html><body>{body}"));
        let reparsed = again
            .root_element()
            .children()
            .filter_map(ElementRef::wrap)
            .find(|child| child.value().name() == "body")
            .unwrap()
            .inner_html();
        assert_eq!(reparsed, body);
    }

    #[test]
    fn serialization_matches_html5ever() {
        // The serializer follows the same algorithm as html5ever's, so on a
        // document without a leading newline in <pre> both agree byte for
        // byte (noscript aside, which apps may not use).
        let text = page(
            "<main id=\"m\" data-x='a\"b&amp;c&nbsp;<>'>a &amp; b &lt; c &gt; d\u{A0}e \u{A9}\
             <!-- note --><br><img src=\"icons/logo.svg\" alt=\"\"><input disabled>\
             <svg viewBox=\"0 0 1 1\" xmlns:xlink=\"http://www.w3.org/1999/xlink\"><a xlink:href=\"#x\" xml:lang=\"en\">\
             <foreignObject><p>x</p></foreignObject></a><path d=\"M0 0\"/></svg>\
             <math><mi>x</mi></math><template><p>t</p><td>c</td></template>\
             <table><tr><td>1</td></tr></table><pre>x\ny</pre><textarea>a&lt;b</textarea></main>",
        );
        let html = Html::parse_document(&text);
        assert_eq!(
            serialize(html.root_element(), true),
            html.root_element().html()
        );
        assert_eq!(
            serialize(html.root_element(), false),
            html.root_element().inner_html()
        );
    }

    #[test]
    fn urls_are_classified_like_a_browser() {
        assert_eq!(classify_url(""), UrlKind::Empty);
        assert_eq!(classify_url(" \t\n"), UrlKind::Empty);
        assert_eq!(classify_url("#x"), UrlKind::Fragment);
        assert_eq!(classify_url("  #x "), UrlKind::Fragment);
        assert_eq!(classify_url("JAVASCRIPT:x"), UrlKind::Script);
        assert_eq!(classify_url("java\tscript:x"), UrlKind::Script);
        assert_eq!(classify_url("data:,x"), UrlKind::Data);
        assert_eq!(classify_url("mailto:a@b.test"), UrlKind::External);
        assert_eq!(classify_url("//host"), UrlKind::External);
        assert_eq!(classify_url("\\\\host\\x"), UrlKind::External);
        assert_eq!(classify_url("/\\host"), UrlKind::External);
        assert_eq!(classify_url("http://[::1"), UrlKind::External);
        assert_eq!(classify_url("a.svg"), UrlKind::Relative);
        assert_eq!(classify_url("../a.svg"), UrlKind::Relative);
        assert_eq!(
            package_path("", "./a/./b/../c.svg"),
            Ok("a/c.svg".to_owned())
        );
        assert_eq!(package_path("sub/", "../c.svg"), Ok("c.svg".to_owned()));
        assert!(package_path("", "../c.svg").is_err());
    }
}
