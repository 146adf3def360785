//! Child spans (contract §4.16, `child-spans: sdk-instrumentation`): the AWS SDK's own spans for an EC2
//! call nest under the span the call runs in, which in the daemon is the SDK's `provider.rpc` server span.
//! A recording subscriber captures every span with its ancestors while the provider, in process, answers a
//! Get against moto.

mod common;

use std::sync::{Arc, Mutex};

use egress_provider_aws::{AwsConfig, AwsProvider};
use provider_sdk::{Provider, model::ProviderId};
use tracing::{Subscriber, span};
use tracing_subscriber::{Layer, layer::Context, prelude::*, registry::LookupSpan};

/// Every span opened, as the names of its ancestors, outermost first, and its own name last.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Vec<String>>>>);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn on_new_span(&self, _: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let path = span.scope().from_root().map(|s| s.name().to_owned()).collect();
        self.0.lock().unwrap().push(path);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sdk_spans_of_an_ec2_call_nest_under_the_rpc_span() {
    let aws = common::Aws::new();
    let recorder = Recorder::default();
    let _guard = tracing_subscriber::registry().with(recorder.clone()).set_default();
    let config: AwsConfig = provider_sdk::config::load(Some(&aws.config_file())).unwrap();
    let provider = AwsProvider::new(config);
    let id = ProviderId::new("aws", "us-east-1/i-0123456789abcdef0");
    let rpc = tracing::info_span!("provider.rpc", rpc = "Get");
    let answer = tracing::Instrument::instrument(provider.get(&id), rpc).await;
    assert!(answer.is_err(), "moto has no such instance");
    let spans = recorder.0.lock().unwrap().clone();
    // The SDK names its operation span `<service>.<operation>`; attempts and identity loading nest below.
    assert!(
        spans
            .iter()
            .any(|path| path == &["provider.rpc", "EC2.DescribeInstances"]),
        "no EC2.DescribeInstances span directly under provider.rpc: {spans:?}"
    );
    assert!(
        spans.iter().any(|path| path.len() > 2
            && path[1] == "EC2.DescribeInstances"
            && path.contains(&"try_attempt".to_owned())),
        "no attempt span under the operation: {spans:?}"
    );
    assert!(
        spans.iter().all(|path| path[0] == "provider.rpc"),
        "every span of the call is in its trace: {spans:?}"
    );
}
