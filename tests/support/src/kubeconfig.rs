//! The kubeconfig handed to kubectl and read back for the Rust client, so both authenticate the same way.

use std::path::{Path, PathBuf};

use crate::Error;
use crate::pki::{ADMIN_USER, PkiFiles};

/// The one cluster/context name in the generated kubeconfig.
pub const CONTEXT: &str = "egress-test";

/// Writes `<dir>/kubeconfig` pointing at `server` with the admin client certificate. JSON is valid YAML,
/// and serialising it avoids hand-quoting paths.
pub fn write(dir: &Path, server: &str, pki: &PkiFiles) -> Result<PathBuf, Error> {
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": CONTEXT,
            "cluster": { "server": server, "certificate-authority": pki.ca_cert },
        }],
        "users": [{
            "name": ADMIN_USER,
            "user": { "client-certificate": pki.admin_cert, "client-key": pki.admin_key },
        }],
        "contexts": [{
            "name": CONTEXT,
            "context": { "cluster": CONTEXT, "user": ADMIN_USER, "namespace": "default" },
        }],
        "current-context": CONTEXT,
        "preferences": {},
    });
    let path = dir.join("kubeconfig");
    let text = serde_json::to_string_pretty(&config).expect("a JSON value always serialises");
    std::fs::write(&path, text).map_err(Error::io(format!("writing {}", path.display())))?;
    Ok(path)
}

/// The client configuration the kubeconfig at `path` describes.
pub async fn load(path: &Path) -> Result<kube::Config, Error> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)?;
    Ok(kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?)
}
