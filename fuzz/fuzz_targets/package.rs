//! The package validator from raw bytes: one file of a valid package (chosen
//! by the first byte: the manifest, the HTML, CSS, JS, an SVG, a migration or
//! an action) is replaced by the rest of the input, and the whole package is
//! validated as Studio would. It must answer with diagnostics, never panic,
//! and a package it accepts must assemble into a resource.
//!
//! Must never read or write anything outside the input.

#![no_main]

use std::path::Path;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sasha_package::Diagnostics;
use sasha_package::source::{PackageSource, read_package};
use sasha_package::validate::validate_source;

/// The expense-log fixture, read once by the validator's own reader.
fn base() -> &'static PackageSource {
    static BASE: OnceLock<PackageSource> = OnceLock::new();
    BASE.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/packages/valid/expense-log");
        let mut diagnostics = Diagnostics::new();
        let source = read_package(&dir, &mut diagnostics);
        assert!(diagnostics.is_empty(), "the fixture reads cleanly");
        source
    })
}

fuzz_target!(|input: &[u8]| {
    let Some((selector, content)) = input.split_first() else {
        return;
    };
    let mut source = base().clone();
    let paths: Vec<String> = source.files.keys().cloned().collect();
    // One more slot: an extra SVG asset, which the base package lacks.
    let slot = usize::from(*selector) % (paths.len() + 1);
    let path = paths
        .get(slot)
        .cloned()
        .unwrap_or_else(|| "assets/extra.svg".to_owned());
    let Ok(text) = std::str::from_utf8(content) else {
        return;
    };
    source.files.insert(path, text.to_owned());
    let validation = validate_source("expense-log", source);
    if let Some(package) = &validation.package {
        assert!(package.resource.html.starts_with("<!doctype html>"));
        assert_eq!(package.resource.revision.len(), 64);
    }
});
