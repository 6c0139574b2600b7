//! Logging, tracing export, and W3C trace context across process boundaries.
//!
//! Every process logs through `tracing` to stderr, filtered by `RUST_LOG`
//! (default [`DEFAULT_FILTER`]: `info`, with the libraries' per-request and
//! parser chatter below it). Every span gets an OpenTelemetry trace id, so
//! each request's access line names its trace and the trace id travels to
//! the next process; when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, spans are
//! also exported over OTLP/gRPC with `service.name` = the role. Trace context travels
//! as `traceparent`/`tracestate` headers: injected into every outgoing gRPC call
//! ([`crate::grpc::TraceContextInterceptor`]) and extracted from every incoming
//! gRPC call and HTTP request ([`span_for_request`]), so one user request is one
//! trace across processes.

use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry::trace::{TraceContextExt as _, TracerProvider as _};
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::Role;

/// Keeps the span exporter alive; dropping it flushes and shuts the exporter down.
#[derive(Debug)]
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
}

impl TelemetryGuard {
    /// Flushes spans still buffered. Call before the process exits.
    pub fn shutdown(mut self) {
        self.shutdown_provider();
    }

    fn shutdown_provider(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(error) = provider.shutdown()
        {
            eprintln!("sasha: span export did not shut down cleanly: {error}");
        }
    }
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        self.shutdown_provider();
    }
}

/// Why telemetry could not start.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("RUST_LOG: {0}")]
    Filter(String),
    #[error("OTEL_EXPORTER_OTLP_ENDPOINT: {0}")]
    Exporter(String),
}

/// The log filter when `RUST_LOG` is unset: `info`, except html5ever's tree
/// builder (a warning per HTML construct it does not model, such as foster
/// parenting, which the package validator's own checks already judge) and
/// rmcp's per-request lines, which repeat what the access line says.
/// `RUST_LOG=info,rmcp=debug` (any `EnvFilter` directive) shows them again.
pub const DEFAULT_FILTER: &str = "info,html5ever=error,markup5ever=error,rmcp=warn";

/// Installs the global subscriber for `role`. Must run inside a Tokio runtime
/// when `otlp_endpoint` is set (the exporter's batch task runs on it).
pub fn init(
    role: Role,
    rust_log: Option<&str>,
    otlp_endpoint: Option<&str>,
) -> Result<TelemetryGuard, TelemetryError> {
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    // An empty RUST_LOG is unset (`config::Env` drops empty values).
    let filter = EnvFilter::try_new(rust_log.unwrap_or(DEFAULT_FILTER))
        .map_err(|error| TelemetryError::Filter(error.to_string()))?;
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false);
    // Spans always get trace ids (an access line names its trace, and the id
    // is propagated to the next process); they leave the process only when
    // an OTLP endpoint is configured.
    let mut builder = SdkTracerProvider::builder().with_resource(
        opentelemetry_sdk::Resource::builder()
            .with_service_name(role.as_str())
            .build(),
    );
    if let Some(endpoint) = otlp_endpoint {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint.to_owned())
            .build()
            .map_err(|error| TelemetryError::Exporter(error.to_string()))?;
        builder = builder.with_span_processor(
            BatchSpanProcessor::builder(exporter, opentelemetry_sdk::runtime::Tokio).build(),
        );
    }
    let sdk = builder.build();
    let tracer = sdk.tracer(role.as_str());
    let provider = Some(sdk);
    let otel = Some(tracing_opentelemetry::layer().with_tracer(tracer));
    let registry = tracing_subscriber::registry()
        .with(fmt.with_filter(filter))
        .with(otel.map(|layer| {
            layer.with_filter(EnvFilter::try_new("info").unwrap_or_else(|_| EnvFilter::new("info")))
        }));
    // A second init in one process (tests) keeps the first subscriber.
    let _ = registry.try_init();
    Ok(TelemetryGuard { provider })
}

struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|name| name.as_str()).collect()
    }
}

pub(crate) struct MetadataInjector<'a>(pub(crate) &'a mut tonic::metadata::MetadataMap);

impl Injector for MetadataInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(key), Ok(value)) = (
            tonic::metadata::MetadataKey::from_bytes(key.as_bytes()),
            tonic::metadata::MetadataValue::try_from(value.as_str()),
        ) {
            self.0.insert(key, value);
        }
    }
}

/// Injects the current span's trace context into outgoing gRPC metadata.
pub(crate) fn inject_current_context(metadata: &mut tonic::metadata::MetadataMap) {
    let context = tracing::Span::current().context();
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.inject_context(&context, &mut MetadataInjector(metadata));
    });
}

/// A span for one incoming request (HTTP or gRPC), continuing the caller's trace
/// when the request carries `traceparent`.
pub fn span_for_request<B>(kind: &'static str, request: &http::Request<B>) -> tracing::Span {
    let span = tracing::info_span!(
        "request",
        otel.name = %format!("{kind} {}", request.uri().path()),
        otel.kind = "server",
        method = %request.method(),
        path = %request.uri().path(),
    );
    let parent = opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.extract(&HeaderExtractor(request.headers()))
    });
    let _ = span.set_parent(parent);
    span
}

/// axum middleware that runs each HTTP request inside [`span_for_request`]
/// and writes one access line when it is answered (target `sasha::access`:
/// method, route, path, status, milliseconds, trace id, client, scheme; at
/// `debug` for a static file answered well, else at `info`).
pub async fn http_trace_layer(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use tracing::Instrument;
    let span = span_for_request("HTTP", &request);
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let (client, scheme) = forwarded_client(request.headers());
    let route = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map(|matched| matched.as_str().to_owned());
    let trace_id = span.context().span().span_context().trace_id();
    let started = std::time::Instant::now();
    let response = next.run(request).instrument(span).await;
    let status = response.status();
    let ms = started.elapsed().as_millis() as u64;
    // Static files (Studio's page and modules, the sandbox documents, probes)
    // answered well are routine: below `info`. Everything else (the API, MCP,
    // OAuth and its metadata), and every failure, is one `info` line.
    let routine = matches!(method, http::Method::GET | http::Method::HEAD)
        && (status.is_success() || status == http::StatusCode::NOT_MODIFIED)
        && !["/api/", "/mcp", "/oauth/", "/.well-known/"]
            .iter()
            .any(|prefix| path.starts_with(prefix));
    macro_rules! access {
        ($level:ident) => {
            tracing::$level!(
                target: "sasha::access",
                %method,
                route = route.as_deref().unwrap_or(&path),
                path = %path,
                status = status.as_u16(),
                ms,
                trace_id = %trace_id,
                client = %client,
                scheme = %scheme,
                "request"
            )
        };
    }
    if routine {
        access!(debug);
    } else {
        access!(info);
    }
    response
}

/// The client address and scheme the one trusted proxy hop reports: the last
/// `X-Forwarded-For` entry (the proxy replaces the header, so there is one;
/// were it appended to, the last entry is still the proxy's own) and
/// `X-Forwarded-Proto`; `-` when there is no proxy (`sasha up` and tests talk
/// to the listener directly). Nothing a client writes further left is used.
pub fn forwarded_client(headers: &http::HeaderMap) -> (String, String) {
    let last = |name: &str| {
        headers
            .get_all(name)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .map(str::trim)
            .rfind(|entry| !entry.is_empty())
            .map(|entry| entry.chars().take(64).collect::<String>())
    };
    let client = last("x-forwarded-for")
        .filter(|entry| entry.parse::<std::net::IpAddr>().is_ok())
        .unwrap_or_else(|| "-".to_owned());
    let scheme = last("x-forwarded-proto")
        .filter(|entry| entry == "https" || entry == "http")
        .unwrap_or_else(|| "-".to_owned());
    (client, scheme)
}

#[cfg(test)]
mod access_tests {
    use super::forwarded_client;

    #[test]
    fn only_the_last_forwarded_entry_counts() {
        let mut headers = http::HeaderMap::new();
        assert_eq!(forwarded_client(&headers), ("-".to_owned(), "-".to_owned()));
        headers.append("x-forwarded-for", "6.6.6.6, 10.0.0.1".parse().unwrap());
        headers.append("x-forwarded-for", "192.0.2.7".parse().unwrap());
        headers.append("x-forwarded-proto", "https".parse().unwrap());
        assert_eq!(
            forwarded_client(&headers),
            ("192.0.2.7".to_owned(), "https".to_owned())
        );
        let mut junk = http::HeaderMap::new();
        junk.append("x-forwarded-for", "<script>".parse().unwrap());
        junk.append("x-forwarded-proto", "gopher".parse().unwrap());
        assert_eq!(forwarded_client(&junk), ("-".to_owned(), "-".to_owned()));
    }
}
