//! Fixtures of the reconcile tests, in the manner of kube-rs/controller-rs: a `kube::Client` whose apiserver
//! is a `tower_test` mock, a verifier that expects each request in order (method, path, body) and answers
//! it, a builder for Proxies, and the SDK's fake provider served over gRPC on a unix socket in-process, so
//! `Providers` is the operator's real client stack.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use http::{Method, Request, Response, StatusCode};
use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use kube::client::Body;
use provider_sdk::{
    InstanceStream, Provider, ProviderError,
    model::{CheckResult, CreateRequest, Instance, InstanceState, ListFilter, ProviderId, ProviderInfo},
    server::{Listen, bind},
    testing::{FakeOptions, FakeProvider},
};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::Context;
use crate::{
    crd::{FIELD_MANAGER, FINALIZER, Proxy, ProxySpec, ProxyStatus},
    metrics::Metrics,
    providers::Providers,
};

pub const NAMESPACE: &str = "team-a";
pub const CLUSTER_ID: &str = "test-cluster";
/// The one provider configured in every test, served by the fake.
pub const PROVIDER: &str = "fake";
/// The UID of every Proxy the builder makes.
pub const UID: &str = "0b6f3c1e-7a2d-4c55-9e0f-3b1a2c4d5e6f";
/// How long the verifier waits for a request a reconcile should make.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A Proxy under construction; `build` hands it over as a reconcile takes it.
#[derive(Debug)]
pub struct ProxyBuilder(Proxy);

/// A Proxy in [`NAMESPACE`] on the [`PROVIDER`], at generation 1, without finalizer or status.
pub fn proxy(name: &str) -> ProxyBuilder {
    let spec: ProxySpec = serde_json::from_value(json!({"provider": PROVIDER, "port": 3128})).unwrap();
    let mut proxy = Proxy::new(name, spec);
    proxy.metadata.namespace = Some(NAMESPACE.to_owned());
    proxy.metadata.uid = Some(UID.to_owned());
    proxy.metadata.generation = Some(1);
    proxy.metadata.resource_version = Some("100".to_owned());
    ProxyBuilder(proxy)
}

impl ProxyBuilder {
    pub fn provider(mut self, provider: &str) -> Self {
        self.0.spec.provider = provider.to_owned();
        self
    }

    pub fn with_finalizer(mut self) -> Self {
        self.0.metadata.finalizers = Some(vec![FINALIZER.to_owned()]);
        self
    }

    /// Marked for deletion, as the apiserver does when the Proxy has a finalizer.
    pub fn deleting(mut self) -> Self {
        self.0.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
        self
    }

    pub fn status(mut self, status: ProxyStatus) -> Self {
        self.0.status = Some(status);
        self
    }

    pub fn build(self) -> Arc<Proxy> {
        Arc::new(self.0)
    }
}

type ApiServerHandle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

/// A client whose every request goes to the returned verifier.
pub fn mock_client() -> (kube::Client, ApiServerVerifier) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    (kube::Client::new(service, NAMESPACE), ApiServerVerifier(handle))
}

/// The mocked apiserver: each `expect_*` takes the next request, asserts what it must be, and answers it.
/// A request other than the expected one panics the verifier, which fails the client's call too.
pub struct ApiServerVerifier(ApiServerHandle);

impl std::fmt::Debug for ApiServerVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiServerVerifier")
    }
}

/// One request the verifier took, with its body parsed; answer it with `respond`.
pub struct Received {
    pub content_type: String,
    pub query: String,
    pub body: Value,
    respond: tower_test::mock::SendResponse<Response<Body>>,
}

impl Received {
    pub fn respond(self, status: StatusCode, body: &Value) {
        let response = Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(Body::from(serde_json::to_vec(body).unwrap()))
            .unwrap();
        self.respond.send_response(response);
    }

    fn assert_server_side_apply(&self) {
        assert_eq!(self.content_type, "application/apply-patch+yaml", "a server-side apply");
        assert!(
            self.query.contains(&format!("fieldManager={FIELD_MANAGER}")) && self.query.contains("force=true"),
            "applied under the operator's field manager, forced: {}",
            self.query
        );
    }
}

fn proxy_path(proxy: &Proxy) -> String {
    format!(
        "/apis/egressproxies.dev/v1alpha1/namespaces/{NAMESPACE}/proxies/{}",
        proxy.metadata.name.as_deref().unwrap_or_default()
    )
}

fn consumer_secret_path(proxy: &Proxy) -> String {
    format!(
        "/api/v1/namespaces/{NAMESPACE}/secrets/{}-proxy",
        proxy.metadata.name.as_deref().unwrap_or_default()
    )
}

fn not_found(what: &str) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("{what} not found"), "reason": "NotFound", "code": 404,
    })
}

impl ApiServerVerifier {
    /// The next request, which must be `method` on `path`.
    pub async fn expect(&mut self, method: Method, path: &str) -> Received {
        let (request, respond) = tokio::time::timeout(REQUEST_TIMEOUT, self.0.next_request())
            .await
            .unwrap_or_else(|_| panic!("no request within {REQUEST_TIMEOUT:?}; expected {method} {path}"))
            .unwrap_or_else(|| panic!("the client went away; expected {method} {path}"));
        let (parts, body) = request.into_parts();
        assert_eq!(
            format!("{} {}", parts.method, parts.uri.path()),
            format!("{method} {path}"),
            "the next request"
        );
        let bytes = body.collect_bytes().await.unwrap();
        Received {
            content_type: parts
                .headers
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned(),
            query: parts.uri.query().unwrap_or_default().to_owned(),
            body: if bytes.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(&bytes).unwrap()
            },
            respond,
        }
    }

    /// Asserts that the client makes no further request: it must go away (every clone dropped) first.
    pub async fn expect_no_more_requests(mut self) {
        match tokio::time::timeout(REQUEST_TIMEOUT, self.0.next_request()).await {
            Ok(None) => {}
            Ok(Some((request, _))) => panic!("unexpected request {} {}", request.method(), request.uri()),
            Err(_) => panic!("the client is still alive after {REQUEST_TIMEOUT:?}"),
        }
    }

    /// The finalizer is added with a JSON patch on the Proxy; answers the Proxy with it.
    pub async fn expect_finalizer_added(&mut self, proxy: &Proxy) {
        let request = self.expect(Method::PATCH, &proxy_path(proxy)).await;
        assert_eq!(request.content_type, "application/json-patch+json");
        let adds_finalizer = request.body.as_array().into_iter().flatten().any(|op| {
            op["op"] == "add"
                && op["path"]
                    .as_str()
                    .is_some_and(|p| p.starts_with("/metadata/finalizers"))
                && (op["value"] == FINALIZER || op["value"] == json!([FINALIZER]))
        });
        assert!(adds_finalizer, "the patch adds {FINALIZER}: {}", request.body);
        let mut answer = proxy.clone();
        answer.metadata.finalizers = Some(vec![FINALIZER.to_owned()]);
        request.respond(StatusCode::OK, &serde_json::to_value(answer).unwrap());
    }

    /// The finalizer is removed with a JSON patch that first tests it is ours; answers the Proxy without it.
    pub async fn expect_finalizer_removed(&mut self, proxy: &Proxy) {
        let request = self.expect(Method::PATCH, &proxy_path(proxy)).await;
        assert_eq!(request.content_type, "application/json-patch+json");
        let ops = request.body.as_array().cloned().unwrap_or_default();
        let removed = ops.iter().find(|op| op["op"] == "remove").map(|op| op["path"].clone());
        let tested = ops
            .iter()
            .find(|op| op["op"] == "test" && op["value"] == FINALIZER)
            .map(|op| op["path"].clone());
        assert!(
            removed.is_some() && removed == tested,
            "removes {FINALIZER} and only it: {}",
            request.body
        );
        let mut answer = proxy.clone();
        answer.metadata.finalizers = None;
        request.respond(StatusCode::OK, &serde_json::to_value(answer).unwrap());
    }

    /// A status write: `check` sees the status before the reconcile gets the answer (and can go on).
    pub async fn expect_status_applied(&mut self, proxy: &Proxy, check: impl FnOnce(&ProxyStatus)) -> ProxyStatus {
        let request = self
            .expect(Method::PATCH, &format!("{}/status", proxy_path(proxy)))
            .await;
        request.assert_server_side_apply();
        let status: ProxyStatus = serde_json::from_value(request.body["status"].clone()).unwrap();
        check(&status);
        let mut answer = proxy.clone();
        answer.status = Some(status.clone());
        request.respond(StatusCode::OK, &serde_json::to_value(answer).unwrap());
        status
    }

    /// The consumer Secret is read (for credentials to reuse); it does not exist yet.
    pub async fn expect_consumer_secret_read_not_found(&mut self, proxy: &Proxy) {
        let request = self.expect(Method::GET, &consumer_secret_path(proxy)).await;
        request.respond(StatusCode::NOT_FOUND, &not_found("secrets"));
    }

    /// The consumer Secret is read and holds credentials an earlier reconcile generated.
    pub async fn expect_consumer_secret_read_with_credentials(&mut self, proxy: &Proxy) {
        let request = self.expect(Method::GET, &consumer_secret_path(proxy)).await;
        let secret = json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": format!("{}-proxy", proxy.metadata.name.as_deref().unwrap_or_default()), "namespace": NAMESPACE},
            // base64 of "egress" and "kept-password-0123456789"
            "data": {"username": "ZWdyZXNz", "password": "a2VwdC1wYXNzd29yZC0wMTIzNDU2Nzg5"},
        });
        request.respond(StatusCode::OK, &secret);
    }

    /// The consumer Secret is applied; answers it as stored.
    pub async fn expect_consumer_secret_applied(&mut self, proxy: &Proxy) {
        let request = self.expect(Method::PATCH, &consumer_secret_path(proxy)).await;
        request.assert_server_side_apply();
        let body = request.body.clone();
        request.respond(StatusCode::OK, &body);
    }

    /// An Event about the Proxy with `reason` is created; answers it as stored.
    pub async fn expect_event(&mut self, proxy: &Proxy, reason: &str) {
        let request = self
            .expect(
                Method::POST,
                &format!("/apis/events.k8s.io/v1/namespaces/{NAMESPACE}/events"),
            )
            .await;
        assert_eq!(request.body["reason"], reason, "the event: {}", request.body);
        assert_eq!(request.body["regarding"]["name"], json!(proxy.metadata.name));
        let body = request.body.clone();
        request.respond(StatusCode::CREATED, &body);
    }
}

/// The fake provider on a unix socket of its own, and the operator's `Providers` configured to reach it as
/// [`PROVIDER`].
pub struct Backend {
    pub fake: FakeProvider,
    pub providers: Providers,
    stop: Option<oneshot::Sender<()>>,
    _dir: tempfile::TempDir,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field("fake", &self.fake)
            .finish_non_exhaustive()
    }
}

impl Backend {
    pub async fn start(options: FakeOptions) -> Self {
        Self::serve(options, 0).await
    }

    /// A backend whose deletions take a while: a deleted instance is still seen, Terminated, by the next
    /// `gets` Gets of it, as on clouds whose Delete returns before the machine is gone.
    pub async fn with_slow_deletes(options: FakeOptions, gets: usize) -> Self {
        Self::serve(options, gets).await
    }

    async fn serve(options: FakeOptions, gets_after_delete: usize) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fake.sock");
        let fake = FakeProvider::new(options);
        let provider = SlowDeletes {
            fake: fake.clone(),
            gets_after_delete,
            deleted: Arc::default(),
        };
        let bound = bind(&Listen::Unix(path.clone()), None, false).await.unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(bound.serve(provider, async move {
            let _ = stopped.await;
        }));
        let text = format!(
            "clusterId: {CLUSTER_ID}\nproviders:\n  {PROVIDER}:\n    type: fake\n    endpoint: unix://{}\n    \
             timeouts: {{getInfoSeconds: 5, createSeconds: 5, getSeconds: 5, deleteSeconds: 5, listSeconds: 5}}\n",
            path.display()
        );
        let config = provider_sdk::config::parse("operator.yaml", &text).unwrap();
        let providers = Providers::from_config(&config, &Metrics::default()).unwrap();
        Self {
            fake,
            providers,
            stop: Some(stop),
            _dir: dir,
        }
    }

    /// A reconcile context with `client` and this backend's providers.
    pub fn context(&self, client: kube::Client) -> Arc<Context> {
        Arc::new(Context::new(
            client,
            self.providers.clone(),
            CLUSTER_ID.to_owned(),
            Metrics::default(),
        ))
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// The fake, except that deleted instances linger for a number of Gets (see [`Backend::with_slow_deletes`]).
/// Every call still reaches the fake, so its call record stays complete.
#[derive(Clone, Debug)]
struct SlowDeletes {
    fake: FakeProvider,
    gets_after_delete: usize,
    /// Deleted instances by provider ID, with the Gets that will still see them.
    deleted: Arc<Mutex<HashMap<String, (Instance, usize)>>>,
}

impl Provider for SlowDeletes {
    fn info(&self) -> ProviderInfo {
        self.fake.info()
    }

    async fn create(&self, request: CreateRequest) -> Result<Instance, ProviderError> {
        self.fake.create(request).await
    }

    async fn get(&self, id: &ProviderId) -> Result<Instance, ProviderError> {
        let answer = self.fake.get(id).await;
        let mut deleted = self.deleted.lock().unwrap();
        match deleted.get_mut(id.as_str()) {
            Some((instance, left)) if *left > 0 => {
                *left -= 1;
                Ok(Instance {
                    state: InstanceState::Terminated,
                    ..instance.clone()
                })
            }
            _ => answer,
        }
    }

    async fn delete(&self, id: &ProviderId) -> Result<(), ProviderError> {
        let existing = self.fake.instances().into_iter().find(|i| i.provider_id == *id);
        self.fake.delete(id).await?;
        if let Some(instance) = existing
            && self.gets_after_delete > 0
        {
            self.deleted
                .lock()
                .unwrap()
                .insert(id.as_str().to_owned(), (instance, self.gets_after_delete));
        }
        Ok(())
    }

    async fn list_by_tag(&self, filter: ListFilter) -> Result<InstanceStream, ProviderError> {
        self.fake.list_by_tag(filter).await
    }

    async fn check(&self) -> Vec<CheckResult> {
        self.fake.check().await
    }
}

/// Runs one reconcile with a deadline, so a request nobody answers fails the test instead of hanging it.
pub async fn reconcile(
    proxy: Arc<Proxy>,
    ctx: Arc<Context>,
) -> Result<kube::runtime::controller::Action, super::Error> {
    tokio::time::timeout(Duration::from_secs(30), super::reconcile(proxy, ctx))
        .await
        .expect("the reconcile finishes")
}

/// Waits for the verifier; a failed expectation panics here with its own message.
pub async fn verified(verifier: tokio::task::JoinHandle<()>) {
    match tokio::time::timeout(Duration::from_secs(30), verifier)
        .await
        .expect("the verifier finishes")
    {
        Ok(()) => {}
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        Err(error) => panic!("the verifier did not finish: {error}"),
    }
}
