//! Test support behind the `testing` feature: an in-memory fake backend with fault injection and call
//! recording, usable in-process or as the `egress-provider-fake` daemon.

mod fake;
mod faults;
mod pki;

pub use fake::{FAKE_PROVIDER_TYPE, FakeOptions, FakeProvider};
pub use faults::{Fault, RecordedCall, Rpc};
pub use pki::{PkiFiles, TestPki};
