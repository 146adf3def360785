//! Daemon start: open and lock the state directory, then bring every record back under supervision.
//!
//! A record that should run is **re-adopted** when its pid file names a live tinyproxy started with its
//! config file (the proxy kept serving while the daemon was away: an upgrade or a crash of the daemon
//! interrupts no traffic); otherwise its config file is rendered again from the record and the password
//! read back from the old file, and a new tinyproxy is started. A record whose Delete had begun is
//! deleted to the end. A directory without a record, or a `.deleted-*` one, is what a Create or Delete cut
//! off before (or after) its record left behind; nothing runs from it, so it is removed.

use std::{
    fs::{self, DirBuilder, OpenOptions, TryLockError},
    io,
    os::unix::fs::DirBuilderExt,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, atomic::AtomicBool},
};

use provider_sdk::model::{DEFAULT_MAX_NAME_LENGTH, InstanceName};
use secrecy::ExposeSecret;

use crate::{
    config::Settings,
    process,
    provider::{Entry, Inner, TRASH_PREFIX},
    record::write_atomic,
    record::{Desired, Record},
    supervisor::{Supervisor, SupervisorConfig},
    tinyproxy::{self, CONF_FILE, ProxyConf},
};
use provider_sdk::locks::NameLocks;

/// Why the daemon cannot start (exit code 1).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("state directory {path}: {source}", path = path.display())]
    StateDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("state directory {path} is in use by another egress-provider-host", path = path.display())]
    InUse { path: PathBuf },
}

const LOCK_FILE: &str = ".lock";

pub fn start(settings: Settings) -> Result<Arc<Inner>, StartError> {
    let dir = settings.state_dir.clone();
    let fail = |source| StartError::StateDir {
        path: dir.clone(),
        source,
    };
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(fail)?;
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(LOCK_FILE))
        .map_err(fail)?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => return Err(StartError::InUse { path: dir }),
        Err(TryLockError::Error(source)) => return Err(fail(source)),
    }
    let mut names: Vec<String> = fs::read_dir(&dir)
        .map_err(fail)?
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    for trash in names.iter().filter(|name| name.starts_with(TRASH_PREFIX)) {
        tracing::info!(directory = %trash, "removing what a cut-off Delete left");
        if let Err(error) = fs::remove_dir_all(dir.join(trash)) {
            tracing::warn!(directory = %trash, %error, "could not remove a Delete's leftover");
        }
    }
    names.retain(|name| InstanceName::parse(name, DEFAULT_MAX_NAME_LENGTH).is_ok());
    let supervision = Arc::new(SupervisorConfig {
        tinyproxy: settings.tinyproxy_path.clone(),
        backoff_initial: settings.backoff_initial,
        backoff_max: settings.backoff_max,
        crash_exits: settings.crash_exits,
        crash_window: settings.crash_window,
        stop_timeout: settings.stop_timeout,
    });
    let inner = Arc::new(Inner {
        settings,
        supervision,
        entries: Mutex::default(),
        locks: NameLocks::default(),
        _state_lock: lock,
    });
    for name in names {
        restore(&inner, name);
    }
    let count = inner.entries().len();
    tracing::info!(state_dir = %dir.display(), instances = count, "state directory loaded");
    Ok(inner)
}

/// Brings one instance directory back: supervised, deleted to the end, or removed as a leftover.
fn restore(inner: &Arc<Inner>, name: String) {
    let dir = inner.dir(&name);
    let record = match Record::load(&dir) {
        Ok(Some(record)) if record.name == name => record,
        Ok(Some(record)) => {
            tracing::error!(instance = %name, recorded = %record.name, "record names another instance; left alone");
            return;
        }
        Ok(None) => {
            tracing::info!(instance = %name, "removing a directory without a record (a cut-off Create or Delete)");
            if let Err(error) = fs::remove_dir_all(&dir) {
                tracing::warn!(instance = %name, %error, "could not remove the leftover directory");
            }
            return;
        }
        Err(error) => {
            tracing::error!(instance = %name, %error, "cannot read the record; the instance is left alone");
            return;
        }
    };
    if let Some(other) = inner.entries().values().find(|e| e.address == record.address) {
        tracing::error!(
            instance = %name, address = %record.address, holder = %other.name,
            "record claims an address another record holds; left alone"
        );
        return;
    }
    if !inner.settings.pool.contains(record.address) {
        tracing::warn!(
            instance = %name, address = %record.address,
            "the address is no longer in the pool; the instance keeps it until it is deleted"
        );
    }
    let entry = Arc::new(Entry {
        name: name.clone(),
        address: record.address,
        port: record.port,
        dir: dir.clone(),
        deleting: AtomicBool::new(record.desired == Desired::Deleted),
        record_lock: Arc::default(),
        pending: Mutex::new(None),
        supervisor: Supervisor::new(record.first_served_at_ms.is_some()),
    });
    inner.entries().insert(name.clone(), entry.clone());
    if record.desired == Desired::Deleted {
        tracing::info!(instance = %name, "finishing a Delete a previous daemon began");
        let inner = inner.clone();
        tokio::spawn(async move {
            if let Err(error) = crate::delete::delete(inner, name.clone()).await {
                tracing::warn!(instance = %name, %error, "could not finish the Delete; the next Delete retries it");
            }
        });
        return;
    }
    let conf = dir.join(CONF_FILE);
    let adopt =
        process::read_pid(&dir).filter(|pid| process::is_our_tinyproxy(*pid, &inner.settings.tinyproxy_path, &conf));
    if adopt.is_none()
        && let Err(why) = render_again(inner, &record, &dir)
    {
        tracing::error!(instance = %name, why = %why, "cannot start the instance; it stays Stopped until deleted");
        entry.supervisor.fail(why);
        return;
    }
    inner.launch(&entry, adopt);
}

/// Writes the config file again from the record and the current settings, so that a changed setting
/// (`maxClients`, the state directory's path) or a newer template applies to restarted proxies.
fn render_again(inner: &Inner, record: &Record, dir: &Path) -> Result<(), String> {
    let path = dir.join(CONF_FILE);
    let old = fs::read_to_string(&path).map_err(|error| format!("reading {}: {error}", path.display()))?;
    let password = tinyproxy::read_password(&old)
        .ok_or_else(|| format!("{} has no BasicAuth line to read the password from", path.display()))?;
    let text = tinyproxy::render(&ProxyConf {
        name: &record.name,
        address: record.address,
        port: record.port,
        username: &record.username,
        password: &password,
        allowed_source_ranges: &record.allowed_source_ranges,
        max_clients: inner.settings.max_clients,
        dir,
    });
    write_atomic(&path, text.expose_secret().as_bytes()).map_err(|error| format!("writing {}: {error}", path.display()))
}
