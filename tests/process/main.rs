//! The process tests: what only real processes can show, one module per
//! area, in one test binary (each root binary links the whole workspace, so
//! fewer binaries build and link faster). Each module's header says what it
//! starts and checks; `common` is the shared harness (`tests/common`).
//! Refusal matrices belong in the router tier (studio-core's `test_world`,
//! the gateway's and data-worker's in-process tests), not here.

#[path = "../common/mod.rs"]
mod common;

mod admin;
mod api;
mod assist;
mod assistant;
mod audit;
mod automation;
mod backup;
mod boot_guards;
mod catalogue;
mod certs;
mod cli;
mod confirm;
mod contract;
mod core_grpc;
mod core_replicas;
mod data;
mod data_placement;
mod deploy_files;
mod deploy_nginx;
mod docs;
mod drafts;
mod edge_sandbox;
mod ledger;
mod mcp;
mod mcp_replicas;
mod mcp_sdk;
mod mtls;
mod oauth;
mod packages;
mod placement;
mod previews;
mod read_guard;
mod replication;
mod runtime;
mod scim;
mod seed;
mod shutdown;
mod studio_web;
mod suggest;
mod table_policies;
mod tidy;
mod tracing;
mod up;
mod uploads;
mod web_host;
