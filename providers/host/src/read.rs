//! Get and ListByTag: both read the records on disk (marks, address and creation time are read back,
//! never echoed; a Create still writing its files shows the record it is writing) and join them with what
//! supervision says now: whether the process runs, and whether
//! it has been seen listening on its address and port (the supervisor looks for the socket in the
//! kernel's table after each start; tinyproxy keeps it while it runs).
//!
//! | Record | Supervision | State |
//! |---|---|---|
//! | desired Deleted, or a Delete has begun | any | Terminated |
//! | desired Running | none (the record was not loaded at start) | Stopped, with a warn line |
//! | desired Running | crash loop | Stopped |
//! | desired Running | process up and seen listening | Running |
//! | desired Running | files being written, process up but not listening yet, backing off | Provisioning if it never served, else Stopped |

use std::{
    collections::BTreeSet,
    sync::{Arc, atomic::Ordering},
};

use futures::StreamExt;
use provider_sdk::{
    InstanceStream,
    model::{Instance, InstanceState, ListFilter, Marks, ProviderId},
};

use crate::{
    error::HostError,
    provider::{Inner, PROVIDER_TYPE},
    record::{Desired, RECORD_FILE, Record},
    supervisor::{Phase, Status},
};

/// The state table above.
pub fn state_of(record: &Record, status: Option<&Status>) -> InstanceState {
    if record.desired == Desired::Deleted {
        return InstanceState::Terminated;
    }
    let Some(status) = status else {
        tracing::warn!(instance = %record.name, "the record is not supervised (see the daemon's start-up log); answering Stopped");
        return InstanceState::Stopped;
    };
    let served = status.served || record.first_served_at_ms.is_some();
    match status.phase {
        Phase::CrashLoop => InstanceState::Stopped,
        Phase::Up if status.listening => InstanceState::Running,
        Phase::NotStarted | Phase::Up | Phase::Backoff | Phase::Stopping | Phase::Stopped => {
            if served {
                InstanceState::Stopped
            } else {
                InstanceState::Provisioning
            }
        }
    }
}

/// The instance of `record` as it is now.
pub fn instance_now(inner: &Inner, record: &Record) -> Instance {
    let entry = inner.entry(&record.name);
    // A Delete that has begun but not yet written `desired: deleted` already counts.
    if entry.as_ref().is_some_and(|e| e.deleting.load(Ordering::SeqCst)) {
        return record.instance(PROVIDER_TYPE, InstanceState::Terminated);
    }
    let status = entry.map(|entry| entry.supervisor.status());
    record.instance(PROVIDER_TYPE, state_of(record, status.as_ref()))
}

/// The record of `name`: the file, or the one a Create is still writing.
async fn load(inner: &Inner, name: &str) -> Result<Option<Record>, HostError> {
    let dir = inner.dir(name);
    let on_disk = Record::load_async(&dir)
        .await
        .map_err(HostError::storage("reading", dir.join(RECORD_FILE)))?;
    Ok(on_disk
        .or_else(|| inner.entry(name).and_then(|entry| entry.pending()))
        .filter(|record| record.name == name))
}

pub async fn get(inner: &Inner, id: &ProviderId) -> Result<Instance, HostError> {
    let name = Inner::parse_id(id)?;
    tracing::debug!(instance = %name, "reading the record");
    let record = load(inner, &name)
        .await?
        .ok_or_else(|| HostError::NotFound { id: id.to_string() })?;
    Ok(instance_now(inner, &record))
}

/// Every record of the state directory (and every Create in flight) that matches `filter`, yielded as it
/// is read. A record that cannot be read is skipped with a warn line; a state directory that cannot be
/// read fails the listing.
pub async fn list(inner: Arc<Inner>, filter: ListFilter) -> Result<InstanceStream, HostError> {
    let state_dir = inner.settings.state_dir.clone();
    let mut reader = tokio::fs::read_dir(&state_dir)
        .await
        .map_err(HostError::storage("listing", state_dir.clone()))?;
    let mut names: BTreeSet<String> = inner.entries().keys().cloned().collect();
    while let Some(entry) = reader
        .next_entry()
        .await
        .map_err(HostError::storage("listing", state_dir.clone()))?
    {
        if let Ok(name) = entry.file_name().into_string()
            && Inner::parse_id(&ProviderId::new(PROVIDER_TYPE, &name)).is_ok()
        {
            names.insert(name);
        }
    }
    tracing::debug!(records = names.len(), "listing the records");
    let stream = futures::stream::iter(names).filter_map(move |name| {
        let (inner, filter) = (inner.clone(), filter.clone());
        async move {
            let record = match load(&inner, &name).await {
                Ok(Some(record)) => record,
                Ok(None) => return None,
                Err(error) => {
                    tracing::warn!(instance = %name, %error, "skipping a record that cannot be read");
                    return None;
                }
            };
            let marks = Marks {
                managed: record.marks.managed,
                proxy_uid: record.marks.proxy_uid.clone(),
                cluster_id: record.marks.cluster_id.clone(),
            };
            filter.matches(&marks).then(|| Ok(instance_now(&inner, &record)))
        }
    });
    Ok(stream.boxed())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{RECORD_VERSION, RecordMarks};

    fn record(desired: Desired, served: bool) -> Record {
        Record {
            version: RECORD_VERSION,
            name: "egress-a1".into(),
            address: "127.0.1.1".parse().unwrap(),
            port: 3128,
            username: "u".into(),
            allowed_source_ranges: vec![],
            marks: RecordMarks {
                managed: true,
                proxy_uid: "uid".into(),
                cluster_id: "c".into(),
            },
            spec_fingerprint: "f".into(),
            created_at_ms: 1,
            desired,
            first_served_at_ms: served.then_some(2),
        }
    }

    fn status(phase: Phase, listening: bool, served: bool) -> Status {
        Status {
            phase,
            pid: None,
            listening,
            served,
            exits: 0,
            last_exit: None,
        }
    }

    use InstanceState::*;

    #[test]
    fn a_process_seen_listening_is_running() {
        let state = state_of(&record(Desired::Running, false), Some(&status(Phase::Up, true, true)));
        assert_eq!(state, Running);
    }

    #[test]
    fn a_process_that_never_listened_is_provisioning_never_stopped() {
        let fresh = record(Desired::Running, false);
        for phase in [Phase::NotStarted, Phase::Up, Phase::Backoff] {
            assert_eq!(
                state_of(&fresh, Some(&status(phase, false, false))),
                Provisioning,
                "{phase:?}"
            );
        }
    }

    #[test]
    fn a_proxy_that_served_and_does_not_listen_now_is_stopped() {
        let served = record(Desired::Running, true);
        assert_eq!(state_of(&served, Some(&status(Phase::Backoff, false, false))), Stopped);
        assert_eq!(state_of(&served, Some(&status(Phase::Up, false, false))), Stopped);
        let served_in_memory = record(Desired::Running, false);
        assert_eq!(
            state_of(&served_in_memory, Some(&status(Phase::Backoff, false, true))),
            Stopped
        );
    }

    #[test]
    fn a_crash_loop_is_stopped() {
        let state = state_of(
            &record(Desired::Running, false),
            Some(&status(Phase::CrashLoop, false, false)),
        );
        assert_eq!(state, Stopped);
    }

    #[test]
    fn a_record_being_deleted_is_terminated() {
        let up = status(Phase::Up, true, true);
        assert_eq!(state_of(&record(Desired::Deleted, true), Some(&up)), Terminated);
        assert_eq!(state_of(&record(Desired::Deleted, false), None), Terminated);
    }

    #[test]
    fn a_record_nobody_supervises_is_stopped() {
        assert_eq!(state_of(&record(Desired::Running, false), None), Stopped);
    }
}
