//! Router tests of the assembled Studio HTTP surface: requests sent through
//! the real router of a `crate::test_world::World`, one module per area.

mod api;
mod app_chat;
mod assistant;
mod drafts;
#[path = "../../../tests/common/fake_llm.rs"]
mod fake_llm;
mod history;
mod lifecycle;
mod oauth;
mod people;
mod scim;
