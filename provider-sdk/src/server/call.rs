//! What every RPC goes through on the server: a span that continues the caller's trace, a handler that
//! cannot take the daemon down when it panics, error classification, and one log line with the outcome,
//! also for a call that tonic drops because the caller's deadline passed or the caller went away.

use std::{panic::AssertUnwindSafe, time::Instant};

use futures::FutureExt;
use tonic::{Response, Status, metadata::MetadataMap};
use tracing::{Instrument, Span, field};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::{
    error::{ErrorClass, ProviderError, reason},
    propagation,
};

/// Longest subject written to a log line or span: the value is logged before validation.
const MAX_SUBJECT_LEN: usize = 256;

/// One call in flight: the span and what the log line needs.
pub(crate) struct Call {
    span: Span,
    provider_type: String,
    rpc: &'static str,
    instance: String,
    started: Instant,
}

/// The span name OpenTelemetry shows, as the gRPC semantic conventions write it.
fn otel_name(rpc: &'static str) -> &'static str {
    match rpc {
        "GetInfo" => "egressproxies.provider.v1.ProviderService/GetInfo",
        "Create" => "egressproxies.provider.v1.ProviderService/Create",
        "Get" => "egressproxies.provider.v1.ProviderService/Get",
        "Delete" => "egressproxies.provider.v1.ProviderService/Delete",
        "ListByTag" => "egressproxies.provider.v1.ProviderService/ListByTag",
        "Check" => "egressproxies.provider.v1.ProviderService/Check",
        _ => "egressproxies.provider.v1.ProviderService",
    }
}

impl Call {
    /// `instance` is the instance name or provider ID the call concerns; never a sensitive field.
    pub(crate) fn start(provider_type: &str, rpc: &'static str, instance: &str, metadata: &MetadataMap) -> Self {
        let instance = match instance.char_indices().nth(MAX_SUBJECT_LEN) {
            Some((cut, _)) => format!("{}…", &instance[..cut]),
            None => instance.to_owned(),
        };
        let span = tracing::info_span!(
            "provider.rpc",
            otel.name = otel_name(rpc),
            otel.kind = "server",
            otel.status_code = field::Empty,
            rpc.system = "grpc",
            rpc.method = rpc,
            provider = provider_type,
            instance = instance.as_str(),
            error.class = field::Empty,
        );
        // Parent from the wire, never from whatever span happens to be current in this task.
        let _ = span.set_parent(propagation::extract(metadata));
        Self {
            span,
            provider_type: provider_type.to_owned(),
            rpc,
            instance,
            started: Instant::now(),
        }
    }

    /// Runs the handler inside the span, turns a panic into INTERNAL, classifies the error once and logs.
    pub(crate) async fn run<T>(
        self,
        handler: impl Future<Output = Result<T, ProviderError>>,
    ) -> Result<Response<T>, Status> {
        // tonic drops this future when the caller's deadline passes or the caller goes away; the guard
        // writes the call's line then, which would otherwise never be written.
        let mut unanswered = Unanswered(Some(&self));
        let outcome = AssertUnwindSafe(handler)
            .catch_unwind()
            .instrument(self.span.clone())
            .await;
        unanswered.0 = None;
        match outcome {
            Ok(Ok(answer)) => {
                self.log(None);
                Ok(Response::new(answer))
            }
            Ok(Err(error)) => {
                let message = error.message_with_causes();
                self.log(Some((error.class(), error.reason(), &message)));
                Err(error.to_status(&self.provider_type))
            }
            // The panic's own text went to stderr through the panic hook; it is not repeated here because a
            // provider may have formatted anything into it.
            Err(_) => {
                self.log(Some((
                    ErrorClass::Transient,
                    reason::PROVIDER_PANICKED,
                    "the handler panicked",
                )));
                Err(crate::status::panic_status(&self.provider_type))
            }
        }
    }

    /// The call's one line: `ok`, or the error's class, reason and message. Not-found is an ordinary
    /// answer, so it is logged at info like success.
    fn log(&self, failure: Option<(ErrorClass, &str, &str)>) {
        let (provider, rpc, instance) = (&self.provider_type, self.rpc, &self.instance);
        let duration_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        let _entered = self.span.enter();
        let Some((class, reason, error)) = failure else {
            tracing::info!(provider, rpc, instance, class = "ok", duration_ms, "call finished");
            return;
        };
        let class = class.as_str();
        self.span.record("error.class", class);
        self.span.record("otel.status_code", "ERROR");
        if class == ErrorClass::NotFound.as_str() {
            tracing::info!(
                provider,
                rpc,
                instance,
                class,
                reason,
                duration_ms,
                error,
                "call failed"
            );
        } else {
            tracing::warn!(
                provider,
                rpc,
                instance,
                class,
                reason,
                duration_ms,
                error,
                "call failed"
            );
        }
    }
}

/// Logs the call when dropped while still armed, that is, when the handler future was abandoned. Which of
/// deadline or cancellation ended it is not knowable here: the caller's clock started before ours and
/// usually cancels the stream before our own copy of its deadline fires.
struct Unanswered<'a>(Option<&'a Call>);

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        if let Some(call) = self.0 {
            call.log(Some((
                ErrorClass::Transient,
                reason::CANCELLED,
                "the call ended before the handler answered: the caller's deadline passed, or it cancelled or disconnected",
            )));
        }
    }
}
