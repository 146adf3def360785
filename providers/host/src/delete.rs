//! Delete (`delete-return: waits`): mark the record Deleted, stop the proxy (SIGTERM, SIGKILL after the
//! stop budget), move the directory away in one rename and remove it, and free the address. Every step is
//! found done on a retry, and a daemon that stops in the middle finishes the job when it starts again.

use std::{
    io,
    sync::{Arc, Mutex, atomic::Ordering},
    time::{Duration, Instant},
};

use crate::{
    error::HostError,
    process,
    provider::{Entry, Inner},
    record::{Desired, RECORD_FILE, Record, blocking},
    tinyproxy::CONF_FILE,
};

/// True when a Delete of `name` is already under way: a repeated Delete then answers at once.
pub fn already_deleting(inner: &Inner, name: &str) -> bool {
    inner
        .entry(name)
        .is_some_and(|entry| entry.deleting.load(Ordering::SeqCst))
}

pub async fn delete(inner: Arc<Inner>, name: String) -> Result<(), HostError> {
    let _guard = inner
        .locks
        .lock(&name, inner.settings.lock_timeout)
        .await
        .ok_or_else(|| HostError::Busy { name: name.clone() })?;
    let dir = inner.dir(&name);
    let entry = inner.entry(&name);
    let record_lock = entry.as_ref().map_or_else(Arc::default, |e| e.record_lock.clone());
    let found = match Record::load_async(&dir).await {
        Ok(found) => found.map(Some),
        // An unreadable record still names an instance the caller wants gone.
        Err(error) if error.kind() == io::ErrorKind::InvalidData => Some(None),
        Err(error) => return Err(HostError::storage("reading", dir.join(RECORD_FILE))(error)),
    };
    if found.is_none() && entry.is_none() && !tokio::fs::try_exists(&dir).await.unwrap_or(true) {
        return Ok(());
    }
    if let Some(entry) = &entry {
        entry.deleting.store(true, Ordering::SeqCst);
    }
    let result = teardown(&inner, &name, found, entry.as_ref(), record_lock).await;
    if result.is_err()
        && let Some(entry) = &entry
    {
        // Let the next Delete try again rather than answer "already deleting".
        entry.deleting.store(false, Ordering::SeqCst);
    }
    result
}

async fn teardown(
    inner: &Inner,
    name: &str,
    found: Option<Option<Record>>,
    entry: Option<&Arc<Entry>>,
    record_lock: Arc<Mutex<()>>,
) -> Result<(), HostError> {
    let dir = inner.dir(name);
    // 1. The record says Deleted before anything stops, so a daemon that dies from here on finishes.
    if let Some(Some(mut record)) = found
        && record.desired != Desired::Deleted
    {
        record.desired = Desired::Deleted;
        let (dir, lock) = (dir.clone(), record_lock.clone());
        blocking(move || {
            let _guard = lock.lock().unwrap_or_else(|p| p.into_inner());
            record.save(&dir)
        })
        .await
        .map_err(HostError::storage("writing", inner.dir(name).join(RECORD_FILE)))?;
    }
    // 2. Stop the proxy: ours through its supervisor, and one a previous daemon left through its pid file.
    if let Some(entry) = entry {
        entry.supervisor.stop().await;
    }
    stop_by_pid_file(inner, &dir).await;
    // 3. Move the directory out of the way in one rename, so that the record, the config and the name
    //    disappear together, then remove it. A leftover (a crash between the two) is removed at start-up.
    let removed = {
        let (dir, trash, lock) = (dir.clone(), inner.trash_dir(name), record_lock);
        blocking(move || {
            let _guard = lock.lock().unwrap_or_else(|p| p.into_inner());
            ignore_absent(std::fs::remove_dir_all(&trash))?;
            ignore_absent(std::fs::rename(&dir, &trash))?;
            ignore_absent(std::fs::remove_dir_all(&trash))
        })
        .await
    };
    removed.map_err(HostError::storage("removing", dir.clone()))?;
    // 4. Free the address.
    inner.entries().remove(name);
    tracing::info!(instance = %name, "deleted the instance");
    Ok(())
}

/// Stops a tinyproxy that the pid file names and that runs this instance's config, when no supervisor
/// of ours owns it (a record that was not loaded, or a Delete finished after a restart).
async fn stop_by_pid_file(inner: &Inner, dir: &std::path::Path) {
    let conf = dir.join(CONF_FILE);
    let Some(pid) =
        process::read_pid(dir).filter(|pid| process::is_our_tinyproxy(*pid, &inner.settings.tinyproxy_path, &conf))
    else {
        return;
    };
    for (signal, budget) in [("TERM", inner.settings.stop_timeout), ("KILL", Duration::from_secs(5))] {
        if let Err(error) = process::signal(pid, signal).await {
            tracing::warn!(pid, %error, "could not signal tinyproxy");
        }
        let deadline = Instant::now() + budget;
        while process::is_alive(pid) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if !process::is_alive(pid) {
            return;
        }
    }
}

fn ignore_absent(result: io::Result<()>) -> io::Result<()> {
    match result {
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}
