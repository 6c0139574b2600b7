//! The realm lockdown cut out of an assembled resource, for the control run of
//! `tests/browser/realms.mjs` (which shows the lockdown is what stops the
//! routes) and for `benches/runtime.rs` (its cost). Never served: studio-core
//! serves only what `sasha_package::assemble` emits.

#![allow(unreachable_pub)]

use base64::Engine as _;
use sasha_package::assemble::{LOCKDOWN, Resource};
use sha2::Digest as _;

/// The same document with the realm lockdown cut out: its `<script>`, its
/// hash and the Trusted Types requirement (which without the lockdown's
/// default policy would refuse every HTML string). Only for the control run
/// that shows the lockdown is what stops the routes.
pub fn without_lockdown(resource: &Resource) -> String {
    let lockdown = LOCKDOWN;
    let element = format!("<script>{lockdown}</script>\n");
    let hash = format!(
        "'sha256-{}' ",
        base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(lockdown))
    );
    let csp = resource
        .csp
        .replace(&hash, "")
        .replace("; require-trusted-types-for 'script'", "");
    assert!(
        resource.html.contains(&element)
            && resource.html.contains(&resource.csp)
            && csp != resource.csp,
        "the resource carries the lockdown as its own script"
    );
    resource
        .html
        .replace(&element, "")
        .replace(&resource.csp, &csp)
}
