//! What every RPC goes through on the server: a span that continues the caller's trace, a handler that
//! cannot take the daemon down when it panics, error classification, and one log line with the outcome.

use std::{panic::AssertUnwindSafe, time::Instant};

use futures::FutureExt;
use tonic::{Response, Status, metadata::MetadataMap};
use tracing::{Instrument, Span, field};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::{error::ProviderError, propagation};

/// One call in flight: the span and what the log line needs.
pub(crate) struct Call {
    span: Span,
    provider_type: String,
    rpc: &'static str,
    instance: String,
    started: Instant,
}

impl Call {
    /// `instance` is the instance name or provider ID the call concerns; never a sensitive field.
    pub(crate) fn start(
        provider_type: &str,
        rpc: &'static str,
        instance: &str,
        metadata: &MetadataMap,
    ) -> Self {
        let span = tracing::info_span!(
            "provider.rpc",
            otel.name = %format_args!("egressproxies.provider.v1.ProviderService/{rpc}"),
            otel.kind = "server",
            otel.status_code = field::Empty,
            rpc.system = "grpc",
            rpc.method = rpc,
            provider = provider_type,
            instance = instance,
            error.class = field::Empty,
        );
        // Parent from the wire, never from whatever span happens to be current in this task.
        let _ = span.set_parent(propagation::extract(metadata));
        Self {
            span,
            provider_type: provider_type.to_owned(),
            rpc,
            instance: instance.to_owned(),
            started: Instant::now(),
        }
    }

    /// Runs the handler inside the span, turns a panic into INTERNAL, classifies the error once and logs.
    pub(crate) async fn run<T>(
        self,
        handler: impl Future<Output = Result<T, ProviderError>>,
    ) -> Result<Response<T>, Status> {
        let outcome = AssertUnwindSafe(handler)
            .catch_unwind()
            .instrument(self.span.clone())
            .await;
        let elapsed_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        let (provider, rpc, instance) = (&self.provider_type, self.rpc, &self.instance);
        let _entered = self.span.enter();
        match outcome {
            Ok(Ok(answer)) => {
                tracing::info!(
                    provider,
                    rpc,
                    instance,
                    class = "ok",
                    duration_ms = elapsed_ms,
                    "call finished"
                );
                Ok(Response::new(answer))
            }
            Ok(Err(error)) => {
                let class = error.class().as_str();
                self.span.record("error.class", class);
                self.span.record("otel.status_code", "ERROR");
                let reason = error.reason();
                let message = error.message_with_causes();
                if error.class() == crate::ErrorClass::NotFound {
                    tracing::info!(provider, rpc, instance, class, reason, duration_ms = elapsed_ms, error = %message, "call failed");
                } else {
                    tracing::warn!(provider, rpc, instance, class, reason, duration_ms = elapsed_ms, error = %message, "call failed");
                }
                Err(error.to_status(provider))
            }
            Err(panic) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                self.span.record("otel.status_code", "ERROR");
                tracing::error!(provider, rpc, instance, class = "panic", duration_ms = elapsed_ms, panic = %what, "handler panicked");
                Err(crate::status::panic_status(provider))
            }
        }
    }
}
