//! Readers that never wait for the writer: a bounded pool of read-only
//! connections per live file. Under WAL a reader sees the last committed
//! state while the writer's batch runs, so a list never queues behind a
//! commit's fsync.
//!
//! A reader is opened read-only and hardened like the writer (limits,
//! defensive flags, busy timeout, progress handler), with its own guard set to
//! the contract's reach and the authorizer installed; it never turns trust on,
//! so its statement cache only ever holds governed statements. Readers are
//! kept per contract hash: the first read of a new contract first has the
//! writer set the file up for it (migrations), then the pool starts again;
//! a reader of an older contract, or one out when the file was removed, is
//! closed when it comes back instead of being reused.
//!
//! What it must never do: open a file for writing, open more than
//! [`READERS`] connections per file, or hand out a reader whose reach is not
//! the contract the caller named.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use rusqlite::OpenFlags;
use sasha_contract::data::DataContract;
use sasha_proto::{AppError, ErrorCode};

use super::cursor_key::{self, CursorKey};
use super::{
    DeadlineScope, Engine, Guard, STATEMENT_CACHE, Slot, forget_if_damaged, govern, harden,
    open_file, read_rows, ready, sql_error, trusted_guard,
};

/// Most read-only connections one live file keeps. Reads beyond it wait for
/// one to come back; with two cores more would only add memory (each holds
/// its own page cache and statement cache).
pub const READERS: usize = 4;

/// How long a read waits for a free reader before it is refused as
/// `APP_DATABASE_UNAVAILABLE` (retryable): the same bound a statement has.
const WAIT: Duration = super::BUSY_TIMEOUT;

/// One file's readers.
#[derive(Default)]
pub(super) struct Pool {
    state: Mutex<State>,
    returned: Condvar,
}

#[derive(Default)]
struct State {
    /// The contract the idle readers were set up for.
    contract_hash: String,
    /// Bumped whenever the pool starts again; a reader from an older
    /// generation is closed when it comes back.
    generation: u64,
    idle: Vec<Reader>,
    /// Readers of this generation open, idle or out.
    open: usize,
}

struct Reader {
    conn: rusqlite::Connection,
    guard: Arc<Guard>,
    generation: u64,
    /// The file's cursor key, read when the reader opened it.
    cursor_key: CursorKey,
}

impl Pool {
    /// Closes the idle readers and retires those out (an app's data file is
    /// being removed, or a new contract's readers start).
    pub(super) fn reset(&self, contract_hash: &str) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.generation += 1;
        state.contract_hash = contract_hash.to_owned();
        state.idle.clear();
        state.open = 0;
        self.returned.notify_all();
    }

    fn give_back(&self, reader: Reader) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if reader.generation == state.generation {
            state.idle.push(reader);
            self.returned.notify_one();
        }
    }
}

/// What [`Engine::take_reader`] found.
enum Taken {
    Reader(Reader),
    /// None idle and fewer than [`READERS`] open: open one (counted already).
    Open(u64),
    /// The pool holds another contract's readers.
    OtherContract,
}

impl Engine {
    /// Runs a governed read of the app's live file on one of its readers.
    pub(super) fn read_live(
        &self,
        app_id: &str,
        contract: &DataContract,
        sql: &str,
        params: &[rusqlite::types::Value],
        columns: Option<&[String]>,
    ) -> Result<Vec<serde_json::Map<String, serde_json::Value>>, AppError> {
        let slot = self.slot(app_id);
        let result = self.read_on(&slot, app_id, contract, |reader| {
            let _deadline = DeadlineScope::new(&reader.guard, self.inner.deadline);
            read_rows(&reader.conn, sql, params, columns)
        });
        forget_if_damaged(&slot, result)
    }

    /// The cursor key of the app's live file, as one of its readers read it
    /// (see [`Engine::cursor_key`]).
    pub(super) fn live_cursor_key(
        &self,
        app_id: &str,
        contract: &DataContract,
    ) -> Result<CursorKey, AppError> {
        let slot = self.slot(app_id);
        let result = self.read_on(&slot, app_id, contract, |reader| Ok(reader.cursor_key));
        forget_if_damaged(&slot, result)
    }

    /// Runs `read` on one of `slot`'s readers (opening one, or having the
    /// writer set the file up for `contract`, when needed).
    fn read_on<R>(
        &self,
        slot: &Slot,
        app_id: &str,
        contract: &DataContract,
        read: impl FnOnce(&Reader) -> Result<R, AppError>,
    ) -> Result<R, AppError> {
        let reader = loop {
            match take_reader(&slot.readers, &contract.hash)? {
                Taken::Reader(reader) => break reader,
                Taken::Open(generation) => match self.open_reader(app_id, contract, generation) {
                    Ok(reader) => break reader,
                    Err(error) => {
                        let mut state = slot
                            .readers
                            .state
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner);
                        if state.generation == generation {
                            state.open -= 1;
                        }
                        return Err(error);
                    }
                },
                Taken::OtherContract => self.set_up_for(slot, app_id, contract)?,
            }
        };
        let result = read(&reader);
        slot.readers.give_back(reader);
        result
    }

    /// Has the writer set the file up for `contract` (applying its pending
    /// migrations), then starts the pool again for it.
    fn set_up_for(
        &self,
        slot: &Slot,
        app_id: &str,
        contract: &DataContract,
    ) -> Result<(), AppError> {
        let mut handle = slot.handle.lock().unwrap_or_else(PoisonError::into_inner);
        ready(
            &mut handle,
            &self.live_path(app_id),
            &self.inner.root,
            contract,
            super::Approval::None,
            super::Publisher::default(),
        )?;
        let state = slot
            .readers
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let current = state.contract_hash == contract.hash;
        drop(state);
        if !current {
            slot.readers.reset(&contract.hash);
        }
        Ok(())
    }

    fn open_reader(
        &self,
        app_id: &str,
        contract: &DataContract,
        generation: u64,
    ) -> Result<Reader, AppError> {
        let guard = trusted_guard();
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut conn = open_file(&self.live_path(app_id), flags)?;
        harden(&mut conn, &guard).map_err(sql_error)?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        // Still trusted: the writer's setup made the key before any reader
        // of this contract opens.
        let cursor_key = cursor_key::read(&conn)?;
        // A reader never turns trust on again.
        govern(&mut conn, &guard, contract)?;
        Ok(Reader {
            conn,
            guard,
            generation,
            cursor_key,
        })
    }
}

/// An idle reader of `contract_hash`, the right to open one, or word that the
/// pool holds another contract's readers. Waits (bounded) while all are out.
fn take_reader(pool: &Pool, contract_hash: &str) -> Result<Taken, AppError> {
    let mut state = pool.state.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        if state.contract_hash != contract_hash {
            return Ok(Taken::OtherContract);
        }
        if let Some(reader) = state.idle.pop() {
            return Ok(Taken::Reader(reader));
        }
        if state.open < READERS {
            state.open += 1;
            return Ok(Taken::Open(state.generation));
        }
        let (next, timeout) = pool
            .returned
            .wait_timeout(state, WAIT)
            .unwrap_or_else(PoisonError::into_inner);
        state = next;
        if timeout.timed_out() && state.idle.is_empty() && state.open >= READERS {
            return Err(AppError::new(
                ErrorCode::DatabaseUnavailable,
                "the app's database is busy; try again",
            ));
        }
    }
}
