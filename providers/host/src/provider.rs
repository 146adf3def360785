//! `HostProvider`: the shared state (the instances this daemon supervises, keyed by name, and the per-name
//! locks), the contract's `Provider` implementation that hands each RPC to its module, and the declared
//! profiles.

use std::{
    collections::BTreeMap,
    fs,
    net::Ipv4Addr,
    path::PathBuf,
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicBool, Ordering},
    },
};

use provider_sdk::detached::run_detached;
use provider_sdk::{CONTRACT_MINOR_VERSION, InstanceStream, Provider, ProviderError, model::*};

use crate::{
    config::Settings,
    error::{HostError, classify},
    record::Record,
    startup::{self, StartError},
    supervisor::{OnServed, Supervisor, SupervisorConfig, Target},
};
use provider_sdk::locks::NameLocks;

pub const PROVIDER_TYPE: &str = "host";

/// Prefix of a directory Delete is removing (never a valid instance name, which starts with a letter).
pub const TRASH_PREFIX: &str = ".deleted-";

/// One instance this daemon supervises.
#[derive(Debug)]
pub struct Entry {
    pub name: String,
    pub address: Ipv4Addr,
    pub port: u16,
    pub dir: PathBuf,
    /// Set when Delete has begun: a repeated Delete returns at once.
    pub deleting: AtomicBool,
    /// Serialises writes of the record (Delete's mark and the supervisor's first-served marker).
    pub record_lock: Arc<Mutex<()>>,
    /// The record a Create is writing: Get and ListByTag show the instance (Provisioning) from the moment
    /// its address is taken, not only once the file exists.
    pub pending: Mutex<Option<Record>>,
    pub supervisor: Supervisor,
}

impl Entry {
    /// The record a Create is still writing, if any.
    pub fn pending(&self) -> Option<Record> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[derive(Debug)]
pub struct Inner {
    pub settings: Settings,
    pub supervision: Arc<SupervisorConfig>,
    /// Held briefly, never across an await.
    pub entries: Mutex<BTreeMap<String, Arc<Entry>>>,
    pub locks: NameLocks,
    /// Holds the state directory's lock for the daemon's life, so two daemons never share it.
    pub _state_lock: fs::File,
}

impl Inner {
    pub fn dir(&self, name: &str) -> PathBuf {
        self.settings.state_dir.join(name)
    }

    /// Where Delete moves an instance's directory before removing it.
    pub fn trash_dir(&self, name: &str) -> PathBuf {
        self.settings.state_dir.join(format!("{TRASH_PREFIX}{name}"))
    }

    pub fn entries(&self) -> MutexGuard<'_, BTreeMap<String, Arc<Entry>>> {
        self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn entry(&self, name: &str) -> Option<Arc<Entry>> {
        self.entries().get(name).cloned()
    }

    /// Starts supervising `entry`: adopting `adopt` when given, else starting a new tinyproxy. The first
    /// time the proxy listens, the record gets its first-served marker.
    pub fn launch(&self, entry: &Entry, adopt: Option<u32>) {
        let target = Target {
            name: entry.name.clone(),
            dir: entry.dir.clone(),
            address: entry.address,
            port: entry.port,
        };
        let (dir, lock) = (entry.dir.clone(), entry.record_lock.clone());
        let on_served: OnServed = Box::new(move || {
            tokio::task::spawn_blocking(move || crate::record::mark_served(&dir, &lock));
        });
        entry
            .supervisor
            .launch(self.supervision.clone(), target, adopt, on_served);
    }

    /// The name in `host://<name>`, strictly: exactly one valid instance name, nothing else.
    pub fn parse_id(id: &ProviderId) -> Result<String, HostError> {
        InstanceName::parse(id.rest(), DEFAULT_MAX_NAME_LENGTH)
            .map(|name| name.as_str().to_owned())
            .map_err(|problem| HostError::MalformedId {
                id: id.as_str().to_owned(),
                problem: format!("the part after host:// must be an instance name: {problem}"),
            })
    }
}

/// The host provider. Clones share state.
#[derive(Clone, Debug)]
pub struct HostProvider {
    inner: Arc<Inner>,
}

impl HostProvider {
    /// Opens the state directory, re-adopts or restarts the recorded instances, and finishes deletions a
    /// previous daemon began. Must run inside a Tokio runtime: supervision tasks are spawned here.
    pub fn start(settings: Settings) -> Result<Self, StartError> {
        startup::start(settings).map(|inner| Self { inner })
    }
}

/// Whether the caller of a detached call still waits for its answer.
#[derive(Clone, Debug, Default)]
pub struct Caller(Arc<AtomicBool>);

impl Caller {
    pub fn gone(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

struct GoneOnDrop(Arc<AtomicBool>);

impl Drop for GoneOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Runs `work` as a task of its own, so that a caller whose deadline passes (the handler future is
/// dropped) does not cut a Create or Delete off half-way: the task finishes and a retry finds its result.
/// The task can ask whether its caller is gone, to skip work nobody started yet.
async fn detached<T: Send + 'static, F>(work: impl FnOnce(Caller) -> F) -> Result<T, ProviderError>
where
    F: Future<Output = Result<T, HostError>> + Send + 'static,
{
    let caller = Caller::default();
    let _gone_on_drop = GoneOnDrop(caller.0.clone());
    run_detached(work(caller)).await.map_err(classify)
}

impl Provider for HostProvider {
    fn info(&self) -> ProviderInfo {
        ProviderInfo {
            provider_type: PROVIDER_TYPE.to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            contract_minor_version: CONTRACT_MINOR_VERSION,
            profiles: profiles(),
            limits: Limits {
                max_name_length: DEFAULT_MAX_NAME_LENGTH,
                max_cloud_init_bytes: 0,
            },
        }
    }

    async fn create(&self, request: CreateRequest) -> Result<Instance, ProviderError> {
        crate::create::check_request(&request).map_err(classify)?;
        let inner = self.inner.clone();
        detached(|caller| crate::create::create(inner, request, caller)).await
    }

    async fn get(&self, id: &ProviderId) -> Result<Instance, ProviderError> {
        crate::read::get(&self.inner, id).await.map_err(classify)
    }

    async fn delete(&self, id: &ProviderId) -> Result<(), ProviderError> {
        let name = Inner::parse_id(id).map_err(classify)?;
        if crate::delete::already_deleting(&self.inner, &name) {
            return Ok(());
        }
        let inner = self.inner.clone();
        detached(|_| crate::delete::delete(inner, name)).await
    }

    async fn list_by_tag(&self, filter: ListFilter) -> Result<InstanceStream, ProviderError> {
        crate::read::list(self.inner.clone(), filter).await.map_err(classify)
    }

    async fn check(&self) -> Vec<CheckResult> {
        crate::check::check(&self.inner).await
    }
}

/// The declared profiles (contract §4); docs/host-provider-spec.md justifies each.
pub fn profiles() -> Profiles {
    Profiles {
        primary_key: Some(PrimaryKey::NameIsKey),
        readiness: Some(Readiness::ProvisioningWindow),
        ip_source: Some(IpSource::AssignedAtCreate),
        gc_mark: Some(GcMark::WrittenMetadata),
        created_at: Some(CreatedAtSource::WrittenAtCreate),
        provisioning_state: Some(ProvisioningState::Marker),
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
        timeouts: Some(Timeouts::PerCall),
        logging: Some(Logging::Tiered),
        backend_test: Some(BackendTest::ClusterE2e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_axis_is_declared() {
        let undeclared: Vec<_> = profiles()
            .entries()
            .into_iter()
            .filter(|(_, profile)| profile.is_none())
            .collect();
        assert!(undeclared.is_empty(), "{undeclared:?}");
        assert_eq!(profiles().entries().len(), 19);
    }

    #[test]
    fn ids_parse_only_as_host_slash_slash_and_one_instance_name() {
        let parse = |id: &str| Inner::parse_id(&ProviderId::parse_for(id, PROVIDER_TYPE).unwrap());
        assert_eq!(parse("host://egress-a1").unwrap(), "egress-a1");
        for bad in [
            "host://Egress",
            "host://a/b",
            "host://../../etc/passwd",
            "host://a-",
            "host://a%2Fb",
            "host://egress-a1/",
            &format!("host://{}", "a".repeat(64)),
        ] {
            let error = classify(parse(bad).unwrap_err());
            assert_eq!(error.reason(), "MALFORMED_PROVIDER_ID", "{bad}");
        }
    }
}
