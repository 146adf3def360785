//! Test support for end-to-end tests against a real Kubernetes control plane.
//!
//! [`ControlPlane`] starts `etcd` and `kube-apiserver` (built from Go modules by
//! `scripts/build-control-plane.sh` into `~/.cache/egress-proxies/control-plane/<version>`) on free
//! loopback ports with freshly generated serving certificates, service-account keys and an admin client
//! certificate; waits for `/readyz`; writes a kubeconfig that both kubectl and the Rust client use; hands
//! out `kube::Client`s; installs CRDs; and gives each test a namespace of its own.
//!
//! ```no_run
//! # async fn example() -> Result<(), egress_test_support::Error> {
//! use egress_test_support::ControlPlane;
//! use k8s_openapi::api::core::v1::ConfigMap;
//!
//! let control_plane = ControlPlane::shared().await?; // one per test binary
//! let namespace = control_plane.namespace("configmaps_are_stored").await?;
//! let config_maps = namespace.api::<ConfigMap>();
//! # Ok(()) }
//! ```
//!
//! Only the apiserver and etcd run: there is no kube-controller-manager, scheduler or kubelet, so
//! nothing garbage-collects owned objects, finishes namespace deletion or runs pods.
//!
//! Cleanup: dropping an owned `ControlPlane` (also while a test unwinds from a panic) stops the
//! processes and removes the temporary directory; the shared one is cleaned up when the test process
//! exits, however it exits. How that works is described in the `supervisor` module.

mod binaries;
mod control_plane;
mod crd;
mod error;
mod kubeconfig;
mod moto;
mod namespace;
mod pki;
mod process;
mod readiness;
mod shared;
mod supervisor;
mod traffic;

pub use binaries::{BUILD_COMMAND, Binaries, DIR_ENV, etcd_version, kubernetes_version};
pub use control_plane::{Builder, ControlPlane, ProcessIds};
pub use crd::FIELD_MANAGER;
pub use error::Error;
pub use kubeconfig::CONTEXT;
pub use moto::Moto;
pub use namespace::{TEST_NAMESPACE_LABEL, TestNamespace};
pub use pki::ADMIN_USER;
pub use process::{ChildProcess, binary_beside, free_port, is_alive, poll_until, send_signal, signal_pid_files};
pub use supervisor::is_running;
pub use traffic::{Answer, ProxiedGet, start_echo_server};
