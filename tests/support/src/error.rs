//! Everything that can go wrong while starting or using a test control plane.

use std::path::PathBuf;

/// Errors of the test-support crate. Startup errors carry the tail of the failing process's log, so a
/// failed e2e run explains itself without the (already removed) temporary directory.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "control-plane binaries missing in {dir} ({missing}); build them with `{cmd}` \
         (set {env} to use another directory)",
        dir = .dir.display(),
        cmd = crate::binaries::BUILD_COMMAND,
        env = crate::binaries::DIR_ENV
    )]
    BinariesMissing { dir: PathBuf, missing: String },

    #[error("{action}: {source}")]
    Io {
        action: String,
        #[source]
        source: std::io::Error,
    },

    #[error("generating test certificates: {0}")]
    Certificates(#[from] rcgen::Error),

    #[error("{process} exited during startup; last lines of its log:\n{log_tail}")]
    ProcessExited { process: &'static str, log_tail: String },

    #[error("{process} was not ready after {seconds} s ({last_error}); last lines of its log:\n{log_tail}")]
    NotReady {
        process: &'static str,
        seconds: u64,
        last_error: String,
        log_tail: String,
    },

    #[error("reading the generated kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),

    #[error("building a client from the generated kubeconfig: {0}")]
    Client(#[source] kube::Error),

    #[error("{action}: {source}")]
    Kube {
        action: String,
        #[source]
        source: kube::Error,
    },

    #[error("waiting for CRD {name} to be established: {source}")]
    CrdWait {
        name: String,
        #[source]
        source: kube::runtime::wait::Error,
    },

    #[error("CRD {name} was not established within {seconds} s")]
    CrdNotEstablished { name: String, seconds: u64 },

    #[error("the shared control plane failed to start earlier in this test run: {0}")]
    SharedStartFailed(String),
}

impl Error {
    pub(crate) fn io(action: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let action = action.into();
        move |source| Self::Io { action, source }
    }

    pub(crate) fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let action = action.into();
        move |source| Self::Kube { action, source }
    }
}
