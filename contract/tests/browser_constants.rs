//! The browser code states what Rust decides, generated from
//! `sasha_contract::browser`: this test fails when the Studio page's
//! generated module, the sandbox proxy's generated block or any of the app
//! runtime's in-place constants differs from Rust, and with
//! `SASHA_REGENERATE=1` rewrites them from Rust instead.

use std::path::{Path, PathBuf};

use sasha_contract::browser::{
    BLOCK_CLOSE, BLOCK_OPEN, PROXY_PATH, RUNTIME_PATH, STUDIO_MODULE_PATH, Slot, proxy_block,
    runtime_slots, studio_module,
};

fn path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the contract crate sits in the repository")
        .join(relative)
}

/// What a file should hold, given what it holds; `Err` says why the file
/// cannot be regenerated (a marker or an anchor is missing).
type Render = dyn Fn(&str) -> Result<String, String>;

fn whole(expected: String) -> Box<Render> {
    Box::new(move |_| Ok(expected.clone()))
}

fn block(expected: String) -> Box<Render> {
    Box::new(move |source| {
        let start = source
            .find(BLOCK_OPEN)
            .ok_or("the generated block's opening lines are missing")?
            + BLOCK_OPEN.len();
        let end = start
            + source[start..]
                .find(BLOCK_CLOSE)
                .ok_or("the generated block is not closed")?;
        Ok(format!("{}{expected}{}", &source[..start], &source[end..]))
    })
}

fn slots(slots: Vec<Slot>) -> Box<Render> {
    Box::new(move |source| {
        let mut text = source.to_owned();
        for slot in &slots {
            let pattern = regex::Regex::new(&format!(
                "{}([^\n]*?){}",
                regex::escape(slot.before),
                regex::escape(slot.after)
            ))
            .map_err(|error| error.to_string())?;
            let found = pattern.find_iter(&text).count();
            if found != slot.count {
                return Err(format!(
                    "{:?}…{:?} occurs {found} times, not {}",
                    slot.before, slot.after, slot.count
                ));
            }
            let value = format!("{}{}{}", slot.before, slot.value, slot.after);
            text = pattern
                .replace_all(&text, regex::NoExpand(&value))
                .into_owned();
        }
        Ok(text)
    })
}

#[test]
fn browser_code_states_what_rust_decides() {
    let regenerate = std::env::var_os("SASHA_REGENERATE").is_some();
    let files: [(&str, Box<Render>); 3] = [
        (STUDIO_MODULE_PATH, whole(studio_module())),
        (PROXY_PATH, block(proxy_block())),
        (RUNTIME_PATH, slots(runtime_slots())),
    ];
    let mut differ = Vec::new();
    for (relative, render) in files {
        let path = path(relative);
        let source = std::fs::read_to_string(&path).unwrap_or_default();
        let expected = render(&source).unwrap_or_else(|why| panic!("{relative}: {why}"));
        if expected == source {
            continue;
        }
        if regenerate {
            std::fs::write(&path, expected).unwrap();
        } else {
            differ.push(relative);
        }
    }
    assert!(
        differ.is_empty(),
        "{differ:?} differ from sasha_contract::browser; run SASHA_REGENERATE=1 cargo test -p sasha-contract --test browser_constants"
    );
}
