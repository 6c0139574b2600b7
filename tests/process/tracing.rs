//! One request is one trace across processes: an in-test OTLP/gRPC receiver
//! collects the spans that mcp-gateway, studio-core and data-worker export while
//! serving one `GET /healthz` on the gateway, which fans out to core (which calls
//! data-worker) and to data-worker directly. And one tool call asks
//! studio-core once (`AuthorizeCall`: the credential and the app's catalogue
//! together), then data-worker once.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Harness, get};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;

/// A collected span: the exporting service, its trace id, and its name.
#[derive(Debug, Clone)]
struct CollectedSpan {
    service: String,
    trace_id: Vec<u8>,
    span_id: Vec<u8>,
    parent_span_id: Vec<u8>,
    name: String,
}

#[derive(Default, Clone)]
struct Receiver {
    spans: Arc<Mutex<Vec<CollectedSpan>>>,
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut spans = self.spans.lock().unwrap();
        for resource_spans in request.into_inner().resource_spans {
            let service = resource_spans
                .resource
                .iter()
                .flat_map(|resource| resource.attributes.iter())
                .find(|attribute| attribute.key == "service.name")
                .and_then(|attribute| attribute.value.as_ref()?.value.as_ref())
                .map(|value| match value {
                    Value::StringValue(name) => name.clone(),
                    other => format!("{other:?}"),
                })
                .unwrap_or_default();
            for scope in resource_spans.scope_spans {
                for span in scope.spans {
                    spans.push(CollectedSpan {
                        service: service.clone(),
                        trace_id: span.trace_id,
                        span_id: span.span_id,
                        parent_span_id: span.parent_span_id,
                        name: span.name,
                    });
                }
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// A receiver on loopback and a harness whose roles export to it.
async fn traced_harness() -> (Receiver, Harness) {
    let receiver = Receiver::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let otlp = listener.local_addr().unwrap();
    let server = tonic::transport::Server::builder()
        .add_service(TraceServiceServer::new(receiver.clone()))
        .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener));
    tokio::spawn(server);
    let mut harness = Harness::new();
    harness.env.insert(
        "OTEL_EXPORTER_OTLP_ENDPOINT".into(),
        format!("http://{otlp}"),
    );
    harness
        .env
        .insert("OTEL_BSP_SCHEDULE_DELAY".into(), "100".into());
    (receiver, harness)
}

#[tokio::test]
async fn a_tool_call_asks_studio_core_once() {
    let (receiver, harness) = traced_harness().await;
    common::copy_dir(
        &common::mcp::fixture("expense-log"),
        &harness.path().join("docs/apps/expense-log"),
    );
    let store = harness.store();
    let staff = store
        .create_user(
            "sam",
            studio_store::UserRole::Staff,
            "correct horse battery",
        )
        .unwrap();
    let backends = harness.start_backends().await;
    let token = common::mcp::token(
        &store,
        &staff,
        &[
            studio_store::Scope::ChatUse,
            studio_store::Scope::AppsInvoke,
        ],
    );
    let mut client = common::mcp::Mcp::sessionless(
        &format!("http://{}/mcp", backends.gateway.listener("http")),
        &token,
    );
    let listed = client
        .call("app__expense_log__categories__list", serde_json::json!({}))
        .await;
    assert!(
        common::mcp::structured(&listed)["rows"].is_array(),
        "{:?}",
        listed.body
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let spans = receiver.spans.lock().unwrap().clone();
        // The trace of the call: the one with data-worker's Execute.
        let execute = spans.iter().find(|span| {
            span.service == "data-worker" && span.name.contains("DataService/Execute")
        });
        if let Some(execute) = execute {
            // Each role exports every 100 ms: after a second, any other core
            // span of this trace has been exported too.
            tokio::time::sleep(Duration::from_secs(1)).await;
            let spans = receiver.spans.lock().unwrap().clone();
            let core_calls: Vec<&str> = spans
                .iter()
                .filter(|span| {
                    span.trace_id == execute.trace_id
                        && span.service == "studio-core"
                        && span.name.contains("CoreService/")
                })
                .map(|span| span.name.as_str())
                .collect();
            if !core_calls.is_empty() {
                assert_eq!(core_calls.len(), 1, "{core_calls:?}");
                assert!(
                    core_calls[0].contains("CoreService/AuthorizeCall"),
                    "{core_calls:?}"
                );
                return;
            }
        }
        if tokio::time::Instant::now() > deadline {
            panic!("no trace of the call; collected: {spans:#?}");
        }
        // The spans come from three other processes' exporters: real time.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn one_request_is_one_trace_across_three_processes() {
    let (receiver, harness) = traced_harness().await;
    let backends = harness.start_backends().await;

    let response = get(
        backends.gateway.listener("http"),
        "localhost:3007",
        "/healthz",
        "",
    )
    .await;
    assert_eq!(response.status, 200, "{response:?}");
    let report = response.json();
    assert_eq!(report["ok"], true, "{report}");

    // The gateway's request span is the root of the trace.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let spans = receiver.spans.lock().unwrap().clone();
        let root = spans
            .iter()
            .find(|span| span.service == "mcp-gateway" && span.name == "HTTP /healthz");
        if let Some(root) = root {
            let in_trace: Vec<&CollectedSpan> = spans
                .iter()
                .filter(|span| span.trace_id == root.trace_id)
                .collect();
            let services: HashSet<&str> =
                in_trace.iter().map(|span| span.service.as_str()).collect();
            // data-worker answers twice in this trace: once for the gateway, once for core.
            let data_spans = in_trace
                .iter()
                .filter(|span| {
                    span.service == "data-worker" && span.name.contains("DataService/Health")
                })
                .count();
            if services.len() == 3 && data_spans >= 2 {
                assert!(
                    root.parent_span_id.is_empty(),
                    "the gateway's HTTP span is the root"
                );
                let by_id: HashMap<&[u8], &CollectedSpan> = in_trace
                    .iter()
                    .map(|span| (span.span_id.as_slice(), *span))
                    .collect();
                // Every other span of the trace has its parent inside the trace.
                for span in &in_trace {
                    if span.span_id != root.span_id {
                        assert!(
                            by_id.contains_key(span.parent_span_id.as_slice()),
                            "{span:?} has a parent outside the trace"
                        );
                    }
                }
                // Core's server span is a child of a gateway span.
                let core_server = in_trace
                    .iter()
                    .find(|span| {
                        span.service == "studio-core" && span.name.contains("CoreService/Health")
                    })
                    .expect("core's server span");
                assert_eq!(
                    by_id[core_server.parent_span_id.as_slice()].service,
                    "mcp-gateway"
                );
                // One data-worker span descends from core.
                assert!(in_trace.iter().any(|span| {
                    span.service == "data-worker"
                        && by_id
                            .get(span.parent_span_id.as_slice())
                            .is_some_and(|parent| parent.service == "studio-core")
                }));
                return;
            }
        }
        if tokio::time::Instant::now() > deadline {
            panic!("no single trace across the three processes; collected: {spans:#?}");
        }
        // As above: the spans come from other processes' exporters.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
