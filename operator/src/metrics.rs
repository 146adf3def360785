//! Prometheus metrics: reconciles, errors by class, provider RPC durations by method and class, Proxies by
//! phase, and GC deletions. One registry, encoded on `/metrics`.

use std::sync::{Arc, Mutex};

use prometheus_client::{
    encoding::{EncodeLabelSet, text::encode},
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    pub controller: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub controller: &'static str,
    pub class: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RpcLabels {
    pub provider: String,
    pub method: &'static str,
    /// `ok` or the error class.
    pub class: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    pub phase: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProviderLabels {
    pub provider: String,
}

/// Every metric the operator exports.
#[derive(Clone, Debug)]
pub struct Metrics {
    pub reconciles: Family<ControllerLabels, Counter>,
    pub reconcile_errors: Family<ErrorLabels, Counter>,
    pub rpc_duration: Family<RpcLabels, Histogram>,
    pub proxies_by_phase: Family<PhaseLabels, Gauge>,
    pub gc_deletions: Family<ProviderLabels, Counter>,
    registry: Arc<Mutex<Registry>>,
}

fn rpc_histogram() -> Histogram {
    // 1 ms to about 65 s: local sockets answer in microseconds, cloud Creates in tens of seconds.
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.001, 2.0, 17,
    ))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("egress");
        let reconciles = Family::<ControllerLabels, Counter>::default();
        let reconcile_errors = Family::<ErrorLabels, Counter>::default();
        let rpc_duration = Family::<RpcLabels, Histogram>::new_with_constructor(rpc_histogram as fn() -> Histogram);
        let proxies_by_phase = Family::<PhaseLabels, Gauge>::default();
        let gc_deletions = Family::<ProviderLabels, Counter>::default();
        registry.register("reconciles", "Reconciles run, by controller", reconciles.clone());
        registry.register(
            "reconcile_errors",
            "Reconciles that failed, by controller and error class",
            reconcile_errors.clone(),
        );
        registry.register(
            "provider_rpc_duration_seconds",
            "Provider RPC durations by provider, method and outcome class",
            rpc_duration.clone(),
        );
        registry.register("proxies", "Proxies by phase", proxies_by_phase.clone());
        registry.register(
            "gc_deletions",
            "Instances deleted by the garbage collector, by provider",
            gc_deletions.clone(),
        );
        Self {
            reconciles,
            reconcile_errors,
            rpc_duration,
            proxies_by_phase,
            gc_deletions,
            registry: Arc::new(Mutex::new(registry)),
        }
    }
}

impl Metrics {
    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let registry = self.registry.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &registry);
        out
    }
}
