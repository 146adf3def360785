//! Credentials read from mounted files (contract §7). The file is read on every use, so a rotated
//! Kubernetes Secret takes effect without a restart; errors name the path, never the content.

use std::path::{Path, PathBuf};

use secrecy::SecretString;

#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    #[error("credential file {path}: {source}", path = path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("credential file {path} is empty", path = path.display())]
    Empty { path: PathBuf },
}

/// A credential kept in a file, typically a key of a mounted Secret.
#[derive(Clone, Debug)]
pub struct CredentialFile {
    path: PathBuf,
}

impl CredentialFile {
    /// Never touches the file: constructors must not fail because a Secret is not mounted yet.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The current value, trailing newline removed.
    pub async fn read(&self) -> Result<SecretString, CredentialError> {
        let text = tokio::fs::read_to_string(&self.path)
            .await
            .map_err(|source| CredentialError::Read {
                path: self.path.clone(),
                source,
            })?;
        let value = text.trim_end_matches(['\n', '\r']);
        if value.is_empty() {
            return Err(CredentialError::Empty {
                path: self.path.clone(),
            });
        }
        Ok(SecretString::from(value))
    }
}

#[cfg(test)]
mod tests {
    use secrecy::ExposeSecret;

    use super::*;

    #[tokio::test]
    async fn a_rotated_file_is_seen_on_the_next_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "first\n").unwrap();
        let credential = CredentialFile::new(&path);
        assert_eq!(credential.read().await.unwrap().expose_secret(), "first");
        std::fs::write(&path, "second\n").unwrap();
        assert_eq!(credential.read().await.unwrap().expose_secret(), "second");
    }

    #[tokio::test]
    async fn errors_name_the_path_and_never_the_value() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "\n").unwrap();
        let error = CredentialFile::new(&path).read().await.unwrap_err().to_string();
        assert!(error.contains("token") && error.contains("empty"), "{error}");
        let missing = CredentialFile::new(dir.path().join("absent"))
            .read()
            .await
            .unwrap_err()
            .to_string();
        assert!(missing.contains("absent"), "{missing}");
        std::fs::write(&path, "sentinel-value-4d1e").unwrap();
        let shown = format!("{:?}", CredentialFile::new(&path).read().await.unwrap());
        assert!(!shown.contains("sentinel-value-4d1e"), "{shown}");
    }
}
