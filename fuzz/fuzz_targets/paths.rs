//! Path and id checks from arbitrary text: a source path the source tools
//! accept has only plain, non-dot segments and no absolute, home or
//! backslash form; an app id that passes is lowercase kebab-case; an upload's
//! stored name is always one the safe-name rule would read back.
//!
//! Must never touch a file.

#![no_main]

use libfuzzer_sys::fuzz_target;
use sasha_package::manifest::is_kebab_id;
use studio_core::source::check_path;
use studio_core::uploads::names::{display_name, is_document_name, safe_stem, split_extension};

fuzz_target!(|input: &[u8]| {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    if let Ok(segments) = check_path(text) {
        assert!(!text.starts_with('/') && !text.starts_with('~') && !text.contains('\\'));
        for segment in segments {
            assert!(
                !segment.is_empty() && segment != "." && segment != "..",
                "{text:?}"
            );
        }
    }
    if is_kebab_id(text) {
        assert!(
            text.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        );
        assert!(!text.starts_with('-') && !text.ends_with('-') && !text.contains("--"));
    }
    let shown = display_name(text);
    assert!(!shown.contains('/') && !shown.contains('\\'), "{shown:?}");
    let (stem, _) = split_extension(&shown);
    let stored = format!("{}.md", safe_stem(stem));
    assert!(is_document_name(&stored), "{text:?} became {stored:?}");
});
