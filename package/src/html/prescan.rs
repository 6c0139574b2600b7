//! A small, linear pre-scan of the source: start tags with the offsets of
//! their attributes (for line numbers), the problems only the text shows
//! (CDATA sections, comments that parsers end in different places), and an
//! estimate of how deep html5ever's stack of open elements will get.
//!
//! It must stay one forward pass over the bytes, with no recursion: it runs on
//! markup before any bound on it has been checked.
//!
//! Hand-written rather than html5ever's own tokenizer (0.40.1, the version
//! scraper parses with), which was measured against [`scan`] and does not do
//! this job: it is itself quadratic in a tag's attributes (each is compared
//! with every one before it, the very cost [`MAX_ATTRIBUTES`] keeps from the
//! parser): one tag with 100,000 attributes (690 KB) took it 2.6 s, against
//! 9 ms here, and one with 50,000 took 0.67 s against 4 ms. And it reports
//! only the line a token ends on, while the diagnostics need the `<` of a
//! tag and each attribute's own offset. (On an ordinary 1 MB document the two
//! are alike: 21 ms against 15 ms.)

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
                let attribute =
                    String::from_utf8_lossy(&bytes[attribute_start..index]).to_ascii_lowercase();
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
                            let Some(close) = bytes[value_start..].iter().position(|&b| b == quote)
                            else {
                                return bytes.len();
                            };
                            value =
                                String::from_utf8_lossy(&bytes[value_start..value_start + close])
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
                            value =
                                String::from_utf8_lossy(&bytes[value_start..index]).into_owned();
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
    "a", "b", "big", "code", "em", "font", "i", "nobr", "s", "small", "strike", "strong", "tt", "u",
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
                && attributes
                    .iter()
                    .any(|(attribute, _)| matches!(attribute.as_str(), "color" | "face" | "size"));
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
        let Some(position) = (start..self.formatting.len()).rev().find(
            |&index| matches!(&self.formatting[index], Formatting::Element(n, _, _) if n == name),
        ) else {
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
