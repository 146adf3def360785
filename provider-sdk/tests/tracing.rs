//! Trace context across the wire: the provider's server span is the child of the operator's client span,
//! takes its parent only from gRPC metadata, and never carries a sensitive value.
//!
//! The server runs on tasks this test does not own, so the subscriber is the process-wide default; this
//! binary holds only tests that want it.

mod support;

use std::{
    sync::OnceLock,
    time::{Duration, Instant},
};

use opentelemetry::trace::{SpanId, SpanKind, TraceContextExt, TraceId, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use provider_sdk::{
    ProviderError,
    model::ProviderId,
    proto::{self, provider_service_client::ProviderServiceClient},
    testing::{FAKE_PROVIDER_TYPE, FakeOptions, FakeProvider, Fault, Rpc},
};
use secrecy::SecretString;
use support::{UnixDaemon, create_request, create_request_with_secret};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;

const GET_SPAN: &str = "egressproxies.provider.v1.ProviderService/Get";

struct Telemetry {
    provider: SdkTracerProvider,
    exporter: InMemorySpanExporter,
}

/// Installs, once for this binary, a subscriber that turns tracing spans into OpenTelemetry spans kept in
/// memory.
fn telemetry() -> &'static Telemetry {
    static TELEMETRY: OnceLock<Telemetry> = OnceLock::new();
    TELEMETRY.get_or_init(|| {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("sdk-tests")));
        tracing::subscriber::set_global_default(subscriber).expect("the only global subscriber");
        Telemetry { provider, exporter }
    })
}

/// Every finished span, after flushing.
fn finished_spans() -> Vec<SpanData> {
    let telemetry = telemetry();
    telemetry.provider.force_flush().expect("flushing spans");
    telemetry.exporter.get_finished_spans().expect("reading spans")
}

/// Waits until `find` picks a span out of the finished ones: a server span ends as its call ends.
async fn wait_for_span(what: &str, find: impl Fn(&SpanData) -> bool) -> SpanData {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(span) = finished_spans().into_iter().find(&find) {
            return span;
        }
        assert!(Instant::now() < deadline, "no {what} span was exported");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn attribute(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.to_string())
}

/// Every piece of text a span carries: name, attributes, events and their attributes, status.
fn span_text(span: &SpanData) -> String {
    let mut text = format!("{} {:?}", span.name, span.status);
    for kv in &span.attributes {
        text.push_str(&format!(" {}={}", kv.key, kv.value));
    }
    for event in span.events.iter() {
        text.push_str(&format!(" event {}", event.name));
        for kv in &event.attributes {
            text.push_str(&format!(" {}={}", kv.key, kv.value));
        }
    }
    text
}

#[tokio::test]
async fn the_server_span_is_the_child_of_the_client_span_across_the_wire() {
    telemetry();
    let fake = FakeProvider::new(FakeOptions::default());
    let daemon = UnixDaemon::start(fake).await;
    let created = daemon
        .client
        .create(&create_request("egress-traced"))
        .await
        .expect("Create");

    let reconcile = tracing::info_span!("reconcile");
    let parent = reconcile.context().span().span_context().clone();
    assert!(parent.is_valid(), "the test's parent span is recorded");
    daemon
        .client
        .get(&created.provider_id)
        .instrument(reconcile.clone())
        .await
        .expect("Get");
    drop(reconcile);

    let in_trace = |span: &SpanData| span.span_context.trace_id() == parent.trace_id();
    let client = wait_for_span("client", |span| {
        in_trace(span) && span.name == GET_SPAN && span.span_kind == SpanKind::Client
    })
    .await;
    let server = wait_for_span("server", |span| {
        in_trace(span) && span.name == GET_SPAN && span.span_kind == SpanKind::Server
    })
    .await;

    assert_eq!(client.parent_span_id, parent.span_id(), "client under reconcile");
    assert_eq!(
        server.parent_span_id,
        client.span_context.span_id(),
        "the server span continues the client span"
    );
    assert!(server.parent_span_is_remote, "its parent came over the wire");
    assert_eq!(server.span_context.trace_id(), parent.trace_id());
    assert_eq!(attribute(&server, "provider").as_deref(), Some(FAKE_PROVIDER_TYPE));
    assert_eq!(attribute(&server, "rpc.method").as_deref(), Some("Get"));
    assert_eq!(
        attribute(&server, "instance").as_deref(),
        Some(created.provider_id.as_str())
    );
}

#[tokio::test]
async fn a_call_without_trace_context_starts_a_new_trace_at_the_server() {
    telemetry();
    let fake = FakeProvider::new(FakeOptions::default());
    // The daemon itself runs inside a span: the server span must still not adopt it as its parent.
    let daemon_span = tracing::info_span!("daemon");
    let daemon = UnixDaemon::start(fake).instrument(daemon_span.clone()).await;
    let mut raw = ProviderServiceClient::new(daemon.client.channel());

    let caller = tracing::info_span!("caller without propagation");
    let caller_trace = caller.context().span().span_context().trace_id();
    let untraced = proto::GetRequest {
        provider_id: "fake://egress-untraced".to_owned(),
    };
    let _ = raw.get(untraced).instrument(caller.clone()).await;

    let mut garbled = tonic::Request::new(proto::GetRequest {
        provider_id: "fake://egress-garbled".to_owned(),
    });
    garbled
        .metadata_mut()
        .insert("traceparent", "00-not-a-trace-id-01".parse().expect("ASCII metadata"));
    let _ = raw.get(garbled).instrument(caller.clone()).await;

    let daemon_trace = daemon_span.context().span().span_context().trace_id();
    for instance in ["fake://egress-untraced", "fake://egress-garbled"] {
        let server = wait_for_span(instance, |span| {
            span.span_kind == SpanKind::Server && attribute(span, "instance").as_deref() == Some(instance)
        })
        .await;
        assert_eq!(server.parent_span_id, SpanId::INVALID, "{instance}: a root span");
        let trace = server.span_context.trace_id();
        assert_ne!(trace, TraceId::INVALID);
        assert_ne!(trace, caller_trace, "{instance}: not the caller's local span");
        assert_ne!(trace, daemon_trace, "{instance}: not the daemon's span");
    }
}

#[tokio::test]
async fn no_span_attribute_or_event_shows_a_sensitive_value() {
    telemetry();
    let sentinel = "sentinel-span-3c1e0b9a-must-not-leak";
    let fake = FakeProvider::new(FakeOptions::default());
    let daemon = UnixDaemon::start(fake.clone()).await;
    let client = &daemon.client;

    let created = client
        .create(&create_request_with_secret("egress-span-secret", sentinel))
        .await
        .expect("Create with sensitive fields");
    fake.inject(
        Rpc::Create,
        Fault::Error(ProviderError::transient("BACKEND_UNAVAILABLE", "down")),
    );
    let failed = client
        .create(&create_request_with_secret("egress-span-failed", sentinel))
        .await
        .expect_err("the injected error");
    assert!(!failed.to_string().contains(sentinel));
    let mut invalid = create_request_with_secret("egress-span-invalid", sentinel);
    invalid.proxy.auth.password = SecretString::from(format!("bad\u{7}{sentinel}"));
    let refused = client.create(&invalid).await.expect_err("a bad password");
    assert!(!refused.to_string().contains(sentinel), "{refused}");
    fake.inject(Rpc::Create, Fault::Panic);
    let _ = client
        .create(&create_request_with_secret("egress-span-panic", sentinel))
        .await
        .expect_err("the injected panic");
    let _ = client.get(&created.provider_id).await;
    let _ = client
        .get(&ProviderId::new(FAKE_PROVIDER_TYPE, "egress-span-missing"))
        .await;

    // Four Creates and two Gets, each with a client and a server span.
    for instance in [
        "egress-span-secret",
        "egress-span-failed",
        "egress-span-invalid",
        "egress-span-panic",
    ] {
        wait_for_span(instance, |span| {
            span.span_kind == SpanKind::Server && attribute(span, "instance").as_deref() == Some(instance)
        })
        .await;
    }
    for span in finished_spans() {
        let text = span_text(&span);
        assert!(!text.contains(sentinel), "a span shows a secret: {text}");
    }
}
