//! Create (`create-return: submit`), idempotent by name under the name's lock:
//!
//! 1. the record is looked up by name: found with the same fingerprint, it is the answer; with another,
//!    `NAME_IN_USE`; being deleted, `INSTANCE_DELETING`; not found and the caller already gone, nothing is
//!    begun;
//! 2. an address is taken from the pool (the first free one whose port can be bound) and held in memory
//!    with the record about to be written, which Get and ListByTag show from now on;
//! 3. the directory, the 0600 config file and the record are written (the record last: until it exists,
//!    nothing runs and a retry, or the next daemon start, finds only a leftover directory);
//! 4. supervision starts the proxy, and Create answers Provisioning.
//!
//! The whole sequence runs as a task of its own, so a caller that gives up once it has begun does not cut
//! it off.

use std::{
    fs::DirBuilder,
    io,
    net::{Ipv4Addr, TcpListener},
    os::unix::fs::DirBuilderExt,
    path::Path,
    sync::{Arc, Mutex, atomic::AtomicBool},
};

use provider_sdk::model::{CreateRequest, Instance, InstanceState, Protocol};
use secrecy::{ExposeSecret, SecretString};

use crate::{
    error::{HostError, InvalidField},
    provider::{Caller, Entry, Inner, PROVIDER_TYPE},
    read,
    record::{Desired, RECORD_FILE, RECORD_VERSION, Record, RecordMarks, blocking, now_ms, write_atomic},
    supervisor::Supervisor,
    tinyproxy::{self, CONF_FILE, ProxyConf},
};

/// What tinyproxy cannot do although the SDK's validation allowed it; every problem at once.
pub fn check_request(request: &CreateRequest) -> Result<(), HostError> {
    let mut invalid = Vec::new();
    if request.proxy.protocol == Protocol::Socks5 {
        invalid.push(InvalidField::Socks5);
    }
    let auth = &request.proxy.auth;
    if !tinyproxy::is_basic_auth_word(&auth.username) {
        invalid.push(InvalidField::Username(auth.username.clone()));
    }
    if !tinyproxy::is_basic_auth_word(auth.password.expose_secret()) {
        invalid.push(InvalidField::Password);
    }
    if invalid.is_empty() {
        Ok(())
    } else {
        Err(HostError::Invalid(invalid))
    }
}

pub async fn create(inner: Arc<Inner>, request: CreateRequest, caller: Caller) -> Result<Instance, HostError> {
    let name = request.name.as_str().to_owned();
    let _guard = inner
        .locks
        .lock(&name, inner.settings.lock_timeout)
        .await
        .ok_or_else(|| HostError::Busy { name: name.clone() })?;
    let dir = inner.dir(&name);
    let fingerprint = request.spec_fingerprint();
    let existing = Record::load_async(&dir)
        .await
        .map_err(HostError::storage("reading", dir.join(RECORD_FILE)))?;
    if let Some(record) = existing {
        return match record.desired {
            Desired::Deleted => Err(HostError::Deleting { name }),
            Desired::Running if !record.marks.managed || record.spec_fingerprint != fingerprint => {
                Err(HostError::NameInUse { name })
            }
            Desired::Running => Ok(read::instance_now(&inner, &record)),
        };
    }
    if caller.gone() {
        // Nothing exists yet and nobody waits: a retry makes the instance.
        return Err(HostError::Abandoned { name });
    }
    let record = |address| Record {
        version: RECORD_VERSION,
        name: name.clone(),
        address,
        port: request.proxy.port,
        username: request.proxy.auth.username.clone(),
        allowed_source_ranges: request.proxy.allowed_source_ranges.clone(),
        marks: RecordMarks {
            managed: true,
            proxy_uid: request.proxy_uid.clone(),
            cluster_id: request.cluster_id.clone(),
        },
        spec_fingerprint: fingerprint.clone(),
        created_at_ms: now_ms(),
        desired: Desired::Running,
        first_served_at_ms: None,
    };
    let entry = allocate(&inner, &name, request.proxy.port, record)?;
    let record = entry.pending().expect("a new entry holds its pending record");
    let conf = tinyproxy::render(&ProxyConf {
        name: &name,
        address: entry.address,
        port: request.proxy.port,
        username: &request.proxy.auth.username,
        password: &request.proxy.auth.password,
        allowed_source_ranges: &request.proxy.allowed_source_ranges,
        max_clients: inner.settings.max_clients,
        dir: &dir,
    });
    let written = {
        let (dir, record) = (dir.clone(), record.clone());
        blocking(move || write_instance(&dir, &conf, &record)).await
    };
    if let Err(error) = written {
        inner.entries().remove(&name);
        let _ = tokio::fs::remove_dir_all(&dir).await;
        return Err(HostError::storage("writing the files of", dir)(error));
    }
    *entry.pending.lock().unwrap_or_else(|p| p.into_inner()) = None;
    inner.launch(&entry, None);
    tracing::info!(instance = %name, address = %entry.address, port = record.port, "created the instance");
    Ok(record.instance(PROVIDER_TYPE, InstanceState::Provisioning))
}

/// Takes the first pool address that no instance holds and on which the port can be bound now, and
/// holds it for `name` with the record `record` makes for it (in memory until the file is written).
fn allocate(
    inner: &Inner,
    name: &str,
    port: u16,
    record: impl FnOnce(Ipv4Addr) -> Record,
) -> Result<Arc<Entry>, HostError> {
    let mut entries = inner.entries();
    if entries.contains_key(name) {
        // Only a Delete still freeing the address leaves an entry without a record under the lock.
        return Err(HostError::Deleting { name: name.to_owned() });
    }
    let held: Vec<Ipv4Addr> = entries.values().map(|e| e.address).collect();
    let pool = &inner.settings.pool;
    let (mut in_use, mut port_taken, mut unconfigured) = (0, 0, 0);
    for &address in pool.addresses() {
        if held.contains(&address) {
            in_use += 1;
            continue;
        }
        tracing::debug!(%address, port, "trying a pool address");
        match TcpListener::bind((address, port)) {
            Ok(_) => {
                let entry = Arc::new(Entry {
                    name: name.to_owned(),
                    address,
                    port,
                    dir: inner.dir(name),
                    deleting: AtomicBool::new(false),
                    record_lock: Arc::default(),
                    pending: Mutex::new(Some(record(address))),
                    supervisor: Supervisor::new(false),
                });
                entries.insert(name.to_owned(), entry.clone());
                return Ok(entry);
            }
            Err(error) if error.kind() == io::ErrorKind::PermissionDenied => {
                return Err(HostError::PortNeedsPrivilege { port });
            }
            Err(error) if error.kind() == io::ErrorKind::AddrInUse => {
                tracing::warn!(%address, port, "another process holds the port on a pool address; skipped");
                port_taken += 1;
            }
            Err(error) => {
                tracing::warn!(%address, port, %error, "cannot bind a pool address (not configured on this host?); skipped");
                unconfigured += 1;
            }
        }
    }
    Err(HostError::PoolExhausted {
        port,
        total: pool.len(),
        in_use,
        port_taken,
        unconfigured,
    })
}

/// The instance's directory (0700), config file (0600) and record, the record last.
fn write_instance(dir: &Path, conf: &SecretString, record: &Record) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    write_atomic(&dir.join(CONF_FILE), conf.expose_secret().as_bytes())?;
    record.save(dir)
}
