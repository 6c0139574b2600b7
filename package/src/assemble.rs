//! Assembly: one validated package becomes one UTF-8 HTML document, the MCP
//! Apps resource, with a CSP whose script and style sources are the exact hashes
//! of what was emitted, and a revision that is the hash of everything a host
//! receives. Same input, same bytes, on any machine.
//!
//! Only called on packages without diagnostics: everything inlined here has
//! already been checked not to break out of its element.

use base64::Engine as _;
use sasha_contract::html::{escape_attribute, escape_text};
use serde::Serialize;
use sha2::{Digest as _, Sha256};

use crate::asset::AssetKind;
use crate::css;
use crate::html::{HtmlDocument, ReferenceKind};
use crate::manifest::{Manifest, Theme};
use crate::source::PackageSource;

/// The MIME type of every MCP Apps resource.
pub const MIME_TYPE: &str = "text/html;profile=mcp-app";
/// Most bytes an assembled document may have, runtime included.
pub const MAX_ASSEMBLED_BYTES: usize = 1024 * 1024;

const RUNTIME: &str = include_str!("../runtime/sasha-runtime.js");
/// The realm lockdown (`runtime/sasha-lockdown.js`): the first script of every
/// resource, its own `<script>` element before the facade, so it runs before
/// anything else can capture or replace a native (see the file's header).
pub const LOCKDOWN: &str = include_str!("../runtime/sasha-lockdown.js");
const BASELINE_CSS: &str = include_str!("../runtime/baseline.css");
const TIMESHEET_THEME_CSS: &str = include_str!("../runtime/sasha-timesheet-v1.css");

/// One immutable, assembled resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Resource {
    pub app_id: String,
    /// sha256 hex of the canonical resource bytes (see [`revision_of`]).
    pub revision: String,
    /// `ui://sasha/apps/<id>/revisions/<revision>`.
    pub uri: String,
    pub mime_type: String,
    pub html: String,
    /// The policy also emitted in the document's `<meta http-equiv>`.
    pub csp: String,
    /// `_meta.ui` of the resource: declared CSP domains (none), permissions
    /// (none), and `sasha.sourceDigest`.
    pub meta: serde_json::Value,
}

/// `ui://sasha/apps/<id>/revisions/<revision>`.
pub fn resource_uri(app_id: &str, revision: &str) -> String {
    format!("ui://sasha/apps/{app_id}/revisions/{revision}")
}

/// The revision: sha256 over a versioned, NUL-separated concatenation of the
/// MIME type, the CSP, the canonical JSON of `_meta.ui`, and the HTML.
pub fn revision_of(mime_type: &str, csp: &str, meta: &serde_json::Value, html: &str) -> String {
    let mut hasher = Sha256::new();
    for part in ["sasha-resource-v1", mime_type, csp, &meta.to_string(), html] {
        hasher.update(part.as_bytes());
        hasher.update([0u8]);
    }
    hex::encode(hasher.finalize())
}

fn sha256_source(text: &str) -> String {
    format!(
        "'sha256-{}'",
        base64::engine::general_purpose::STANDARD.encode(Sha256::digest(text.as_bytes()))
    )
}

/// The `data:` URI of a package asset (base64: only `A–Z a–z 0–9 + / =`
/// after the comma, so it is safe in an attribute, a `srcset` and a quoted
/// CSS `url()`).
fn data_uri(path: &str, bytes: &[u8]) -> String {
    let mime = match AssetKind::of_path(path) {
        Some(kind) => kind.mime_type(),
        None => match crate::source::extension_of(path) {
            Some("svg") => "image/svg+xml",
            Some("json") => "application/json",
            Some("css") => "text/css",
            _ => "text/plain",
        },
    };
    format!(
        "data:{mime};base64,{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

/// The text as the browser's input stream will hold it: no byte-order mark, and
/// CR LF and lone CR turned into LF. The CSP hashes the element's text after
/// that preprocessing, so hashing anything else would block the script.
pub fn normalize_newlines(text: &str) -> String {
    text.strip_prefix('\u{FEFF}')
        .unwrap_or(text)
        .replace("\r\n", "\n")
        .replace('\r', "\n")
}

/// Why assembly failed (the only refusal left after validation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooLarge {
    pub bytes: usize,
}

/// Assembles the resource of a validated package.
pub fn assemble(
    manifest: &Manifest,
    source: &PackageSource,
    document: &HtmlDocument,
) -> Result<Resource, TooLarge> {
    let text_of = |path: &str| {
        normalize_newlines(
            source
                .files
                .get(path)
                .map(String::as_str)
                .unwrap_or_default(),
        )
    };
    // A binary asset's exact bytes; an SVG's text as the other text files.
    let inline = |path: &str| match source.binary.get(path) {
        Some(bytes) => data_uri(path, bytes),
        None => data_uri(path, text_of(path).as_bytes()),
    };
    let paths = source.paths();
    let mut styles = vec![BASELINE_CSS.to_owned()];
    if manifest.theme == Theme::SashaTimesheetV1 {
        styles.push(TIMESHEET_THEME_CSS.to_owned());
    }
    let mut scripts = Vec::new();
    for reference in document.references() {
        match reference.kind {
            // The `url()`s of package assets become `data:` URLs on the
            // stylesheet as written (the ranges are the validator's), then
            // newlines are normalised like every inlined text.
            ReferenceKind::Stylesheet => {
                let text = source
                    .files
                    .get(&reference.path)
                    .map(String::as_str)
                    .unwrap_or_default();
                styles.push(normalize_newlines(&css::inline_urls(
                    &reference.path,
                    text,
                    &paths,
                    &inline,
                )));
            }
            ReferenceKind::Script => scripts.push(text_of(&reference.path)),
            ReferenceKind::Asset => {}
        }
    }
    let body = document.render_body(&inline);
    let runtime = runtime_script(manifest);

    let script_hashes: Vec<String> = [LOCKDOWN, runtime.as_str()]
        .into_iter()
        .chain(scripts.iter().map(String::as_str))
        .map(sha256_source)
        .collect();
    let style_hashes: Vec<String> = styles.iter().map(|style| sha256_source(style)).collect();
    let csp = format!(
        "default-src 'none'; script-src {}; style-src {}; img-src data:; font-src data:; media-src data:; \
         connect-src 'none'; frame-src 'none'; child-src 'none'; worker-src 'none'; object-src 'none'; \
         manifest-src 'none'; base-uri 'none'; form-action 'none'; webrtc 'block'; \
         require-trusted-types-for 'script'",
        dedup(script_hashes).join(" "),
        dedup(style_hashes).join(" "),
    );

    let lang = document.lang().unwrap_or("en");
    let title = document.title().unwrap_or_else(|| manifest.name.clone());
    let mut html = String::new();
    html.push_str("<!doctype html>\n");
    html.push_str(&format!(
        "<html lang=\"{}\">\n<head>\n",
        escape_attribute(lang)
    ));
    html.push_str("<meta charset=\"utf-8\">\n");
    html.push_str(&format!(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"{}\">\n",
        escape_attribute(&csp)
    ));
    // Off for good: a document may turn DNS prefetching off, never back on.
    html.push_str("<meta http-equiv=\"x-dns-prefetch-control\" content=\"off\">\n");
    html.push_str(&format!("<script>{LOCKDOWN}</script>\n"));
    html.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    html.push_str(&format!("<title>{}</title>\n", escape_text(&title)));
    for style in &styles {
        html.push_str(&format!("<style>{style}</style>\n"));
    }
    html.push_str(&format!("<script>{runtime}</script>\n</head>\n<body>\n"));
    html.push_str(&body);
    html.push('\n');
    for script in &scripts {
        html.push_str(&format!("<script>{script}</script>\n"));
    }
    html.push_str("</body>\n</html>\n");
    if html.len() > MAX_ASSEMBLED_BYTES {
        return Err(TooLarge { bytes: html.len() });
    }

    let meta = serde_json::json!({
        "csp": {"connectDomains": [], "resourceDomains": [], "frameDomains": [], "baseUriDomains": []},
        "permissions": {},
        "prefersBorder": false,
        "sasha": {"sourceDigest": source_digest(source)},
    });
    let revision = revision_of(MIME_TYPE, &csp, &meta, &html);
    Ok(Resource {
        app_id: manifest.id.clone(),
        uri: resource_uri(&manifest.id, &revision),
        revision,
        mime_type: MIME_TYPE.to_owned(),
        html,
        csp,
        meta,
    })
}

/// The inline runtime: one line of configuration, the app's identity for the
/// facade (`window.__SASHA_APP__ = {"id", "version", "capabilities"}`, read and
/// deleted by the runtime before any app script runs), then the pinned runtime.
/// The JSON escapes `<`, `>` and `&`, so no manifest text can end the script
/// element or open a comment in it.
pub fn runtime_script(manifest: &Manifest) -> String {
    let config = serde_json::json!({
        "id": manifest.id,
        "version": manifest.version,
        "capabilities": manifest.capabilities,
    })
    .to_string()
    .replace('<', "\\u003c")
    .replace('>', "\\u003e")
    .replace('&', "\\u0026");
    format!("window.__SASHA_APP__ = {config};\n{RUNTIME}")
}

/// sha256 over every source file, text and binary (path and bytes, in path
/// order). It is part of the hashed metadata, so any change to any source byte
/// (the brief, an action, a migration, an asset nothing references, or markup
/// the serializer would normalise away) makes a new revision.
pub fn source_digest(source: &PackageSource) -> String {
    let mut hasher = Sha256::new();
    for (path, bytes) in source.entries() {
        hasher.update((path.len() as u64).to_le_bytes());
        hasher.update(path.as_bytes());
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    }
    hex::encode(hasher.finalize())
}

fn dedup(mut items: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    items.retain(|item| seen.insert(item.clone()));
    items
}
