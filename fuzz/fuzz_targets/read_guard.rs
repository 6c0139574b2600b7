//! The read guard over generated changes, with its model: the input bytes
//! decode into a populated database's change (`data_worker::engine::guard::
//! oracle::Change::from_bytes`: migration steps, a new declaration, an
//! admin's approval or none), which the engine sets up in its own
//! transaction; the model (`oracle::check`) says whether a row became
//! readable by someone new or changed owner without approval, whether a
//! change that keeps every owner was refused, and whether a refusal wrote
//! anything. Any of those is a crash.
//!
//! Must never touch a file: the model's databases are in memory.

#![no_main]

use data_worker::engine::guard::oracle::{Change, check};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let change = Change::from_bytes(input);
    if let Err(broken) = check(&change) {
        panic!("{change:?}: {broken}");
    }
});
