//! One control plane per test binary, started by whichever test asks first.
//!
//! Starting etcd and kube-apiserver costs seconds, so the tests of one binary share one control plane
//! and isolate themselves by namespace. It lives in a `static`, which Rust never drops; the supervisor's
//! lifeline pipe (see `supervisor`) stops the processes and removes the directory when the test process
//! exits, however it exits.

use tokio::sync::OnceCell;

use crate::{ControlPlane, Error};

// A failed start is kept too (as its message), so the other tests fail at once with the same cause
// instead of each retrying a start that cannot succeed.
static SHARED: OnceCell<Result<ControlPlane, String>> = OnceCell::const_new();

impl ControlPlane {
    /// The control plane shared by every test in this process, started on first use.
    pub async fn shared() -> Result<&'static ControlPlane, Error> {
        let started = SHARED
            .get_or_init(|| async { ControlPlane::start().await.map_err(|e| e.to_string()) })
            .await;
        started
            .as_ref()
            .map_err(|message| Error::SharedStartFailed(message.clone()))
    }
}
