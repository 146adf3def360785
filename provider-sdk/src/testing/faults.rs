//! What a test can make the fake do: queued faults per RPC, and the record of every call it received.

use std::time::SystemTime;

use crate::error::ProviderError;

/// The RPCs of the contract, for fault queues and call records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rpc {
    Create,
    Get,
    Delete,
    ListByTag,
    Check,
}

/// One injected misbehaviour, consumed by the next call of its RPC.
#[derive(Debug)]
pub enum Fault {
    /// Answer this error without touching the backend.
    Error(ProviderError),
    /// Do the work, then lose the answer: the caller sees UNAVAILABLE although the backend acted, as when
    /// a daemon dies between the backend call and its reply.
    CrashAfterAct,
    /// Panic inside the handler.
    Panic,
    /// Never answer; only the caller's deadline ends the call.
    Hang,
}

/// One call the fake received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedCall {
    pub rpc: Rpc,
    /// The instance name (Create) or provider ID (Get, Delete); empty for the others.
    pub subject: String,
    pub at: SystemTime,
}
