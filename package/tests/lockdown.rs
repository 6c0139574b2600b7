//! The assembled document puts the realm lockdown before anything else that
//! runs, and its policy carries every directive that exists for the channels
//! the lockdown closes (security catalogue B9), whether or not today's browsers
//! enforce them.

use std::path::Path;

use base64::Engine as _;
use sasha_package::assemble::LOCKDOWN;
use sasha_package::validate::validate_dir;
use sha2::{Digest as _, Sha256};

fn hello() -> sasha_package::assemble::Resource {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/packages/valid/hello");
    validate_dir(&dir).package.expect("hello is valid").resource
}

#[test]
fn the_lockdown_is_the_first_script_and_hashed() {
    let resource = hello();
    let html = &resource.html;
    let first_script = html.find("<script>").expect("a script");
    assert_eq!(
        &html[first_script..first_script + "<script>".len() + LOCKDOWN.len()],
        format!("<script>{LOCKDOWN}").as_str(),
        "the first script element is the lockdown, byte for byte"
    );
    // Only the policy and charset come before it: no style, no other element
    // that could run or load anything.
    let head = &html[..first_script];
    assert!(!head.contains("<style"), "{head}");
    assert!(
        head.find("Content-Security-Policy").is_some(),
        "the policy is in force before the lockdown runs"
    );
    let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(LOCKDOWN));
    assert!(
        resource.csp.contains(&format!("'sha256-{hash}'")),
        "{}",
        resource.csp
    );
}

#[test]
fn the_policy_names_every_channel_directive() {
    let resource = hello();
    for directive in [
        "webrtc 'block'",
        "require-trusted-types-for 'script'",
        "frame-src 'none'",
        "child-src 'none'",
        "worker-src 'none'",
        "connect-src 'none'",
        "object-src 'none'",
    ] {
        assert!(
            resource.csp.contains(directive),
            "{directive} missing from {}",
            resource.csp
        );
    }
    assert!(
        resource
            .html
            .contains("<meta http-equiv=\"x-dns-prefetch-control\" content=\"off\">"),
        "DNS prefetching is off in the document"
    );
    let dns = resource.html.find("x-dns-prefetch-control").unwrap();
    assert!(
        dns < resource.html.find("<body>").unwrap(),
        "the prefetch switch is in the head, before any link could be parsed"
    );
}
