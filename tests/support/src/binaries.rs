//! Where the control-plane binaries are: the versioned cache that `scripts/build-control-plane.sh` fills.
//!
//! The release is read from `tests/control-plane/versions.env`, the same file the build script reads, so
//! the two can never disagree about the directory name.

use std::path::{Path, PathBuf};

use crate::Error;

/// The command that builds the binaries, named in the error when they are missing.
pub const BUILD_COMMAND: &str = "scripts/build-control-plane.sh";

/// Overrides the cache directory, for the build script and for this crate alike.
pub const DIR_ENV: &str = "EGRESS_CONTROL_PLANE_DIR";

const VERSIONS_ENV: &str = include_str!("../../control-plane/versions.env");

/// The Kubernetes release the binaries are built from, e.g. `v1.36.3`.
pub fn kubernetes_version() -> &'static str {
    version_of("KUBERNETES_VERSION")
}

/// The etcd release the binary is built from, e.g. `v3.6.16`.
pub fn etcd_version() -> &'static str {
    version_of("ETCD_VERSION")
}

fn version_of(key: &str) -> &'static str {
    VERSIONS_ENV
        .lines()
        .filter_map(|line| line.trim().split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.trim())
        .unwrap_or_else(|| panic!("tests/control-plane/versions.env has no {key}"))
}

/// Paths of the three binaries of one release.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binaries {
    pub etcd: PathBuf,
    pub kube_apiserver: PathBuf,
    pub kubectl: PathBuf,
}

impl Binaries {
    /// The directory `scripts/build-control-plane.sh` builds into: `$EGRESS_CONTROL_PLANE_DIR`, else
    /// `$HOME/.cache/egress-proxies/control-plane/<kubernetes version>`.
    pub fn default_dir() -> PathBuf {
        if let Some(dir) = std::env::var_os(DIR_ENV).filter(|d| !d.is_empty()) {
            return PathBuf::from(dir);
        }
        let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
        home.join(".cache/egress-proxies/control-plane")
            .join(kubernetes_version())
    }

    /// The binaries in `dir`, or an error naming the missing ones and the command that builds them.
    pub fn in_dir(dir: &Path) -> Result<Self, Error> {
        let binaries = Self {
            etcd: dir.join("etcd"),
            kube_apiserver: dir.join("kube-apiserver"),
            kubectl: dir.join("kubectl"),
        };
        let missing: Vec<String> = [&binaries.etcd, &binaries.kube_apiserver, &binaries.kubectl]
            .into_iter()
            .filter(|path| !path.is_file())
            .filter_map(|path| path.file_name())
            .map(|name| name.to_string_lossy().into_owned())
            .collect();
        if missing.is_empty() {
            Ok(binaries)
        } else {
            Err(Error::BinariesMissing {
                dir: dir.to_path_buf(),
                missing: missing.join(", "),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_the_shared_versions_file() {
        assert!(kubernetes_version().starts_with("v1."), "{}", kubernetes_version());
        assert!(etcd_version().starts_with("v3.6."), "{}", etcd_version());
    }

    #[test]
    fn missing_binaries_are_named_together_with_the_command_that_builds_them() {
        let empty = tempfile::tempdir().unwrap();
        let message = Binaries::in_dir(empty.path()).unwrap_err().to_string();
        assert!(message.contains("etcd, kube-apiserver, kubectl"), "{message}");
        assert!(message.contains(BUILD_COMMAND), "{message}");
        assert!(message.contains(&empty.path().display().to_string()), "{message}");
    }

    #[test]
    fn a_directory_with_all_three_binaries_is_accepted() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["etcd", "kube-apiserver", "kubectl"] {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        let binaries = Binaries::in_dir(dir.path()).unwrap();
        assert_eq!(binaries.kubectl, dir.path().join("kubectl"));
    }
}
