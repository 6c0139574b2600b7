//! The one validator: discovery, `sasha app check`, `checkApp` and every source
//! tool write call [`validate_dir`] (or [`validate_source`] on files already in
//! memory), so a package is judged the same way everywhere.

use std::collections::BTreeSet;
use std::path::Path;

use serde::Serialize;

use crate::actions::{self, CompiledAction};
use crate::assemble::{self, Resource};
use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::html::{self, ReferenceKind};
use crate::manifest::{self, DataCapability, Manifest};
use crate::source::{self, PackageSource};
use crate::sql::{self, DataContract};
use crate::{asset, css, js, svg};

/// Files every package must have.
pub const REQUIRED_FILES: [&str; 4] = ["APP.md", "index.html", "styles.css", "app.js"];

/// A package that passed every rule, with everything derived from it.
#[derive(Debug, Clone)]
pub struct Package {
    pub manifest: Manifest,
    /// The Markdown maintenance brief after the front matter.
    pub brief: String,
    pub data: Option<DataContract>,
    pub actions: Vec<CompiledAction>,
    pub resource: Resource,
}

/// The outcome of validating one package.
#[derive(Debug, Clone)]
pub struct Validation {
    pub diagnostics: Vec<Diagnostic>,
    pub package: Option<Package>,
}

/// What `sasha app check` and `checkApp` print: `{ok, revision, diagnostics}`.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub ok: bool,
    pub revision: Option<String>,
    pub diagnostics: Vec<Diagnostic>,
}

impl Validation {
    pub fn status(&self) -> Status {
        Status {
            ok: self.package.is_some(),
            revision: self.package.as_ref().map(|p| p.resource.revision.clone()),
            diagnostics: self.diagnostics.clone(),
        }
    }
}

/// Longest MCP tool name the platform will publish (the MCP specification's
/// bound for tool names).
pub const MAX_TOOL_NAME_CHARS: usize = 128;

/// Every table becomes `app__<app>__<table>__aggregate` (the longest of its six
/// tools) and every action `app__<app>__<action>`; refuse names that would not
/// fit, rather than publish tools some clients reject.
fn check_mcp_name_lengths(manifest: &Manifest, diagnostics: &mut Diagnostics) {
    let app = manifest.id.replace('-', "_");
    for table in manifest.tables.keys() {
        let name = format!("app__{app}__{table}__aggregate");
        if name.len() > MAX_TOOL_NAME_CHARS {
            diagnostics.push(
                "APP.md",
                None,
                "MCP_NAME_TOO_LONG",
                format!(
                    "table {table} would publish the MCP tool {name} ({} characters; at most {MAX_TOOL_NAME_CHARS}); shorten the table name or the app id",
                    name.len()
                ),
            );
        }
    }
}

/// Stack for a validation. The parsers recurse over nesting; every input is
/// bounded well below what this stack holds, whatever thread the caller is on
/// (a Tokio blocking thread has only 2 MiB).
const VALIDATION_STACK_BYTES: usize = 64 * 1024 * 1024;

/// Runs `work` on a thread with [`VALIDATION_STACK_BYTES`] of stack.
fn on_validation_stack<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| {
        match std::thread::Builder::new()
            .name("sasha-validate".into())
            .stack_size(VALIDATION_STACK_BYTES)
            .spawn_scoped(scope, work)
        {
            Ok(handle) => match handle.join() {
                Ok(value) => value,
                Err(panic) => std::panic::resume_unwind(panic),
            },
            Err(error) => panic!("cannot start a validation thread: {error}"),
        }
    })
}

/// Validates the package in `dir`, whose folder name is its expected id.
pub fn validate_dir(dir: &Path) -> Validation {
    on_validation_stack(|| validate_dir_here(dir))
}

fn validate_dir_here(dir: &Path) -> Validation {
    let mut diagnostics = Diagnostics::new();
    let source = source::read_package(dir, &mut diagnostics);
    let folder = dir
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or_default()
        .to_owned();
    validate_with(&folder, source, diagnostics)
}

/// Validates files already in memory for the package folder `folder`.
pub fn validate_source(folder: &str, source: PackageSource) -> Validation {
    on_validation_stack(|| validate_with(folder, source, Diagnostics::new()))
}

fn validate_with(folder: &str, source: PackageSource, mut diagnostics: Diagnostics) -> Validation {
    for required in REQUIRED_FILES {
        if !source.files.contains_key(required) {
            diagnostics.push(
                required,
                None,
                "PACKAGE_MISSING_FILE",
                format!("every package needs {required}"),
            );
        }
    }
    let parsed = source
        .files
        .get("APP.md")
        .and_then(|text| manifest::parse_app_md(text, folder, &mut diagnostics));

    // Every file, text and binary: what references may name.
    let paths: BTreeSet<String> = source.paths();
    for (path, text) in &source.files {
        match path.rsplit_once('.').map(|(_, extension)| extension) {
            Some("css") => css::check_css(path, text, &paths, &mut diagnostics),
            Some("js") => js::check_js(path, text, &mut diagnostics),
            Some("svg") => svg::check_svg(path, text, &mut diagnostics),
            _ => {}
        }
    }
    for (path, bytes) in &source.binary {
        asset::check_asset(path, bytes, &mut diagnostics);
    }
    let document = source
        .files
        .get("index.html")
        .and_then(|text| html::analyze_html("index.html", text, &paths, &mut diagnostics));
    if let Some(document) = &document {
        for (required, kind, element) in [
            (
                "styles.css",
                ReferenceKind::Stylesheet,
                "<link rel=\"stylesheet\" href=\"styles.css\">",
            ),
            (
                "app.js",
                ReferenceKind::Script,
                "<script src=\"app.js\"></script>",
            ),
        ] {
            let referenced = document
                .references()
                .iter()
                .any(|reference| reference.kind == kind && reference.path == required);
            if source.files.contains_key(required) && !referenced {
                diagnostics.push(
                    "index.html",
                    None,
                    "HTML_MISSING_REFERENCE",
                    format!("index.html must load {required} with {element}"),
                );
            }
        }
    }

    let (data, compiled) = match &parsed {
        Some((manifest, _)) => {
            let data = sql::check_data(manifest, &source.files, &mut diagnostics);
            let mut action_diagnostics = Diagnostics::new();
            let compiled = actions::compile_actions(
                manifest,
                &source.files,
                data.as_ref(),
                &mut action_diagnostics,
            );
            // When the data declarations themselves were refused, "no data
            // contract" on every action only repeats that refusal.
            let data_refused = data.is_none() && manifest.capabilities.data != DataCapability::None;
            for diagnostic in action_diagnostics.into_sorted() {
                if !(data_refused && diagnostic.code == "ACTION_NO_DATA") {
                    diagnostics.push(
                        &diagnostic.file,
                        diagnostic.line,
                        &diagnostic.code,
                        diagnostic.reason,
                    );
                }
            }
            (data, compiled)
        }
        None => (None, Vec::new()),
    };

    if let Some((manifest, _)) = &parsed {
        check_mcp_name_lengths(manifest, &mut diagnostics);
    }

    let package = match (parsed, document) {
        (Some((manifest, brief)), Some(document)) if diagnostics.is_empty() => {
            match assemble::assemble(&manifest, &source, &document) {
                Ok(resource) => Some(Package {
                    manifest,
                    brief,
                    data,
                    actions: compiled,
                    resource,
                }),
                Err(too_large) => {
                    diagnostics.push(
                        "index.html",
                        None,
                        "RESOURCE_TOO_LARGE",
                        format!(
                            "the assembled app is {} bytes; the limit is {} bytes including the Sasha runtime",
                            too_large.bytes,
                            assemble::MAX_ASSEMBLED_BYTES
                        ),
                    );
                    None
                }
            }
        }
        _ => None,
    };
    Validation {
        diagnostics: diagnostics.into_sorted(),
        package,
    }
}
