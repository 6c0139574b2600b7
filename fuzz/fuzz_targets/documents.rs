//! The document converters from raw bytes, in process (where a crash shows
//! as the crash it is; studio-core runs them in a confined child): the first
//! byte picks the type (.txt .md .csv .html .pdf .docx), the rest is the
//! file. A conversion either refuses with a reason or gives Markdown within
//! the stored bound.
//!
//! Must never write a file: `convert` is pure.

#![no_main]

use libfuzzer_sys::fuzz_target;
use studio_uploads::MAX_MARKDOWN_BYTES;
use studio_uploads::convert::convert;

const TYPES: [&str; 6] = ["txt", "md", "csv", "html", "pdf", "docx"];

fuzz_target!(
    init: {
        // libFuzzer's hook aborts on every panic, even one `convert` catches
        // (pdf-extract unwraps on broken documents, and a caught panic is its
        // designed refusal). A silent hook leaves only panics that escape
        // `convert` to end the run, through libfuzzer-sys's own catch.
        std::panic::set_hook(Box::new(|_| {}));
    },
    |input: &[u8]| {
        let Some((selector, data)) = input.split_first() else {
            return;
        };
        let extension = TYPES[usize::from(*selector) % TYPES.len()];
        if let Ok(markdown) = convert(Some(extension), data) {
            // The cut keeps whole lines and adds a one-line note.
            assert!(
                markdown.len() <= MAX_MARKDOWN_BYTES + 200,
                "{}",
                markdown.len()
            );
        }
    }
);
