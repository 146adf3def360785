//! The operator's HTTP endpoint: `/metrics` (Prometheus text), `/healthz` (the process answers) and
//! `/readyz` (the controllers run: this replica holds the lease and its watches started).

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use axum::{Router, extract::State, http::StatusCode, response::IntoResponse, routing::get};

use crate::metrics::Metrics;

#[derive(Clone, Debug)]
pub struct HttpState {
    pub metrics: Metrics,
    pub ready: Arc<AtomicBool>,
}

async fn metrics(State(state): State<HttpState>) -> impl IntoResponse {
    (
        [(
            "content-type",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.encode(),
    )
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<HttpState>) -> (StatusCode, &'static str) {
    if state.ready.load(Ordering::Relaxed) {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not leading or not started")
    }
}

pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(state)
}

/// Serves until `shutdown` resolves.
pub async fn serve(
    addr: SocketAddr,
    state: HttpState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(%addr, "serving /metrics, /healthz and /readyz");
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use tower::ServiceExt;

    use super::*;
    use crate::{config::OperatorConfig, providers::Providers};

    fn state() -> HttpState {
        HttpState {
            metrics: Metrics::default(),
            ready: Arc::default(),
        }
    }

    async fn get(state: &HttpState, path: &str) -> (StatusCode, String) {
        let request = axum::http::Request::get(path).body(Body::empty()).unwrap();
        let response = router(state.clone()).oneshot(request).await.unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    /// Every line of the exposition is a `#` line of a known kind or a `name{labels} value` sample.
    fn assert_parses(text: &str) {
        assert!(text.ends_with("# EOF\n"), "{text}");
        for line in text.lines() {
            if let Some(comment) = line.strip_prefix("# ") {
                let kind = comment.split(' ').next().unwrap_or_default();
                assert!(["HELP", "TYPE", "UNIT", "EOF"].contains(&kind), "{line:?}");
                continue;
            }
            let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line:?}"));
            assert!(value.parse::<f64>().is_ok(), "value of {line:?}");
            let name = series.split('{').next().unwrap_or_default();
            assert!(
                name.starts_with("egress_") && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "name of {line:?}"
            );
            assert_eq!(series.contains('{'), series.ends_with('}'), "labels of {line:?}");
        }
    }

    #[tokio::test]
    async fn healthz_answers_ok() {
        assert_eq!(get(&state(), "/healthz").await.0, StatusCode::OK);
    }

    #[tokio::test]
    async fn readyz_answers_unavailable_until_the_ready_flag_is_set() {
        let state = state();
        assert_eq!(get(&state, "/readyz").await.0, StatusCode::SERVICE_UNAVAILABLE);
        state.ready.store(true, Ordering::Relaxed);
        assert_eq!(get(&state, "/readyz").await.0, StatusCode::OK);
        state.ready.store(false, Ordering::Relaxed);
        assert_eq!(get(&state, "/readyz").await.0, StatusCode::SERVICE_UNAVAILABLE);
    }

    #[tokio::test]
    async fn metrics_expose_provider_rpc_durations_once_a_call_is_made() {
        let state = state();
        let (_, before) = get(&state, "/metrics").await;
        assert_parses(&before);
        assert!(
            !before.contains("egress_provider_rpc_duration_seconds_count"),
            "{before}"
        );

        // A provider nobody serves: the call fails at once and is still measured, by method and class.
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "clusterId: c\nproviders:\n  down:\n    type: fake\n    endpoint: unix://{}/absent.sock\n",
            dir.path().display()
        );
        let config: OperatorConfig = provider_sdk::config::parse("operator.yaml", &text).unwrap();
        let providers = Providers::from_config(&config, &state.metrics).unwrap();
        let error = providers.get("down").unwrap().get_info().await.unwrap_err();

        let (status, after) = get(&state, "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert!(after.starts_with("# HELP "), "{after}");
        assert_parses(&after);
        assert!(
            after.contains("# TYPE egress_provider_rpc_duration_seconds histogram"),
            "{after}"
        );
        let count = format!(
            "egress_provider_rpc_duration_seconds_count{{provider=\"down\",method=\"GetInfo\",class=\"{}\"}} 1",
            error.class().as_str()
        );
        assert!(after.contains(&count), "{count} in:\n{after}");
    }
}
