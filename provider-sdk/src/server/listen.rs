//! Where a daemon listens: a unix socket for the sidecar layout (mode 0660, a stale socket replaced, a live
//! one refused) or TCP, which requires mutual TLS unless `--insecure` says otherwise.

use std::{
    fs,
    io::ErrorKind,
    net::SocketAddr,
    os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt},
    path::{Path, PathBuf},
    str::FromStr,
    sync::Arc,
    time::Duration,
};

use tokio::net::{TcpListener, UnixListener};
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig, server::TcpIncoming};

use super::ProviderGrpc;
use crate::{proto, provider::Provider};

/// How long in-flight calls may run after SIGTERM before the daemon exits anyway.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(20);

const SOCKET_MODE: u32 = 0o660;

#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("--listen {value:?}: must be unix:///absolute/path or tcp://host:port")]
    BadAddress { value: String },
    #[error("--listen tcp://{addr}: TCP requires --tls-cert, --tls-key and --client-ca, or --insecure")]
    TlsRequired { addr: SocketAddr },
    #[error("--listen unix://{path}: another daemon is already serving on this socket", path = path.display())]
    SocketInUse { path: PathBuf },
    #[error("--listen unix://{path}: the path exists and is not a socket", path = path.display())]
    NotASocket { path: PathBuf },
    #[error("{what} {path}: {source}", path = path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("binding tcp://{addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("setting up gRPC: {0}")]
    Transport(#[from] tonic::transport::Error),
    #[error("setting up reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
}

/// A parsed `--listen` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listen {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

impl FromStr for Listen {
    type Err = ListenError;

    fn from_str(value: &str) -> Result<Self, ListenError> {
        let bad = || ListenError::BadAddress {
            value: value.to_owned(),
        };
        if let Some(path) = value.strip_prefix("unix://") {
            let path = Path::new(path);
            return if path.is_absolute() {
                Ok(Listen::Unix(path.to_owned()))
            } else {
                Err(bad())
            };
        }
        let addr = value.strip_prefix("tcp://").ok_or_else(bad)?;
        addr.parse().map(Listen::Tcp).map_err(|_| bad())
    }
}

/// PEM files for mutual TLS: the daemon's certificate and key, and the CA that signs its clients.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_ca: PathBuf,
}

impl TlsFiles {
    fn server_config(&self) -> Result<ServerTlsConfig, ListenError> {
        let read = |what, path: &Path| {
            fs::read(path).map_err(|source| ListenError::Io {
                what,
                path: path.to_owned(),
                source,
            })
        };
        let identity = Identity::from_pem(
            read("reading --tls-cert", &self.cert)?,
            read("reading --tls-key", &self.key)?,
        );
        let client_ca = Certificate::from_pem(read("reading --client-ca", &self.client_ca)?);
        Ok(ServerTlsConfig::new().identity(identity).client_ca_root(client_ca))
    }
}

/// A bound listener, ready to serve. Binding first lets a caller learn the address (port 0) before serving.
#[derive(Debug)]
pub enum Bound {
    /// `inode` identifies our socket file, so shutdown never removes one another daemon bound since.
    Unix {
        listener: UnixListener,
        path: PathBuf,
        inode: u64,
    },
    Tcp {
        listener: TcpListener,
        tls: Option<Box<ServerTlsConfig>>,
    },
}

/// Binds `listen`. TCP needs `tls` unless `insecure`; the TLS files are read now so a bad path stops start-up.
pub async fn bind(listen: &Listen, tls: Option<&TlsFiles>, insecure: bool) -> Result<Bound, ListenError> {
    match listen {
        Listen::Unix(path) => bind_unix(path),
        Listen::Tcp(addr) => {
            let tls = match (tls, insecure) {
                (Some(files), _) => {
                    let config = files.server_config()?;
                    // Parse the PEM now, so a bad certificate stops start-up instead of the first serve.
                    Server::builder().tls_config(config.clone())?;
                    Some(Box::new(config))
                }
                (None, true) => None,
                (None, false) => return Err(ListenError::TlsRequired { addr: *addr }),
            };
            let listener = TcpListener::bind(addr)
                .await
                .map_err(|source| ListenError::Bind { addr: *addr, source })?;
            Ok(Bound::Tcp { listener, tls })
        }
    }
}

fn bind_unix(path: &Path) -> Result<Bound, ListenError> {
    let io = |what| {
        move |source| ListenError::Io {
            what,
            path: path.to_owned(),
            source,
        }
    };
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => match std::os::unix::net::UnixStream::connect(path) {
            Ok(_) => {
                return Err(ListenError::SocketInUse { path: path.to_owned() });
            }
            Err(_) => fs::remove_file(path).map_err(io("removing stale socket"))?,
        },
        Ok(_) => {
            return Err(ListenError::NotASocket { path: path.to_owned() });
        }
        Err(error) if error.kind() == ErrorKind::NotFound => {}
        Err(error) => return Err(io("inspecting")(error)),
    }
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(io("creating the directory of"))?;
    }
    // Bind under a temporary name and rename once the mode is set, so no client ever sees a socket that is
    // more open than 0660.
    let staging = path.with_extension(format!("binding-{}", std::process::id()));
    let _ = fs::remove_file(&staging);
    let listener = UnixListener::bind(&staging).map_err(io("binding"))?;
    fs::set_permissions(&staging, fs::Permissions::from_mode(SOCKET_MODE)).map_err(io("setting the mode of"))?;
    fs::rename(&staging, path).map_err(io("moving the socket into place at"))?;
    let inode = fs::symlink_metadata(path).map_err(io("inspecting"))?.ino();
    Ok(Bound::Unix {
        listener,
        path: path.to_owned(),
        inode,
    })
}

impl Bound {
    /// `unix:///path` or `tcp://ip:port`, with the real port after binding port 0.
    pub fn address(&self) -> String {
        match self {
            Bound::Unix { path, .. } => format!("unix://{}", path.display()),
            Bound::Tcp { listener, .. } => match listener.local_addr() {
                Ok(addr) => format!("tcp://{addr}"),
                Err(_) => "tcp://?".to_owned(),
            },
        }
    }

    /// Serves `provider` with gRPC health and reflection until `shutdown` resolves, then stops accepting,
    /// reports NOT_SERVING, and lets in-flight calls finish for up to `DRAIN_TIMEOUT`.
    pub async fn serve<P: Provider>(
        self,
        provider: P,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ListenError> {
        let (reporter, health) = tonic_health::server::health_reporter();
        type Service<P> = proto::provider_service_server::ProviderServiceServer<ProviderGrpc<P>>;
        reporter.set_serving::<Service<P>>().await;
        let reflection = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
            .build_v1()?;

        let draining = Arc::new(tokio::sync::Notify::new());
        let signal = {
            let draining = draining.clone();
            async move {
                shutdown.await;
                reporter.set_not_serving::<Service<P>>().await;
                tracing::info!("shutting down: no new calls, draining the ones in flight");
                draining.notify_one();
            }
        };
        let drain_deadline = async move {
            draining.notified().await;
            tokio::time::sleep(DRAIN_TIMEOUT).await;
            tracing::warn!(
                timeout_s = DRAIN_TIMEOUT.as_secs(),
                "calls still in flight after the drain timeout; exiting"
            );
        };

        let service = ProviderGrpc::new(provider).into_service();
        match self {
            Bound::Unix { listener, path, inode } => {
                let router = Server::builder()
                    .add_service(health)
                    .add_service(reflection)
                    .add_service(service);
                let serve = router.serve_with_incoming_shutdown(UnixListenerStream::new(listener), signal);
                let result = tokio::select! { result = serve => result, () = drain_deadline => Ok(()) };
                if fs::symlink_metadata(&path).is_ok_and(|meta| meta.ino() == inode) {
                    let _ = fs::remove_file(&path);
                }
                Ok(result?)
            }
            Bound::Tcp { listener, tls } => {
                let mut builder = Server::builder().tcp_nodelay(true);
                if let Some(tls) = tls {
                    builder = builder.tls_config(*tls)?;
                }
                let router = builder.add_service(health).add_service(reflection).add_service(service);
                let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
                let serve = router.serve_with_incoming_shutdown(incoming, signal);
                tokio::select! { result = serve => Ok(result?), () = drain_deadline => Ok(()) }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses_parse_or_name_the_value() {
        assert_eq!(
            "unix:///run/p.sock".parse::<Listen>().unwrap(),
            Listen::Unix("/run/p.sock".into())
        );
        assert_eq!(
            "tcp://127.0.0.1:9000".parse::<Listen>().unwrap(),
            Listen::Tcp("127.0.0.1:9000".parse().unwrap())
        );
        for bad in ["unix://relative.sock", "http://x", "tcp://nohost", ""] {
            let error = bad.parse::<Listen>().unwrap_err().to_string();
            assert!(error.contains(&format!("{bad:?}")), "{error}");
        }
    }

    #[tokio::test]
    async fn tcp_without_tls_needs_the_insecure_flag() {
        let listen = Listen::Tcp("127.0.0.1:0".parse().unwrap());
        assert!(matches!(
            bind(&listen, None, false).await,
            Err(ListenError::TlsRequired { .. })
        ));
        assert!(bind(&listen, None, true).await.is_ok());
    }

    #[tokio::test]
    async fn a_stale_socket_is_replaced_and_the_new_one_is_not_world_accessible() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.sock");
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        let bound = bind(&Listen::Unix(path.clone()), None, false).await.unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, SOCKET_MODE);
        let again = bind(&Listen::Unix(path.clone()), None, false).await;
        assert!(matches!(again, Err(ListenError::SocketInUse { .. })), "{again:?}");
        drop(bound);
    }

    #[tokio::test]
    async fn a_regular_file_at_the_socket_path_is_never_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.sock");
        fs::write(&path, "keep me").unwrap();
        assert!(matches!(
            bind(&Listen::Unix(path.clone()), None, false).await,
            Err(ListenError::NotASocket { .. })
        ));
        assert_eq!(fs::read_to_string(&path).unwrap(), "keep me");
    }
}
