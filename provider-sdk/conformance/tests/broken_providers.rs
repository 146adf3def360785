//! The suite must catch real breakage: each deliberately broken provider below breaks one rule, and the
//! check for that rule must fail while a healthy fake passes every check.

use std::{
    collections::HashSet,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
};

use futures::StreamExt;
use provider_conformance::{Outcome, Params, Report};
use provider_sdk::{
    InstanceStream, Provider, ProviderError,
    client::{CallTimeouts, ProviderClient, ProviderEndpoint},
    model::*,
    proto::{self, provider_service_server::ProviderService},
    server::{Listen, ProviderGrpc, bind},
    testing::FakeProvider,
};
use tokio::sync::oneshot;
use tonic::{Request, Response, Status};

/// A provider daemon on a unix socket in a temporary directory, stopped when dropped.
struct Daemon {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    _stop: oneshot::Sender<()>,
}

async fn serve(provider: impl Provider) -> Daemon {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("provider.sock");
    let bound = bind(&Listen::Unix(path.clone()), None, false).await.unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(bound.serve(provider, async move {
        let _ = stopped.await;
    }));
    Daemon {
        _dir: dir,
        path,
        _stop: stop,
    }
}

async fn run_suite(daemon: &Daemon) -> Report {
    let endpoint = ProviderEndpoint::Unix(daemon.path.clone());
    let client = ProviderClient::connect_lazy(&endpoint, None, CallTimeouts::default()).unwrap();
    // The fake is instant; a short ready timeout keeps runs against providers that never finish short.
    let params = Params {
        ready_timeout_seconds: 3,
        ..Params::default()
    };
    provider_conformance::run(client.channel(), params).await.unwrap()
}

fn assert_fails(report: &Report, check: &str) {
    match report.outcome(check) {
        Some(Outcome::Failed(_)) => {}
        other => panic!("{check} should fail, got {other:?}\n{}", render(report)),
    }
}

fn render(report: &Report) -> String {
    let mut out = Vec::new();
    report.write(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// Delegates everything to the fake; each broken provider overrides one method.
macro_rules! delegate {
    ($($method:ident),*) => {
        $(delegate!(@one $method);)*
    };
    (@one info) => { fn info(&self) -> ProviderInfo { self.fake.info() } };
    (@one create) => {
        async fn create(&self, request: CreateRequest) -> Result<Instance, ProviderError> { self.fake.create(request).await }
    };
    (@one get) => { async fn get(&self, id: &ProviderId) -> Result<Instance, ProviderError> { self.fake.get(id).await } };
    (@one delete) => { async fn delete(&self, id: &ProviderId) -> Result<(), ProviderError> { self.fake.delete(id).await } };
    (@one list_by_tag) => {
        async fn list_by_tag(&self, filter: ListFilter) -> Result<InstanceStream, ProviderError> { self.fake.list_by_tag(filter).await }
    };
    (@one check) => { async fn check(&self) -> Vec<CheckResult> { self.fake.check().await } };
}

#[tokio::test]
async fn a_healthy_fake_passes_every_check() {
    let daemon = serve(FakeProvider::default()).await;
    let report = run_suite(&daemon).await;
    assert_eq!(report.failed(), 0, "\n{}", render(&report));
    assert!(report.passed() >= 18, "\n{}", render(&report));
}

/// Makes a new instance on every Create, as a backend without a lookup by name would.
struct NonIdempotentCreate {
    fake: FakeProvider,
    made: AtomicUsize,
}

impl Provider for NonIdempotentCreate {
    delegate!(info, get, delete, list_by_tag, check);

    async fn create(&self, mut request: CreateRequest) -> Result<Instance, ProviderError> {
        let n = self.made.fetch_add(1, Ordering::SeqCst);
        request.name = InstanceName::parse(&format!("{}-{n}", request.name), 63).unwrap();
        self.fake.create(request).await
    }
}

#[tokio::test]
async fn a_non_idempotent_create_is_reported() {
    let daemon = serve(NonIdempotentCreate {
        fake: FakeProvider::default(),
        made: AtomicUsize::new(0),
    })
    .await;
    let report = run_suite(&daemon).await;
    assert_fails(&report, "create.repeated-returns-the-same-instance");
    assert_fails(&report, "create.concurrent-same-name-makes-one-instance");
}

/// Answers NOT_FOUND to a second Delete instead of success.
struct DeleteFailsSecondTime {
    fake: FakeProvider,
    deleted: Mutex<HashSet<ProviderId>>,
}

impl Provider for DeleteFailsSecondTime {
    delegate!(info, create, get, list_by_tag, check);

    async fn delete(&self, id: &ProviderId) -> Result<(), ProviderError> {
        if !self.deleted.lock().unwrap().insert(id.clone()) {
            return Err(ProviderError::not_found("already deleted"));
        }
        self.fake.delete(id).await
    }
}

#[tokio::test]
async fn a_delete_that_fails_the_second_time_is_reported() {
    let daemon = serve(DeleteFailsSecondTime {
        fake: FakeProvider::default(),
        deleted: Mutex::default(),
    })
    .await;
    let report = run_suite(&daemon).await;
    assert_fails(&report, "delete.twice-succeeds");
}

/// Lists every managed instance, whatever cluster it is marked for.
struct ListIgnoresCluster {
    fake: FakeProvider,
}

impl Provider for ListIgnoresCluster {
    delegate!(info, create, get, delete, check);

    async fn list_by_tag(&self, filter: ListFilter) -> Result<InstanceStream, ProviderError> {
        let all =
            self.fake.instances().into_iter().filter(move |i| {
                i.marks.managed && filter.proxy_uid.as_ref().is_none_or(|uid| *uid == i.marks.proxy_uid)
            });
        Ok(futures::stream::iter(all.map(Ok).collect::<Vec<_>>()).boxed())
    }
}

#[tokio::test]
async fn a_listing_that_ignores_the_cluster_mark_is_reported() {
    let daemon = serve(ListIgnoresCluster {
        fake: FakeProvider::default(),
    })
    .await;
    let report = run_suite(&daemon).await;
    assert_fails(&report, "list.excludes-other-clusters");
}

/// Says it deleted but leaves the instance in place.
struct DeleteDoesNothing {
    fake: FakeProvider,
}

impl Provider for DeleteDoesNothing {
    delegate!(info, create, get, list_by_tag, check);

    async fn delete(&self, _id: &ProviderId) -> Result<(), ProviderError> {
        Ok(())
    }
}

#[tokio::test]
async fn a_failed_cleanup_fails_the_run() {
    let daemon = serve(DeleteDoesNothing {
        fake: FakeProvider::new(FakeOptions::default()),
    })
    .await;
    let report = run_suite(&daemon).await;
    assert_fails(&report, "get.after-delete-is-not-found");
    assert_fails(&report, "cleanup.leaves-nothing-behind");
}

use provider_sdk::testing::FakeOptions;

/// A provider written without the SDK that answers bare statuses: no ErrorInfo, no BadRequest.
#[derive(Clone)]
struct StripDetails(Arc<ProviderGrpc<FakeProvider>>);

fn strip<T>(result: Result<Response<T>, Status>) -> Result<Response<T>, Status> {
    result.map_err(|status| Status::new(status.code(), status.message()))
}

#[tonic::async_trait]
impl ProviderService for StripDetails {
    async fn get_info(&self, r: Request<proto::GetInfoRequest>) -> Result<Response<proto::GetInfoResponse>, Status> {
        strip(self.0.get_info(r).await)
    }
    async fn create(&self, r: Request<proto::CreateRequest>) -> Result<Response<proto::CreateResponse>, Status> {
        strip(self.0.create(r).await)
    }
    async fn get(&self, r: Request<proto::GetRequest>) -> Result<Response<proto::GetResponse>, Status> {
        strip(self.0.get(r).await)
    }
    async fn delete(&self, r: Request<proto::DeleteRequest>) -> Result<Response<proto::DeleteResponse>, Status> {
        strip(self.0.delete(r).await)
    }
    type ListByTagStream = <ProviderGrpc<FakeProvider> as ProviderService>::ListByTagStream;
    async fn list_by_tag(
        &self,
        r: Request<proto::ListByTagRequest>,
    ) -> Result<Response<Self::ListByTagStream>, Status> {
        strip(self.0.list_by_tag(r).await)
    }
    async fn check(&self, r: Request<proto::CheckRequest>) -> Result<Response<proto::CheckResponse>, Status> {
        strip(self.0.check(r).await)
    }
}

#[tokio::test]
async fn errors_without_error_info_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bare.sock");
    let listener = tokio::net::UnixListener::bind(&path).unwrap();
    let service = StripDetails(Arc::new(ProviderGrpc::new(FakeProvider::default())));
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(proto::provider_service_server::ProviderServiceServer::new(service))
            .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener)),
    );
    let daemon = Daemon {
        _dir: dir,
        path,
        _stop: oneshot::channel().0,
    };
    let report = run_suite(&daemon).await;
    assert_fails(&report, "errors.carry-error-info-with-the-contract-domain");
    assert_fails(&report, "validate.bad-fields-are-refused-before-any-backend-call");
}
