//! Path and id checks from arbitrary text (source paths, app ids, upload
//! names), against the model in `studio_core::oracle`, which the property
//! tests in the test command also drive.
//!
//! Must never touch a file.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    if let Ok(text) = std::str::from_utf8(input) {
        studio_core::oracle::check_paths(text);
    }
});
