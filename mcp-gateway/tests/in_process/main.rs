//! mcp-gateway's in-process tier: the gateway's HTTP service driven with
//! `oneshot` in front of real studio-core and data-worker served in this
//! process over a temporary folder ([`world`]). The home of the gateway's
//! refusal matrices: every tool family × every kind of caller × every
//! confirmation outcome, the hidden-404 rules and the body bounds; and the
//! routing of data calls over several data-workers ([`placement`]).
//!
//! Process tests (`tests/process/mcp*.rs` at the root) keep only what needs
//! processes: mutual TLS between processes, replicas, killed and stalled
//! roles, the gateway's memory under load and the official SDK client.
//!
//! What it must never do: skip a case, or assert a refusal without its
//! envelope's code.

// The modules share their helpers as `pub` items of this one binary.
#![allow(unreachable_pub)]

mod mcp;
mod world;

mod bodies;
mod confirmations;
mod create;
mod data_tools;
mod early_reads;
mod hidden;
mod history;
mod lifecycle;
mod listing;
mod placement;
mod refusals;
mod sessions;
mod source;
mod undo;
