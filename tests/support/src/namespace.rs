//! A namespace of a test's own, so tests sharing one control plane never see each other's objects.
//!
//! Namespaces are not deleted afterwards: without kube-controller-manager (which is not started) a
//! deleted namespace stays `Terminating` forever, and the whole etcd is thrown away with the control
//! plane anyway. Names are unique per call.

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client, Resource};

use crate::{ControlPlane, Error};

/// Every test namespace carries this label, to tell them apart from the system ones.
pub const TEST_NAMESPACE_LABEL: &str = "egressproxies.dev/e2e-test";

/// A created namespace and a client of the calling test's runtime.
#[derive(Clone)]
pub struct TestNamespace {
    name: String,
    client: Client,
}

impl std::fmt::Debug for TestNamespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestNamespace").field("name", &self.name).finish()
    }
}

impl TestNamespace {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The API of a namespaced kind inside this namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }
}

impl ControlPlane {
    /// Creates a namespace named after `hint` (e.g. the test's name) plus a random suffix.
    pub async fn namespace(&self, hint: &str) -> Result<TestNamespace, Error> {
        let client = self.client()?;
        let name = namespace_name(hint);
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some([(TEST_NAMESPACE_LABEL.to_owned(), "true".to_owned())].into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .map_err(Error::kube(format!("creating namespace {name}")))?;
        Ok(TestNamespace { name, client })
    }
}

/// A valid DNS-1123 label: the hint lower-cased, other characters turned into '-', cut to leave room
/// for an 8-character random suffix within the 63-character limit.
fn namespace_name(hint: &str) -> String {
    let mut stem: String = hint
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    stem.truncate(50);
    let stem = stem.trim_matches('-');
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    if stem.is_empty() {
        format!("test-{suffix}")
    } else {
        format!("{stem}-{suffix}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_dns_label(name: &str) -> bool {
        name.len() <= 63
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !name.starts_with('-')
            && !name.ends_with('-')
    }

    #[test]
    fn namespace_names_are_dns_labels_whatever_the_hint() {
        for hint in ["simple", "a_test::With Spaces_and_CAPS", "--", "", &"x".repeat(200)] {
            let name = namespace_name(hint);
            assert!(is_dns_label(&name), "{hint:?} gave {name:?}");
        }
    }

    #[test]
    fn two_namespaces_from_the_same_hint_differ() {
        assert_ne!(namespace_name("same"), namespace_name("same"));
    }
}
