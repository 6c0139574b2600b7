//! The browser tests: each module starts the real `sasha up` (and, where it
//! says, nginx or a scripted model provider) and drives real Chromium with a
//! script under `tests/browser/`. One test binary; nextest runs them one at a
//! time (`.config/nextest.toml`, group `browser`) so their timing checks
//! measure the product, not contention between browsers.

#[path = "../common/mod.rs"]
mod common;

mod activity;
mod assistant;
mod bridge;
mod create;
mod drafts;
mod exhaust;
mod history;
mod interop;
mod lifecycle;
mod member_apps;
mod oauth;
mod orientation;
mod people;
mod replication;
mod sandbox;
mod sso;
mod studio;
mod summariser;
mod timesheet;
