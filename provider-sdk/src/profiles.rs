//! The contract axes (contract §4) and the profile a provider declares on each, as Rust enums with their
//! proto conversions. One macro keeps the 19 enums and their wire mapping in step.

use crate::proto;

macro_rules! axes {
    ($(
        $(#[$doc:meta])*
        $axis:ident => $pb:ident, $field:ident, $key:literal {
            $($variant:ident = $pb_variant:ident, $label:literal;)+
        }
    )+) => {
        $(
            $(#[$doc])*
            #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
            pub enum $axis {
                $($variant,)+
            }

            impl $axis {
                /// The profile's name as the contract and the spec template write it.
                pub fn as_str(self) -> &'static str {
                    match self {
                        $(Self::$variant => $label,)+
                    }
                }

                fn from_wire(value: i32) -> Option<Self> {
                    match proto::$pb::try_from(value).ok()? {
                        proto::$pb::Unspecified => None,
                        $(proto::$pb::$pb_variant => Some(Self::$variant),)+
                    }
                }

                fn to_wire(value: Option<Self>) -> i32 {
                    let wire = match value {
                        None => proto::$pb::Unspecified,
                        $(Some(Self::$variant) => proto::$pb::$pb_variant,)+
                    };
                    wire as i32
                }
            }
        )+

        /// The profile declared on each axis; `None` where the provider left the axis unspecified (or sent a
        /// value from a newer contract minor).
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        pub struct Profiles {
            $(pub $field: Option<$axis>,)+
        }

        impl Profiles {
            /// `(axis name, declared profile)` for every axis, in contract order.
            pub fn entries(&self) -> Vec<(&'static str, Option<&'static str>)> {
                vec![$(($key, self.$field.map($axis::as_str)),)+]
            }
        }

        impl From<proto::Profiles> for Profiles {
            fn from(wire: proto::Profiles) -> Self {
                Self { $($field: $axis::from_wire(wire.$field),)+ }
            }
        }

        impl From<&Profiles> for proto::Profiles {
            fn from(profiles: &Profiles) -> Self {
                Self { $($field: $axis::to_wire(profiles.$field),)+ }
            }
        }
    };
}

axes! {
    /// §4.1: is the instance name the backend's key, or does the backend allocate one?
    PrimaryKey => PrimaryKey, primary_key, "primary-key" {
        NameIsKey = NameIsKey, "name-is-key";
        AllocatedId = AllocatedId, "allocated-id";
    }
    /// §4.2: is an instance usable as soon as Create returns?
    Readiness => Readiness, readiness, "readiness" {
        Immediate = Immediate, "immediate";
        ProvisioningWindow = ProvisioningWindow, "provisioning-window";
    }
    /// §4.3: where the instance's address comes from.
    IpSource => IpSource, ip_source, "ip-source" {
        AssignedAtCreate = AssignedAtCreate, "assigned-at-create";
        Discovered = Discovered, "discovered";
    }
    /// §4.4: where the GC marks live.
    GcMark => GcMark, gc_mark, "gc-mark" {
        NativeLabels = NativeLabels, "native-labels";
        WrittenMetadata = WrittenMetadata, "written-metadata";
        MarkWindow = MarkWindow, "mark-window";
    }
    /// §4.5: where CreatedAt comes from.
    CreatedAtSource => CreatedAtSource, created_at, "created-at" {
        BackendTimestamp = BackendTimestamp, "backend-timestamp";
        WrittenAtCreate = WrittenAtCreate, "written-at-create";
    }
    /// §4.6: how Get tells provisioning from stopped.
    ProvisioningState => ProvisioningState, provisioning_state, "provisioning-state" {
        Native = Native, "native";
        CreateBlocks = CreateBlocks, "create-blocks";
        Marker = Marker, "marker";
    }
    /// §4.7: what Create waits for.
    CreateReturn => CreateReturn, create_return, "create-return" {
        Submit = Submit, "submit";
        Blocking = Blocking, "blocking";
    }
    /// §4.8: how asynchronous backend operations are tracked.
    AsyncOps => AsyncOps, async_ops, "async-ops" {
        None = None, "none";
        TaskHandle = TaskHandle, "task-handle";
        BackendLock = BackendLock, "backend-lock";
    }
    /// §4.9: what Delete waits for.
    DeleteReturn => DeleteReturn, delete_return, "delete-return" {
        ReturnsEarly = ReturnsEarly, "returns-early";
        Waits = Waits, "waits";
    }
    /// §4.10: resources made beside the instance.
    SecondaryResources => SecondaryResources, secondary_resources, "secondary-resources" {
        None = None, "none";
        Cascade = Cascade, "cascade";
        Explicit = Explicit, "explicit";
    }
    /// §4.11: what ListByTag does when part of its scope is unreachable.
    ListPartial => ListPartial, list_partial, "list-partial" {
        FailWhole = FailWhole, "fail-whole";
        OmitUnreachable = OmitUnreachable, "omit-unreachable";
    }
    /// §4.12: the backend's "does not exist" signal.
    NotFoundSignal => NotFoundSignal, not_found, "not-found" {
        Status404 = Status404, "status-404";
        ErrorCode = ErrorCode, "error-code";
        ListAndMiss = ListAndMiss, "list-and-miss";
    }
    /// §4.13: whether quota exhaustion is recognisable.
    QuotaSignal => QuotaSignal, quota, "quota" {
        Detected = Detected, "detected";
        Absent = Absent, "absent";
    }
    /// §4.14: where the backend credential comes from.
    CredentialSource => CredentialSource, credentials, "credentials" {
        MountedFiles = MountedFiles, "mounted-files";
        Environment = Environment, "environment";
        WorkloadIdentity = WorkloadIdentity, "workload-identity";
        None = None, "none";
    }
    /// §4.15: what talks to the backend.
    ClientKind => ClientKind, client_kind, "client-kind" {
        VendorSdk = VendorSdk, "vendor-sdk";
        ThinClient = ThinClient, "thin-client";
        RpcOverSsh = RpcOverSsh, "rpc-over-ssh";
        Local = Local, "local";
    }
    /// §4.16: how backend calls appear under the operation span.
    ChildSpans => ChildSpans, child_spans, "child-spans" {
        SdkInstrumentation = SdkInstrumentation, "sdk-instrumentation";
        TransportWrapper = TransportWrapper, "transport-wrapper";
        SpanDecorator = SpanDecorator, "span-decorator";
        None = None, "none";
    }
    /// §4.17: what bounds each backend call.
    Timeouts => Timeouts, timeouts, "timeouts" {
        PerCall = PerCall, "per-call";
        CtxOnly = CtxOnly, "ctx-only";
    }
    /// §4.18: which log tiers the provider writes.
    Logging => Logging, logging, "logging" {
        Tiered = Tiered, "tiered";
        OutcomeOnly = OutcomeOnly, "outcome-only";
        None = None, "none";
    }
    /// §4.19: how the provider is proven against its real backend.
    BackendTest => BackendTest, backend_test, "backend-test" {
        ClusterE2e = ClusterE2e, "cluster-e2e";
        IntegrationTag = IntegrationTag, "integration-tag";
        ManualRunbook = ManualRunbook, "manual-runbook";
    }
}
