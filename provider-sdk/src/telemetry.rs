//! Logging and tracing set-up shared by every binary: `tracing` with JSON or text output, filtered by
//! `RUST_LOG`, and OpenTelemetry spans exported over OTLP when an endpoint is configured. Trace context
//! propagates across gRPC whether or not spans are exported.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::{Resource, trace::SdkTracerProvider};
use tracing_subscriber::{
    EnvFilter, Layer, filter::filter_fn, fmt::MakeWriter, layer::SubscriberExt, util::SubscriberInitExt,
};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line, for log collectors.
    #[default]
    Json,
    /// Human-readable lines, for a terminal.
    Text,
}

#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("--otlp-endpoint {endpoint:?}: {source}")]
    Exporter {
        endpoint: String,
        #[source]
        source: opentelemetry_otlp::ExporterBuildError,
    },
    #[error("installing the tracing subscriber: {0}")]
    Subscriber(#[from] tracing_subscriber::util::TryInitError),
}

/// Flushes and stops span export when dropped; keep it alive for the life of the process.
#[derive(Debug)]
pub struct TelemetryGuard {
    tracer_provider: SdkTracerProvider,
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Err(error) = self.tracer_provider.shutdown() {
            eprintln!("flushing spans at exit failed: {error}");
        }
    }
}

/// Installs the global subscriber, logging to stdout. `otlp_endpoint` (for example
/// `http://collector:4317`) enables span export.
pub fn init(
    service_name: &'static str,
    format: LogFormat,
    otlp_endpoint: Option<&str>,
) -> Result<TelemetryGuard, TelemetryError> {
    let tracer_provider = tracer_provider(service_name, otlp_endpoint)?;
    subscriber(service_name, format, std::io::stdout, &tracer_provider).try_init()?;
    Ok(TelemetryGuard { tracer_provider })
}

/// The span pipeline: always built, so trace context propagates; exported only with an endpoint.
pub fn tracer_provider(
    service_name: &'static str,
    otlp_endpoint: Option<&str>,
) -> Result<SdkTracerProvider, TelemetryError> {
    let mut builder =
        SdkTracerProvider::builder().with_resource(Resource::builder().with_service_name(service_name).build());
    if let Some(endpoint) = otlp_endpoint {
        use opentelemetry_otlp::WithExportConfig;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint)
            .build()
            .map_err(|source| TelemetryError::Exporter {
                endpoint: endpoint.to_owned(),
                source,
            })?;
        builder = builder.with_batch_exporter(exporter);
    }
    Ok(builder.build())
}

/// The subscriber every binary runs: spans go to OpenTelemetry, events to `writer`, filtered by
/// `RUST_LOG` (default `info`). The log layer sees events only: span fields would be formatted on every
/// call and never printed, since each log line carries its own fields.
pub fn subscriber<W>(
    service_name: &'static str,
    format: LogFormat,
    writer: W,
    tracer_provider: &SdkTracerProvider,
) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    // Source locations, thread names and busy/idle timing would add attributes and clock reads to every
    // span on the per-call path; the span name and the gRPC attributes are what a trace needs.
    let otel = tracing_opentelemetry::layer()
        .with_tracer(tracer_provider.tracer(service_name))
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false);
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let events_only = filter_fn(|metadata| metadata.is_event());
    let no_body_dumps = filter_fn(|metadata| !dumps_bodies(metadata));
    let registry = tracing_subscriber::registry()
        .with(filter)
        .with(no_body_dumps)
        .with(otel);
    match format {
        LogFormat::Json => Box::new(
            registry.with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_current_span(false)
                    .with_span_list(false)
                    .with_writer(writer)
                    .with_filter(events_only),
            ),
        ),
        LogFormat::Text => Box::new(
            registry.with(
                tracing_subscriber::fmt::layer()
                    .with_target(false)
                    .with_writer(writer)
                    .with_filter(events_only),
            ),
        ),
    }
}

/// Targets whose trace level prints whole HTTP bodies: the AWS SDK's orchestrator logs every response
/// body, which for STS holds session credentials. Their trace events are dropped whatever `RUST_LOG` says,
/// before the log layer and before OpenTelemetry (which would attach them to spans as span events).
const BODY_DUMPING_TARGETS: &[&str] = &["aws_smithy_runtime"];

fn dumps_bodies(metadata: &tracing::Metadata<'_>) -> bool {
    *metadata.level() == tracing::Level::TRACE
        && BODY_DUMPING_TARGETS.iter().any(|target| {
            metadata
                .target()
                .strip_prefix(target)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
        })
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    #[test]
    fn trace_events_of_body_dumping_targets_are_dropped_and_nothing_else() {
        let lines = Arc::new(Mutex::new(Vec::<u8>::new()));
        let sink = lines.clone();
        let writer = move || Sink(sink.clone());
        let subscriber = tracing_subscriber::registry()
            .with(filter_fn(|metadata| !dumps_bodies(metadata)))
            .with(tracing_subscriber::fmt::layer().with_writer(writer).with_ansi(false));
        tracing::subscriber::with_default(subscriber, || {
            tracing::trace!(target: "aws_smithy_runtime::client::orchestrator", "body-of-a-response");
            tracing::trace!(target: "aws_smithy_runtime", "body-at-the-crate-root");
            tracing::debug!(target: "aws_smithy_runtime::client::orchestrator", "debug-is-kept");
            tracing::trace!(target: "aws_smithy_runtime_api::client", "another-crate-is-kept");
            tracing::trace!(target: "provider_sdk::server", "our-trace-is-kept");
        });
        let logged = String::from_utf8(lines.lock().unwrap().clone()).unwrap();
        assert!(!logged.contains("body-of-a-response"), "{logged}");
        assert!(!logged.contains("body-at-the-crate-root"), "{logged}");
        for kept in ["debug-is-kept", "another-crate-is-kept", "our-trace-is-kept"] {
            assert!(logged.contains(kept), "{kept} missing: {logged}");
        }
    }

    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
}
