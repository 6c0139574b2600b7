//! Each format of a package on its own, from raw bytes, through the
//! validator's own checks (`sasha_package`): the first byte picks the
//! manifest (`APP.md` front matter), HTML, CSS, JS, SVG, an action's YAML
//! or a migration's SQL, and the rest replaces that file of the expense-log
//! fixture. Every input must be answered with diagnostics, never a panic,
//! and every diagnostic about the replaced file must point at a line the
//! file has. The `package` target validates whole packages (far fewer
//! executions per second); this one reaches each format's parser directly.
//!
//! Must never read or write anything but the fixture, once.

#![no_main]

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sasha_package::Diagnostics;
use sasha_package::actions::compile_actions;
use sasha_package::css::check_css;
use sasha_package::html::analyze_html;
use sasha_package::js::check_js;
use sasha_package::manifest::{Manifest, parse_app_md};
use sasha_package::source::{PackageSource, read_package};
use sasha_package::sql::{DataContract, check_data};
use sasha_package::svg::check_svg;

const FOLDER: &str = "expense-log";
const ACTION: &str = "actions/add-expense.action.yaml";
const MIGRATION: &str = "migrations/002-notes-and-index.sql";

/// The fixture, its manifest and its data contract, read once.
fn base() -> &'static (PackageSource, Manifest, DataContract) {
    static BASE: OnceLock<(PackageSource, Manifest, DataContract)> = OnceLock::new();
    BASE.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/packages/valid/expense-log");
        let mut diagnostics = Diagnostics::new();
        let source = read_package(&dir, &mut diagnostics);
        let (manifest, _) = parse_app_md(&source.files["APP.md"], FOLDER, &mut diagnostics)
            .expect("the fixture's manifest");
        let contract =
            check_data(&manifest, &source.files, &mut diagnostics).expect("the fixture's data");
        assert!(diagnostics.is_empty(), "the fixture is valid");
        (source, manifest, contract)
    })
}

fuzz_target!(|input: &[u8]| {
    let Some((selector, content)) = input.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(content) else {
        return;
    };
    let (source, manifest, contract) = base();
    let names: BTreeSet<String> = source.files.keys().cloned().collect();
    let mut diagnostics = Diagnostics::new();
    let file = match selector % 7 {
        0 => {
            parse_app_md(text, FOLDER, &mut diagnostics);
            "APP.md"
        }
        1 => {
            analyze_html("index.html", text, &names, &mut diagnostics);
            "index.html"
        }
        2 => {
            check_css("styles.css", text, &names, &mut diagnostics);
            "styles.css"
        }
        3 => {
            check_js("app.js", text, &mut diagnostics);
            "app.js"
        }
        4 => {
            check_svg("assets/icon.svg", text, &mut diagnostics);
            "assets/icon.svg"
        }
        5 => {
            let mut files = source.files.clone();
            files.insert(ACTION.to_owned(), text.to_owned());
            compile_actions(manifest, &files, Some(contract), &mut diagnostics);
            ACTION
        }
        _ => {
            let mut files = source.files.clone();
            files.insert(MIGRATION.to_owned(), text.to_owned());
            check_data(manifest, &files, &mut diagnostics);
            MIGRATION
        }
    };
    let lines = u32::try_from(text.lines().count()).unwrap_or(u32::MAX);
    for diagnostic in diagnostics.iter().filter(|d| d.file == file) {
        if let Some(line) = diagnostic.line {
            assert!(
                (1..=lines.saturating_add(1)).contains(&line),
                "{file}: line {line} of a {lines}-line file: {diagnostic:?}"
            );
        }
    }
});
