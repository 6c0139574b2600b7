//! Router tests of the assembled Studio HTTP surface: requests sent through
//! the real router of a `crate::test_world::World`, one module per area.

mod api;
mod oauth;
mod people;
