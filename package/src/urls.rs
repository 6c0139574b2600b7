//! What a URL in a package document names: its kind after the clean-up
//! WHATWG URL parsing does (empty, a fragment, `javascript:`, `data:`,
//! external, or relative to the package) and, for a relative one, the
//! package path it resolves to. HTML attributes, SVG and CSS `url()` all
//! judge their references by these rules.
//!
//! What it must never do: call a URL that leaves the package's origin
//! relative, or resolve a path that leaves the package (`..` past its root).

/// The base that relative URLs are resolved against to find out whether they
/// stay inside the package: anything that leaves this origin is external.
const PACKAGE_BASE: &str = "https://package.invalid/";

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
pub(crate) fn package_path(base: &str, normalized: &str) -> Result<String, &'static str> {
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
