//! The OAuth endpoints' request rules from arbitrary bytes (form parameters,
//! redirect URIs, a client registration), each against the model written
//! from the RFCs in `studio_core::oracle`, which the property tests in the
//! test command also drive.
//!
//! Must never touch the store: every rule here is a pure function.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| studio_core::oracle::check_oauth(input));
