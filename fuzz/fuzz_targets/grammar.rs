//! The data grammar from arbitrary JSON, with an oracle: the first byte
//! picks the operation and seeds alice's and bob's rows, the rest is the
//! request's wire JSON. Every request must parse or be refused without a
//! panic, and every accepted read must pass the differential owner-scoping
//! model (`data_worker::grammar::oracle`): the same answers with and without
//! bob's rows, page by page, and none of bob's rows shown to alice.
//!
//! Must never touch a file: the model's databases are in memory.

#![no_main]

use data_worker::grammar::oracle::{ALICE, BOB, Model, Seed};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

const OPERATIONS: [&str; 8] = [
    "list",
    "get",
    "aggregate",
    "history",
    "export",
    "create",
    "update",
    "delete",
];

fn seed(bits: u8) -> Vec<Seed> {
    (0..8)
        .map(|row| {
            let owner = if bits & (1 << row) == 0 { ALICE } else { BOB };
            (
                owner.to_owned(),
                json!(["a", "b%", "_c", "ab"][row % 4]),
                json!(row as i64 - 2),
                if row % 3 == 0 {
                    Value::Null
                } else {
                    json!("n")
                },
            )
        })
        .collect()
}

fuzz_target!(|input: &[u8]| {
    let Some((selector, request)) = input.split_first() else {
        return;
    };
    let Ok(request) = std::str::from_utf8(request) else {
        return;
    };
    let operation = OPERATIONS[usize::from(*selector) % OPERATIONS.len()];
    let bits = selector.rotate_left(3);
    // The model only reads, so each of the 256 seedings is built once.
    MODELS.with(|models| {
        let mut models = models.borrow_mut();
        let model = models
            .entry(bits)
            .or_insert_with(|| Model::seeded(&seed(bits)));
        if let Err(broken) = model.check(operation, request) {
            panic!("{operation} {request}: {broken}");
        }
    });
});

thread_local! {
    static MODELS: std::cell::RefCell<std::collections::HashMap<u8, Model>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}
