//! Revisions are content addresses: any single-byte change of any source byte
//! changes the revision (or makes the package invalid), and an unchanged package
//! keeps its revision on every run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use sasha_package::source::PackageSource;
use sasha_package::validate::{validate_dir, validate_source};

fn fixture(id: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/packages/valid")
        .join(id)
}

fn load(id: &str) -> PackageSource {
    let mut diagnostics = sasha_package::Diagnostics::new();
    let source = sasha_package::source::read_package(&fixture(id), &mut diagnostics);
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    source
}

fn revision(id: &str, source: PackageSource) -> Option<String> {
    validate_source(id, source)
        .package
        .map(|package| package.resource.revision)
}

#[test]
fn unchanged_packages_keep_their_revision() {
    for id in ["hello", "expense-log", "brand-card"] {
        let first = validate_dir(&fixture(id)).package.expect("valid").resource;
        let second = validate_dir(&fixture(id)).package.expect("valid").resource;
        assert_eq!(first, second, "{id}: same input, same bytes");
        assert_eq!(
            revision(id, load(id)).as_deref(),
            Some(first.revision.as_str())
        );
    }
}

fn single_byte_changes(id: &'static str) -> impl Strategy<Value = (String, usize, u8)> {
    let files: BTreeMap<String, String> = load(id).files;
    let sizes: Vec<(String, usize)> = files
        .iter()
        .map(|(path, text)| (path.clone(), text.len()))
        .collect();
    (0..sizes.len(), any::<prop::sample::Index>(), any::<u8>()).prop_map(move |(file, at, byte)| {
        let (path, len) = &sizes[file];
        (path.clone(), at.index(*len), byte)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn any_single_byte_change_changes_the_revision(change in single_byte_changes("hello")) {
        let (path, at, byte) = change;
        let original = load("hello");
        let before = revision("hello", original.clone()).expect("valid");
        let mut bytes = original.files[&path].clone().into_bytes();
        prop_assume!(bytes[at] != byte);
        bytes[at] = byte;
        // A change that breaks UTF-8 is refused when the file is read; in memory
        // the package simply cannot hold it.
        let Ok(text) = String::from_utf8(bytes) else { return Ok(()) };
        let mut changed = original;
        changed.files.insert(path, text);
        if let Some(after) = revision("hello", changed) {
            prop_assert_ne!(after, before);
        }
    }

    /// The same for the bytes of binary assets: an accepted change of one byte
    /// of an image or font is a new revision (its `data:` URL and the source
    /// digest both change); a change the asset rules refuse makes no revision.
    #[test]
    fn any_single_byte_change_of_an_asset_changes_the_revision(
        file in 0usize..6,
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let original = load("brand-card");
        let before = revision("brand-card", original.clone()).expect("valid");
        let path = original.binary.keys().nth(file).expect("six assets").clone();
        let mut bytes = original.binary[&path].clone();
        let at = at.index(bytes.len());
        prop_assume!(bytes[at] != byte);
        bytes[at] = byte;
        let mut changed = original;
        changed.binary.insert(path, bytes);
        if let Some(after) = revision("brand-card", changed) {
            prop_assert_ne!(after, before);
        }
    }
}
