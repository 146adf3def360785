//! `FakeProvider`: a realistic in-memory backend. Instances spend a provisioning window before they run,
//! calls take a configurable latency, and faults can be queued per RPC.

use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    net::Ipv4Addr,
    sync::{Arc, Mutex, MutexGuard},
    time::{Duration, SystemTime},
};

use futures::StreamExt;

use super::faults::{Fault, RecordedCall, Rpc};
use crate::{
    CONTRACT_MINOR_VERSION,
    check::REASON_QUOTA_EXHAUSTED,
    error::{PermanentKind, ProviderError, TransientKind, reason},
    model::*,
    provider::{InstanceStream, Provider},
};

pub const FAKE_PROVIDER_TYPE: &str = "fake";

/// How the fake behaves.
#[derive(Clone, Debug)]
pub struct FakeOptions {
    /// Time from Create until the instance is Running.
    pub provisioning: Duration,
    /// Added to every call before it acts.
    pub latency: Duration,
    /// Most instances at once; Create beyond it is a quota error.
    pub capacity: usize,
}

impl Default for FakeOptions {
    fn default() -> Self {
        Self {
            provisioning: Duration::ZERO,
            latency: Duration::ZERO,
            capacity: 100_000,
        }
    }
}

#[derive(Clone, Debug)]
struct Record {
    instance: Instance,
    fingerprint: String,
}

#[derive(Debug, Default)]
struct State {
    instances: BTreeMap<String, Record>,
    next_address: u32,
    calls: Vec<RecordedCall>,
    faults: HashMap<Rpc, VecDeque<Fault>>,
}

/// The in-memory backend. Clones share state, so a test keeps one handle while a server owns another.
#[derive(Clone, Debug, Default)]
pub struct FakeProvider {
    options: FakeOptions,
    state: Arc<Mutex<State>>,
}

impl FakeProvider {
    pub fn new(options: FakeOptions) -> Self {
        Self {
            options,
            state: Arc::default(),
        }
    }

    /// Queues `fault` for the next call of `rpc`.
    pub fn inject(&self, rpc: Rpc, fault: Fault) {
        self.state().faults.entry(rpc).or_default().push_back(fault);
    }

    pub fn calls(&self) -> Vec<RecordedCall> {
        self.state().calls.clone()
    }

    pub fn call_count(&self, rpc: Rpc) -> usize {
        self.state().calls.iter().filter(|call| call.rpc == rpc).count()
    }

    /// Every instance the backend holds, whoever made it.
    pub fn instances(&self) -> Vec<Instance> {
        let now = SystemTime::now();
        self.state()
            .instances
            .values()
            .map(|r| self.observed(&r.instance, now))
            .collect()
    }

    /// Puts an instance into the backend as if something else had made it (unmarked, foreign, old).
    pub fn seed(&self, name: &str, marks: Marks, created_at: SystemTime) -> Instance {
        let mut state = self.state();
        let ipv4 = next_address(&mut state);
        let instance = Instance {
            provider_id: ProviderId::new(FAKE_PROVIDER_TYPE, name),
            name: name.to_owned(),
            state: InstanceState::Running,
            ipv4: Some(ipv4),
            created_at,
            marks,
        };
        let record = Record {
            instance: instance.clone(),
            fingerprint: String::new(),
        };
        state.instances.insert(name.to_owned(), record);
        instance
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic injected by a test must not poison the fake for the rest of it.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records the call, waits the latency, and applies a queued fault. `Ok(true)` means "act, then lose
    /// the answer".
    async fn enter(&self, rpc: Rpc, subject: &str) -> Result<bool, ProviderError> {
        let fault = {
            let mut state = self.state();
            state.calls.push(RecordedCall {
                rpc,
                subject: subject.to_owned(),
                at: SystemTime::now(),
            });
            state.faults.get_mut(&rpc).and_then(VecDeque::pop_front)
        };
        if !self.options.latency.is_zero() {
            tokio::time::sleep(self.options.latency).await;
        }
        match fault {
            None => Ok(false),
            Some(Fault::Error(error)) => Err(error),
            Some(Fault::CrashAfterAct) => Ok(true),
            Some(Fault::Panic) => panic!("injected panic in {rpc:?}"),
            Some(Fault::Hang) => std::future::pending().await,
        }
    }

    /// The instance as Get would see it now: Provisioning until the window has passed.
    fn observed(&self, instance: &Instance, now: SystemTime) -> Instance {
        let mut seen = instance.clone();
        let age = now.duration_since(instance.created_at).unwrap_or_default();
        if seen.state == InstanceState::Provisioning && age >= self.options.provisioning {
            seen.state = InstanceState::Running;
        }
        seen
    }

    fn parse_id(&self, id: &ProviderId) -> Result<String, ProviderError> {
        InstanceName::parse(id.rest(), DEFAULT_MAX_NAME_LENGTH)
            .map(|name| name.as_str().to_owned())
            .map_err(|problem| {
                ProviderError::malformed_provider_id(format!("{:?}: the name part {problem}", id.as_str()))
            })
    }
}

fn lost_answer() -> ProviderError {
    ProviderError::transient(
        reason::BACKEND_UNAVAILABLE,
        "connection reset before the answer (simulated crash)",
    )
}

fn next_address(state: &mut State) -> Ipv4Addr {
    state.next_address += 1;
    // 198.18.0.0/15, the benchmarking range (RFC 2544): routable in form, so Kubernetes accepts it in an
    // EndpointSlice, and never used on a real network. Nothing listens there; tests never dial it.
    Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 18, 0, 0)) + (state.next_address % (1 << 17)))
}

impl Provider for FakeProvider {
    fn info(&self) -> ProviderInfo {
        ProviderInfo {
            provider_type: FAKE_PROVIDER_TYPE.to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            contract_minor_version: CONTRACT_MINOR_VERSION,
            profiles: Profiles {
                primary_key: Some(PrimaryKey::NameIsKey),
                readiness: Some(Readiness::ProvisioningWindow),
                ip_source: Some(IpSource::AssignedAtCreate),
                gc_mark: Some(GcMark::NativeLabels),
                created_at: Some(CreatedAtSource::WrittenAtCreate),
                provisioning_state: Some(ProvisioningState::Native),
                create_return: Some(CreateReturn::Submit),
                async_ops: Some(AsyncOps::None),
                delete_return: Some(DeleteReturn::Waits),
                secondary_resources: Some(SecondaryResources::None),
                list_partial: Some(ListPartial::FailWhole),
                not_found: Some(NotFoundSignal::ErrorCode),
                quota: Some(QuotaSignal::Detected),
                credentials: Some(CredentialSource::None),
                client_kind: Some(ClientKind::Local),
                child_spans: Some(ChildSpans::None),
                timeouts: Some(Timeouts::CtxOnly),
                logging: Some(Logging::OutcomeOnly),
                backend_test: Some(BackendTest::ClusterE2e),
            },
            limits: Limits {
                max_name_length: DEFAULT_MAX_NAME_LENGTH,
                max_cloud_init_bytes: 64 * 1024,
            },
        }
    }

    async fn create(&self, request: CreateRequest) -> Result<Instance, ProviderError> {
        let lose_answer = self.enter(Rpc::Create, request.name.as_str()).await?;
        let fingerprint = request.spec_fingerprint();
        let now = SystemTime::now();
        let instance = {
            let mut state = self.state();
            match state.instances.get(request.name.as_str()) {
                Some(existing) if existing.fingerprint == fingerprint => self.observed(&existing.instance, now),
                Some(_) => {
                    return Err(ProviderError::permanent(
                        PermanentKind::AlreadyExists,
                        reason::NAME_IN_USE,
                        format!("instance {} exists with another spec", request.name),
                    ));
                }
                None if state.instances.len() >= self.options.capacity => {
                    return Err(ProviderError::quota(
                        REASON_QUOTA_EXHAUSTED,
                        "instances",
                        format!("the fake holds at most {} instances", self.options.capacity),
                    ));
                }
                None => {
                    let ipv4 = next_address(&mut state);
                    let instance = Instance {
                        provider_id: ProviderId::new(FAKE_PROVIDER_TYPE, request.name.as_str()),
                        name: request.name.as_str().to_owned(),
                        state: InstanceState::Provisioning,
                        ipv4: Some(ipv4),
                        created_at: now,
                        marks: Marks {
                            managed: true,
                            proxy_uid: request.proxy_uid,
                            cluster_id: request.cluster_id,
                        },
                    };
                    let record = Record {
                        instance: instance.clone(),
                        fingerprint,
                    };
                    state.instances.insert(instance.name.clone(), record);
                    self.observed(&instance, now)
                }
            }
        };
        if lose_answer { Err(lost_answer()) } else { Ok(instance) }
    }

    async fn get(&self, id: &ProviderId) -> Result<Instance, ProviderError> {
        let lose_answer = self.enter(Rpc::Get, id.as_str()).await?;
        let name = self.parse_id(id)?;
        let found = self
            .state()
            .instances
            .get(&name)
            .map(|r| self.observed(&r.instance, SystemTime::now()));
        match (found, lose_answer) {
            (_, true) => Err(lost_answer()),
            (Some(instance), false) => Ok(instance),
            (None, false) => Err(ProviderError::not_found(format!("instance {id} does not exist"))),
        }
    }

    async fn delete(&self, id: &ProviderId) -> Result<(), ProviderError> {
        let lose_answer = self.enter(Rpc::Delete, id.as_str()).await?;
        let name = self.parse_id(id)?;
        self.state().instances.remove(&name);
        if lose_answer { Err(lost_answer()) } else { Ok(()) }
    }

    async fn list_by_tag(&self, filter: ListFilter) -> Result<InstanceStream, ProviderError> {
        if self.enter(Rpc::ListByTag, "").await? {
            return Err(ProviderError::transient_kind(
                TransientKind::Aborted,
                reason::BACKEND_UNAVAILABLE,
                "listing cut off (simulated crash)",
            ));
        }
        let now = SystemTime::now();
        let matching: Vec<Instance> = self
            .state()
            .instances
            .values()
            .filter(|r| filter.matches(&r.instance.marks))
            .map(|r| self.observed(&r.instance, now))
            .collect();
        Ok(futures::stream::iter(matching.into_iter().map(Ok)).boxed())
    }

    async fn check(&self) -> Vec<CheckResult> {
        let in_use = match self.enter(Rpc::Check, "").await {
            Ok(_) => self.state().instances.len(),
            Err(error) => {
                return vec![CheckResult::failed("backend", error.reason(), error.to_string())];
            }
        };
        let capacity = self.options.capacity;
        let backend = CheckResult::ok("backend", "in-memory backend answering");
        let room = if in_use < capacity {
            CheckResult::ok(
                "capacity",
                format!("{} of {capacity} instances free", capacity - in_use),
            )
        } else {
            CheckResult::failed(
                "capacity",
                REASON_QUOTA_EXHAUSTED,
                format!("all {capacity} instances in use"),
            )
        };
        vec![
            room.with_detail("in_use", in_use.to_string())
                .with_detail("capacity", capacity.to_string()),
            backend,
        ]
    }
}
