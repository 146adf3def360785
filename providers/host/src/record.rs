//! One record per instance, `<stateDir>/<name>/record.json`: what the instance is (address, port, marks,
//! spec fingerprint, creation time), what it should be (running, or being deleted), and whether it has
//! ever served. Written atomically (temporary file, fsync, rename, fsync of the directory), so a crash
//! leaves the old record or the new one, never half of one. The password is not here: it lives only in
//! the instance's 0600 tinyproxy.conf.

use std::{
    fs,
    io::{self, Write},
    net::Ipv4Addr,
    os::unix::fs::{OpenOptionsExt, PermissionsExt},
    path::Path,
    sync::Mutex,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use ipnet::IpNet;
use provider_sdk::model::{Instance, InstanceState, Marks, ProviderId};
use serde::{Deserialize, Serialize};

pub const RECORD_FILE: &str = "record.json";
pub const RECORD_VERSION: u32 = 1;

/// What the daemon should make of the instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Desired {
    Running,
    /// Delete has begun; a restarted daemon finishes it.
    Deleted,
}

/// The three marks (contract §2.4) as written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordMarks {
    pub managed: bool,
    pub proxy_uid: String,
    pub cluster_id: String,
}

/// Unknown fields are tolerated (not denied), so that an older daemon can read a newer one's records.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub version: u32,
    pub name: String,
    pub address: Ipv4Addr,
    pub port: u16,
    /// Not sensitive; kept so the config file can be rendered again.
    pub username: String,
    pub allowed_source_ranges: Vec<IpNet>,
    pub marks: RecordMarks,
    pub spec_fingerprint: String,
    /// Milliseconds since the Unix epoch; set once, at the first successful Create.
    pub created_at_ms: u64,
    pub desired: Desired,
    /// When the proxy first accepted connections: the marker that tells a never-started instance
    /// (Provisioning) from a stopped one.
    #[serde(default)]
    pub first_served_at_ms: Option<u64>,
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Record {
    pub fn load(dir: &Path) -> io::Result<Option<Self>> {
        match fs::read(dir.join(RECORD_FILE)) {
            Ok(bytes) => Self::decode(&bytes).map(Some),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error),
        }
    }

    pub async fn load_async(dir: &Path) -> io::Result<Option<Self>> {
        match tokio::fs::read(dir.join(RECORD_FILE)).await {
            Ok(bytes) => Self::decode(&bytes).map(Some),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error),
        }
    }

    fn decode(bytes: &[u8]) -> io::Result<Self> {
        serde_json::from_slice(bytes).map_err(|error| io::Error::new(io::ErrorKind::InvalidData, error))
    }

    pub fn save(&self, dir: &Path) -> io::Result<()> {
        let mut bytes = serde_json::to_vec_pretty(self).map_err(io::Error::other)?;
        bytes.push(b'\n');
        write_atomic(&dir.join(RECORD_FILE), &bytes)
    }

    pub fn created_at(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.created_at_ms)
    }

    /// The instance as the contract shows it, in `state`.
    pub fn instance(&self, provider_type: &str, state: InstanceState) -> Instance {
        Instance {
            provider_id: ProviderId::new(provider_type, &self.name),
            name: self.name.clone(),
            state,
            ipv4: Some(self.address),
            created_at: self.created_at(),
            marks: Marks {
                managed: self.marks.managed,
                proxy_uid: self.marks.proxy_uid.clone(),
                cluster_id: self.marks.cluster_id.clone(),
            },
        }
    }
}

/// Runs file work on the blocking pool. Once started it runs to its end even if the caller is dropped,
/// which is what a multi-file step needs; a panic is passed on to the caller.
pub async fn blocking<T: Send + 'static>(work: impl FnOnce() -> io::Result<T> + Send + 'static) -> io::Result<T> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(error) => std::panic::resume_unwind(error.into_panic()),
    }
}

/// Writes the first-served marker once; a record being deleted or already marked is left as it is.
pub fn mark_served(dir: &Path, lock: &Mutex<()>) {
    let _guard = lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    match Record::load(dir) {
        Ok(Some(mut record)) if record.desired == Desired::Running && record.first_served_at_ms.is_none() => {
            record.first_served_at_ms = Some(now_ms());
            if let Err(error) = record.save(dir) {
                tracing::warn!(instance = %record.name, %error, "could not write the first-served marker");
            }
        }
        Ok(_) => {}
        Err(error) => tracing::warn!(dir = %dir.display(), %error, "could not read the record to mark it served"),
    }
}

/// Writes `bytes` to `path` with mode 0600 so that no reader ever sees a partial file: a temporary file
/// beside it is written and fsynced, renamed over `path`, and the directory is fsynced.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().ok_or_else(|| io::Error::other("path has no directory"))?;
    let file_name = path
        .file_name()
        .ok_or_else(|| io::Error::other("path has no file name"))?;
    let temporary = dir.join(format!(".{}.tmp", file_name.to_string_lossy()));
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)?;
    // An existing temporary file keeps its old mode; make sure.
    file.set_permissions(fs::Permissions::from_mode(0o600))?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    fs::rename(&temporary, path)?;
    fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Record {
        Record {
            version: RECORD_VERSION,
            name: "egress-a1".into(),
            address: "127.0.1.3".parse().unwrap(),
            port: 3128,
            username: "egress".into(),
            allowed_source_ranges: vec!["10.0.0.0/8".parse().unwrap(), "fd00::/8".parse().unwrap()],
            marks: RecordMarks {
                managed: true,
                proxy_uid: "4a5b".into(),
                cluster_id: "prod".into(),
            },
            spec_fingerprint: "0123456789abcdef01234567".into(),
            created_at_ms: 1_700_000_000_123,
            desired: Desired::Running,
            first_served_at_ms: None,
        }
    }

    #[test]
    fn a_record_reads_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let record = sample();
        record.save(dir.path()).unwrap();
        assert_eq!(Record::load(dir.path()).unwrap(), Some(record));
    }

    #[test]
    fn the_record_file_is_private_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        sample().save(dir.path()).unwrap();
        sample().save(dir.path()).unwrap();
        let mode = fs::metadata(dir.path().join(RECORD_FILE)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [RECORD_FILE]);
    }

    #[test]
    fn the_record_uses_camel_case_keys_and_names_the_desired_state() {
        let text = serde_json::to_string(&sample()).unwrap();
        for key in [
            "\"specFingerprint\"",
            "\"createdAtMs\":1700000000123",
            "\"desired\":\"running\"",
            "\"proxyUid\":\"4a5b\"",
            "\"clusterId\":\"prod\"",
            "\"allowedSourceRanges\":[\"10.0.0.0/8\",\"fd00::/8\"]",
        ] {
            assert!(text.contains(key), "{key} missing from {text}");
        }
    }

    #[test]
    fn a_missing_record_is_none_and_a_corrupt_one_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Record::load(dir.path()).unwrap(), None);
        fs::write(dir.path().join(RECORD_FILE), "{not json").unwrap();
        assert_eq!(Record::load(dir.path()).unwrap_err().kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn unknown_fields_from_a_newer_daemon_are_tolerated() {
        let mut value = serde_json::to_value(sample()).unwrap();
        value["addedLater"] = serde_json::json!(true);
        let record: Record = serde_json::from_value(value).unwrap();
        assert_eq!(record, sample());
    }

    #[test]
    fn the_instance_carries_the_written_marks_and_time() {
        let instance = sample().instance("host", InstanceState::Running);
        assert_eq!(instance.provider_id.as_str(), "host://egress-a1");
        assert_eq!(instance.ipv4, Some("127.0.1.3".parse().unwrap()));
        assert_eq!(instance.marks.proxy_uid, "4a5b");
        assert_eq!(
            instance.created_at.duration_since(UNIX_EPOCH).unwrap().as_millis(),
            1_700_000_000_123
        );
    }
}
