//! The operator's typed client for one provider daemon: connects lazily, redials with backoff after a
//! failure, puts a deadline on every call (sent as `grpc-timeout` and enforced locally), and carries the
//! caller's trace context in the metadata.

use std::{
    fmt,
    path::PathBuf,
    str::FromStr,
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::{Stream, StreamExt, TryStreamExt};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpStream, UnixStream};
use tonic::{
    Request,
    transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity, Uri},
};
use tower::service_fn;
use tracing::Instrument;

use crate::{
    error::{ProviderError, TransientKind, reason},
    model::{CheckResult, CreateRequest, Instance, ListFilter, ProviderId, ProviderInfo},
    propagation,
    proto::{self, provider_service_client::ProviderServiceClient},
};

/// Where a provider daemon listens, as the operator's config writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProviderEndpoint {
    /// `unix:///path/to.sock`: the sidecar layout.
    Unix(PathBuf),
    /// `https://host:port`: a separate Deployment, mutual TLS.
    Https { authority: String },
    /// `http://host:port`: plain TCP, only when the config says `insecure: true`.
    Http { authority: String },
}

impl FromStr for ProviderEndpoint {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, String> {
        let bad = || format!("must be unix:///absolute/path, https://host:port or http://host:port, got {value:?}");
        if let Some(path) = value.strip_prefix("unix://") {
            return if path.starts_with('/') {
                Ok(Self::Unix(path.into()))
            } else {
                Err(bad())
            };
        }
        let (scheme, authority) = value.split_once("://").ok_or_else(bad)?;
        let valid_authority = !authority.is_empty()
            && !authority.contains('/')
            && authority
                .rsplit_once(':')
                .is_some_and(|(_, port)| port.parse::<u16>().is_ok());
        match scheme {
            "https" if valid_authority => Ok(Self::Https {
                authority: authority.to_owned(),
            }),
            "http" if valid_authority => Ok(Self::Http {
                authority: authority.to_owned(),
            }),
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for ProviderEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unix(path) => write!(f, "unix://{}", path.display()),
            Self::Https { authority } => write!(f, "https://{authority}"),
            Self::Http { authority } => write!(f, "http://{authority}"),
        }
    }
}

/// PEM material for mutual TLS from the operator's side.
#[derive(Clone, Debug)]
pub struct ClientTls {
    pub ca_pem: Vec<u8>,
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
    /// The name the server certificate must carry; defaults to the endpoint's host.
    pub server_name: Option<String>,
}

/// Deadlines per RPC (contract §1.5: the caller sets them, the provider bounds its own backend calls).
#[derive(Clone, Debug)]
pub struct CallTimeouts {
    pub get_info: Duration,
    pub create: Duration,
    pub get: Duration,
    pub delete: Duration,
    pub list: Duration,
    pub check: Duration,
}

impl Default for CallTimeouts {
    fn default() -> Self {
        Self {
            get_info: Duration::from_secs(5),
            create: Duration::from_secs(60),
            get: Duration::from_secs(10),
            delete: Duration::from_secs(60),
            list: Duration::from_secs(120),
            check: Duration::from_secs(30),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("provider endpoint {endpoint}: {message}")]
    Endpoint { endpoint: String, message: String },
    #[error("provider endpoint {endpoint}: TLS setup: {source}")]
    Tls {
        endpoint: String,
        #[source]
        source: tonic::transport::Error,
    },
}

/// Exponential redial delay after failed connection attempts: 50 ms doubling to 5 s, reset on success.
#[derive(Debug, Default)]
struct Redial {
    failures: u32,
}

impl Redial {
    const FIRST: Duration = Duration::from_millis(50);
    const MAX: Duration = Duration::from_secs(5);

    fn delay(&self) -> Duration {
        match self.failures {
            0 => Duration::ZERO,
            n => Self::FIRST.saturating_mul(1 << (n - 1).min(10)).min(Self::MAX),
        }
    }
}

/// A handle to one provider daemon. Cheap to clone; clones share the connection.
#[derive(Clone, Debug)]
pub struct ProviderClient {
    inner: ProviderServiceClient<Channel>,
    channel: Channel,
    timeouts: CallTimeouts,
}

impl ProviderClient {
    /// Builds the client without dialing: the first call connects.
    pub fn connect_lazy(
        endpoint: &ProviderEndpoint,
        tls: Option<ClientTls>,
        timeouts: CallTimeouts,
    ) -> Result<Self, ClientError> {
        let channel = channel(endpoint, tls)?;
        Ok(Self {
            inner: ProviderServiceClient::new(channel.clone()),
            channel,
            timeouts,
        })
    }

    /// The underlying channel, for health checks and raw calls.
    pub fn channel(&self) -> Channel {
        self.channel.clone()
    }

    pub async fn get_info(&self) -> Result<ProviderInfo, ProviderError> {
        let mut client = self.inner.clone();
        call(
            "GetInfo",
            "",
            self.timeouts.get_info,
            proto::GetInfoRequest {},
            |r| async move { client.get_info(r).await },
        )
        .await
        .map(ProviderInfo::from)
    }

    pub async fn create(&self, request: &CreateRequest) -> Result<Instance, ProviderError> {
        let mut client = self.inner.clone();
        let wire = proto::CreateRequest::from(request);
        let response = call(
            "Create",
            request.name.as_str(),
            self.timeouts.create,
            wire,
            |r| async move { client.create(r).await },
        )
        .await?;
        instance_from(response.instance)
    }

    pub async fn get(&self, id: &ProviderId) -> Result<Instance, ProviderError> {
        let mut client = self.inner.clone();
        let wire = proto::GetRequest {
            provider_id: id.as_str().to_owned(),
        };
        let response = call("Get", id.as_str(), self.timeouts.get, wire, |r| async move {
            client.get(r).await
        })
        .await?;
        instance_from(response.instance)
    }

    pub async fn delete(&self, id: &ProviderId) -> Result<(), ProviderError> {
        let mut client = self.inner.clone();
        let wire = proto::DeleteRequest {
            provider_id: id.as_str().to_owned(),
        };
        call("Delete", id.as_str(), self.timeouts.delete, wire, |r| async move {
            client.delete(r).await
        })
        .await
        .map(drop)
    }

    /// Every matching instance, page by page; the whole listing shares the list deadline.
    pub async fn list_by_tag(&self, filter: &ListFilter) -> Result<Vec<Instance>, ProviderError> {
        let mut client = self.inner.clone();
        let wire = proto::ListByTagRequest::from(filter);
        call("ListByTag", "", self.timeouts.list, wire, |r| async move {
            let pages = client.list_by_tag(r).await?.into_inner();
            let mut instances = Vec::new();
            let mut pages = std::pin::pin!(pages);
            while let Some(page) = pages.try_next().await? {
                instances.extend(page.instances);
            }
            Ok(tonic::Response::new(instances))
        })
        .await?
        .into_iter()
        .map(Instance::try_from)
        .collect()
    }

    pub async fn check(&self) -> Result<Vec<CheckResult>, ProviderError> {
        let mut client = self.inner.clone();
        let response = call(
            "Check",
            "",
            self.timeouts.check,
            proto::CheckRequest {},
            |r| async move { client.check(r).await },
        )
        .await?;
        Ok(response.results.into_iter().map(CheckResult::from).collect())
    }

    /// The listing as a stream, for callers that process a large fleet without holding it.
    pub fn list_by_tag_stream(
        &self,
        filter: &ListFilter,
    ) -> impl Stream<Item = Result<Instance, ProviderError>> + Send + 'static {
        let mut client = self.inner.clone();
        let mut request = Request::new(proto::ListByTagRequest::from(filter));
        request.set_timeout(self.timeouts.list);
        propagation::inject_current(request.metadata_mut());
        futures::stream::once(async move { client.list_by_tag(request).await })
            .map_ok(|response| response.into_inner())
            .try_flatten()
            .map_ok(|page| futures::stream::iter(page.instances.into_iter().map(Ok::<_, tonic::Status>)))
            .try_flatten()
            .map(|item| item.map_err(ProviderError::from).and_then(Instance::try_from))
    }
}

fn instance_from(instance: Option<proto::Instance>) -> Result<Instance, ProviderError> {
    let instance = instance.ok_or_else(|| {
        ProviderError::permanent(
            crate::error::PermanentKind::FailedPrecondition,
            "INVALID_RESPONSE",
            "the provider answered without an instance",
        )
    })?;
    Instance::try_from(instance)
}

/// One RPC inside a client span: deadline on the wire and locally, trace context injected, status
/// classified.
async fn call<Req, Resp, Fut>(
    rpc: &'static str,
    instance: &str,
    timeout: Duration,
    message: Req,
    send: impl FnOnce(Request<Req>) -> Fut,
) -> Result<Resp, ProviderError>
where
    Fut: Future<Output = Result<tonic::Response<Resp>, tonic::Status>>,
{
    let span = tracing::info_span!(
        "provider.call",
        otel.name = %format_args!("egressproxies.provider.v1.ProviderService/{rpc}"),
        otel.kind = "client",
        rpc.system = "grpc",
        rpc.method = rpc,
        instance = instance,
    );
    async move {
        let mut request = Request::new(message);
        request.set_timeout(timeout);
        propagation::inject_current(request.metadata_mut());
        let started = std::time::Instant::now();
        let deadline_passed = || {
            ProviderError::transient_kind(
                TransientKind::DeadlineExceeded,
                reason::DEADLINE_EXCEEDED,
                format!("{rpc} did not answer within {timeout:?}"),
            )
        };
        // tonic's channel enforces the grpc-timeout it sends (its GrpcTimeout layer), so no second timer.
        match send(request).await {
            Ok(response) => Ok(response.into_inner()),
            Err(status) => match ProviderError::from_status(&status) {
                // When the deadline passes, tonic ends the call with a bare CANCELLED ("Timeout expired"):
                // that is our deadline (contract §1.5), not a cancellation or a provider's own error.
                ProviderError::Transient {
                    kind: TransientKind::Cancelled,
                    reason: ref why,
                    ..
                } if why == reason::UNCLASSIFIED && started.elapsed() >= timeout => Err(deadline_passed()),
                error => Err(error),
            },
        }
    }
    .instrument(span)
    .await
}

fn channel(endpoint: &ProviderEndpoint, tls: Option<ClientTls>) -> Result<Channel, ClientError> {
    let invalid = |message: String| ClientError::Endpoint {
        endpoint: endpoint.to_string(),
        message,
    };
    let redial = Arc::new(Mutex::new(Redial::default()));
    match endpoint {
        ProviderEndpoint::Unix(path) => {
            // The URI is required by tonic but unused: the connector below always dials the socket.
            let builder = Endpoint::from_static("http://provider.invalid").connect_timeout(Duration::from_secs(5));
            let path = path.clone();
            Ok(builder.connect_with_connector_lazy(service_fn(move |_: Uri| {
                let (path, redial) = (path.clone(), redial.clone());
                dial_with_backoff(redial, async move { UnixStream::connect(path).await })
            })))
        }
        ProviderEndpoint::Https { authority } | ProviderEndpoint::Http { authority } => {
            let secure = matches!(endpoint, ProviderEndpoint::Https { .. });
            let scheme = if secure { "https" } else { "http" };
            let mut builder = Endpoint::from_shared(format!("{scheme}://{authority}"))
                .map_err(|e| invalid(e.to_string()))?
                .connect_timeout(Duration::from_secs(5))
                .tcp_nodelay(true);
            if secure {
                let tls = tls.ok_or_else(|| invalid("https needs a client certificate, key and CA".into()))?;
                let host = authority.rsplit_once(':').map_or(authority.as_str(), |(host, _)| host);
                let config = ClientTlsConfig::new()
                    .ca_certificate(Certificate::from_pem(tls.ca_pem))
                    .identity(Identity::from_pem(tls.cert_pem, tls.key_pem))
                    .domain_name(
                        tls.server_name
                            .unwrap_or_else(|| host.trim_matches(['[', ']']).to_owned()),
                    );
                builder = builder.tls_config(config).map_err(|source| ClientError::Tls {
                    endpoint: endpoint.to_string(),
                    source,
                })?;
            }
            let authority = authority.clone();
            Ok(builder.connect_with_connector_lazy(service_fn(move |_: Uri| {
                let (authority, redial) = (authority.clone(), redial.clone());
                dial_with_backoff(redial, async move {
                    let stream = TcpStream::connect(authority.as_str()).await?;
                    stream.set_nodelay(true)?;
                    Ok(stream)
                })
            })))
        }
    }
}

/// Waits out the redial delay, dials, and records the outcome so a daemon that is down is not hammered.
async fn dial_with_backoff<S>(
    redial: Arc<Mutex<Redial>>,
    dial: impl Future<Output = std::io::Result<S>>,
) -> std::io::Result<TokioIo<S>> {
    let delay = redial.lock().map(|r| r.delay()).unwrap_or_default();
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let result = dial.await;
    if let Ok(mut redial) = redial.lock() {
        redial.failures = if result.is_ok() {
            0
        } else {
            redial.failures.saturating_add(1)
        };
    }
    result.map(TokioIo::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_or_name_the_value() {
        assert_eq!(
            "unix:///run/p.sock".parse(),
            Ok(ProviderEndpoint::Unix("/run/p.sock".into()))
        );
        assert_eq!(
            "https://aws:8443".parse(),
            Ok(ProviderEndpoint::Https {
                authority: "aws:8443".into()
            })
        );
        for bad in ["unix://rel", "ftp://x:1", "https://nohostport", "https://h:1/path", ""] {
            let error = bad.parse::<ProviderEndpoint>().unwrap_err();
            assert!(error.contains(&format!("{bad:?}")), "{error}");
        }
    }

    #[test]
    fn redial_delay_grows_and_is_capped() {
        let delays: Vec<_> = (0..12).map(|failures| Redial { failures }.delay()).collect();
        assert_eq!(delays[0], Duration::ZERO);
        assert_eq!(delays[1], Duration::from_millis(50));
        assert_eq!(delays[2], Duration::from_millis(100));
        assert_eq!(delays[11], Redial::MAX);
    }
}
