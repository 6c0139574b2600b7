//! The Studio HTTP surface, a leaf above the domain: the one router that
//! merges every area's routes (each module below and each studio crate's
//! `http` module has a `routes()`, its one way of registering a route), the
//! Host check, the baseline headers, `/healthz` and the router tests.
//!
//! Each handler turns the request into the caller and the domain
//! function's arguments, and the answer into JSON; who may and every
//! refusal are the domain function's own, which the `CoreService` RPC of the
//! same tool calls too.
//!
//! What it must never do: decide access itself, or be imported by a domain
//! module (nothing below `http` knows it exists).

mod apps;
mod caller;
mod create;
mod drafts;
mod history;
mod lifecycle;
mod member_apps;
mod openapi;
mod replication;
mod session;
mod web;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::get;
use sasha_service::grpc;

use crate::state::Core;

/// The Studio HTTP surface.
pub(crate) fn router(core: Arc<Core>) -> axum::Router {
    let studio = axum::Router::new()
        .merge(web::routes(&core.origins.sandbox))
        .merge(openapi::routes())
        .merge(apps::routes())
        .merge(create::routes())
        .merge(history::routes())
        .merge(drafts::routes())
        .merge(lifecycle::routes())
        .merge(member_apps::routes())
        .merge(studio_identity::http::routes().with_state(core.accounts.clone()))
        .merge(studio_assistant::http::routes().with_state(core.assistance.clone()))
        .merge(replication::routes())
        .merge(session::routes())
        .fallback(web::not_found)
        .layer(axum::middleware::from_fn_with_state(
            core.clone(),
            replication::durable_writes,
        ))
        .layer(axum::middleware::from_fn_with_state(
            core.clone(),
            studio_host_only,
        ));
    axum::Router::new()
        .route("/healthz", get(healthz))
        .merge(studio)
        .layer(axum::middleware::from_fn(
            sasha_service::web::envelope_plain_errors,
        ))
        .layer(axum::middleware::from_fn(security_headers))
        .layer(axum::middleware::from_fn(
            sasha_service::telemetry::http_trace_layer,
        ))
        .with_state(core)
}

/// `GET /healthz`: this process and data-worker, for probes and the dev ingress,
/// with the catalogue's counts of valid and invalid packages.
/// Exempt from the Host check so an orchestrator can probe the container port.
async fn healthz(State(core): State<Arc<Core>>) -> Response {
    let (reply, replication) = tokio::join!(
        crate::grpc::health::health(&core, true),
        crate::grpc::health::replication_json(&core)
    );
    let snapshot = core.catalogue.current();
    let valid = snapshot.valid().count();
    let mut extra = serde_json::Map::new();
    extra.insert(
        "apps".into(),
        serde_json::json!({"valid": valid, "invalid": snapshot.apps.len() - valid, "fingerprint": snapshot.fingerprint}),
    );
    if let Some(replication) = replication {
        extra.insert("replication".into(), replication);
    }
    grpc::health_http_response_with(&reply, extra)
}

/// Studio answers only requests addressed to the Studio origin; a request for
/// any other Host (the sandbox hostname included) gets the hidden 404.
async fn studio_host_only(State(core): State<Arc<Core>>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|host| host.to_str().ok())
        .or_else(|| {
            request
                .uri()
                .authority()
                .map(|authority| authority.as_str())
        });
    match host {
        Some(host) if core.origins.studio.matches_authority(host) => next.run(request).await,
        _ => web::not_found().await,
    }
}

async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    sasha_service::web::insert_baseline_headers(headers);
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers
        .entry(header::CONTENT_SECURITY_POLICY)
        .or_insert(HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
        ));
    response
}

#[cfg(test)]
mod tests;
