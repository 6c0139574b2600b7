//! Throttle cells (`throttle_cells`): the keyed limiter (GCRA) behind the
//! sign-in, OAuth registration and member-deploy throttles, in the core
//! database, so every studio-core replica spends one budget per key. A cell
//! holds its theoretical arrival time: a key has `burst` slots at once, then
//! one more per `period`.
//!
//! What it must never do: store a key as given (keys hold what someone typed
//! as a user name and a client address; only their sha256 is kept), take a
//! slot from an attempt it refuses (all of a call's cells or none), or keep
//! a cell that is full again ([`Store::forget_full_throttle_cells`]).

use std::time::Duration;

use crate::db::{OptionalExtension as _, Sql as _};

use super::{Store, StoreError, secrets};

/// One key's budget: `burst` at once, then one more per `period`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tier {
    pub burst: u32,
    pub period: Duration,
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

impl Store {
    /// Takes one slot of each `(key, tier)` cell, all or none: `Ok(())`
    /// when each had one, else how long until every one would (nothing is
    /// taken then). One write transaction, so racing replicas never spend a
    /// slot twice.
    pub fn take_throttle_slots(
        &self,
        cells: &[(&str, Tier)],
    ) -> Result<Result<(), Duration>, StoreError> {
        let now = self.now().saturating_mul(1000);
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let mut taken = Vec::with_capacity(cells.len());
        let mut wait = 0_i64;
        for (key, tier) in cells {
            let key = secrets::secret_sha256(key);
            let period = millis(tier.period).max(1);
            let tolerance = period.saturating_mul(i64::from(tier.burst.max(1) - 1));
            let arrival: i64 = transaction
                .query_row(
                    "SELECT tat_ms FROM throttle_cells WHERE key_sha256 = ?1",
                    [&key],
                    |row| row.get(0),
                )
                .optional()?
                .unwrap_or(now);
            let start = arrival.max(now);
            if start - now > tolerance {
                wait = wait.max(start - tolerance - now);
            } else {
                taken.push((key, start.saturating_add(period)));
            }
        }
        if wait > 0 {
            // Dropped uncommitted: nothing was written anyway.
            return Ok(Err(Duration::from_millis(
                u64::try_from(wait).unwrap_or(u64::MAX),
            )));
        }
        for (key, arrival) in taken {
            transaction.execute(
                "INSERT INTO throttle_cells (key_sha256, tat_ms) VALUES (?1, ?2)
                 ON CONFLICT (key_sha256) DO UPDATE SET tat_ms = excluded.tat_ms",
                (key, arrival),
            )?;
        }
        transaction.commit()?;
        Ok(Ok(()))
    }

    /// Removes the cells that are full again (every slot back): the table
    /// holds only keys used within their refill time. Answers how many.
    pub fn forget_full_throttle_cells(&self) -> Result<usize, StoreError> {
        let now = self.now().saturating_mul(1000);
        Ok(self
            .connection()?
            .execute("DELETE FROM throttle_cells WHERE tat_ms <= ?1", [now])?)
    }
}
