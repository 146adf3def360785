//! The default cloud-init document: what the operator hands a provider as user data when a Proxy has no
//! custom `spec.cloudInit`, and what a provider that configures its instances only through cloud-init
//! renders itself when a request comes without a document (contract §5.5). It is a `#cloud-config`
//! document that installs the proxy from the image's own Debian/Ubuntu packages and configures it from the
//! proxy settings: tinyproxy for `http` ([`http`]), dante-server for `socks5` ([`socks5`]). The errors name
//! the fields of `CreateRequest.proxy`.
//!
//! # Ordering: why nothing is written where a package will write
//!
//! cloud-init runs `write_files` in its *init* stage and installs `packages` in its *final* stage
//! (`package_update_upgrade_install`), so a file written straight to `/etc/tinyproxy/tinyproxy.conf`
//! exists before dpkg unpacks the package that owns it as a conffile. What survives then depends on
//! dpkg's conffile prompt (cloud-init passes `--force-confold`), on the file's owner group existing yet
//! (it does not: the package creates it), and on the cloud-init version (`defer: true` moves a file to
//! `write_files_deferred`, after the packages, but releases older than that module, added in 2021, such
//! as Debian 11's 20.4, ignore the key and write early). None of that is left to chance here:
//!
//! 1. `write_files` stages every file under [`STAGING_DIR`], a directory no package owns, as root with
//!    mode 0600 when it holds a secret. This works on every cloud-init version, in the init stage.
//! 2. `packages` installs the proxy; its postinst may start it with the package's default configuration,
//!    which allows only localhost clients (tinyproxy) or does not start (dante): never an open proxy.
//! 3. `runcmd`, whose script cloud-init runs in the final stage *after* the packages
//!    (`scripts_user` comes after `package_update_upgrade_install`), moves the staged file into place
//!    with its final owner (the package's group now exists), fills in what is only known at boot, then
//!    enables and restarts the service.
//!
//! # The document is a secret
//!
//! It carries the proxy password (tinyproxy's `BasicAuth` line, the chpasswd input for dante's system
//! user), so [`render`] returns a [`SecretString`]; intermediate buffers are zeroized on drop (best
//! effort: an allocator may have copied them while growing). The password is never put on a command line
//! (`runcmd` lines are visible in `ps` and stored in the instance's scripts directory) and never appears
//! in a [`RenderError`].
//!
//! # Input validation
//!
//! The credentials end up in configuration syntaxes that cannot quote. The strictest of them, tinyproxy's
//! `BasicAuth` directive, accepts only `[-a-z0-9._]` (case-insensitive) for both the user and the
//! password up to tinyproxy 1.11.1 (`ALNUM WS ALNUM` in `src/conf.c`), the release in Debian 12 and Ubuntu
//! 24.04; so that is the alphabet of both, for both protocols (a Secret that works for one protocol works
//! for the other). A SOCKS5 username is also a Linux account name, hence lower case, at most 32
//! characters and not the name of an account the image already has.

pub mod http;
pub mod socks5;

use std::fmt;

use ipnet::IpNet;
use secrecy::SecretString;
use secrecy::zeroize::Zeroizing;
use serde::Serialize;

use crate::model::Protocol as ProxyProtocol;

/// Where `write_files` stages files before `runcmd` moves them into place; no package owns it.
pub const STAGING_DIR: &str = "/etc/egress-proxies";

/// The field a [`RenderError::Port`] names.
pub const FIELD_PORT: &str = "proxy.port";
/// The field a [`RenderError::Username`] names.
pub const FIELD_USERNAME: &str = "proxy.auth.username";
/// The field a [`RenderError::Password`] names.
pub const FIELD_PASSWORD: &str = "proxy.auth.password";
/// The field a [`RenderError::SourceRange`] names, followed by the entry's index: `[3]`.
pub const FIELD_ALLOWED_SOURCE_RANGES: &str = "proxy.allowed_source_ranges";

/// The longest username or password accepted: SOCKS5 username/password authentication (RFC 1929) carries
/// at most 255 bytes of each.
pub const MAX_CREDENTIAL_LENGTH: usize = 255;

/// What the default cloud-init document is rendered from.
pub struct ProxyConfig<'a> {
    pub protocol: ProxyProtocol,
    pub port: u16,
    pub username: &'a str,
    pub password: &'a str,
    /// Source CIDRs allowed to use the proxy; empty allows every IPv4 and IPv6 source (the credentials
    /// are still required).
    pub allowed_source_ranges: &'a [IpNet],
}

impl fmt::Debug for ProxyConfig<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProxyConfig")
            .field("protocol", &self.protocol)
            .field("port", &self.port)
            .field("username", &self.username)
            .field("password", &"[REDACTED]")
            .field("allowed_source_ranges", &self.allowed_source_ranges)
            .finish()
    }
}

/// Why a [`ProxyConfig`] could not be rendered. Each names the field and, except for the password, the
/// offending value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RenderError {
    #[error("{field}: must be a port from 1 to 65535, got {value}")]
    Port { field: &'static str, value: u16 },

    #[error("{field}: {reason}, got {value:?}")]
    Username {
        field: &'static str,
        value: String,
        reason: String,
    },

    /// Never carries the value: it is the proxy password.
    #[error("{field}: {reason} (the value is not shown: it is secret)")]
    Password { field: &'static str, reason: String },

    #[error("{field}: {reason}, got {value}")]
    SourceRange {
        field: String,
        value: IpNet,
        reason: String,
    },

    /// The serializer's own message is dropped: it could quote a scalar of the document.
    #[error("the cloud-config document could not be serialized")]
    Serialize,
}

impl RenderError {
    /// The field of `CreateRequest.proxy` the error is about (`proxy` when serialization failed).
    pub fn field(&self) -> &str {
        match self {
            RenderError::Port { field, .. }
            | RenderError::Username { field, .. }
            | RenderError::Password { field, .. } => field,
            RenderError::SourceRange { field, .. } => field,
            RenderError::Serialize => "proxy",
        }
    }

    /// The message without the leading field name, for a field violation that carries the field apart.
    pub fn description(&self) -> String {
        let message = self.to_string();
        let prefix = format!("{}: ", self.field());
        message.strip_prefix(&prefix).map_or(message.clone(), str::to_owned)
    }
}

/// Renders the default `#cloud-config` document for `config`, after validating it.
///
/// # Errors
///
/// A [`RenderError`] naming the field when the port is 0, a credential has a character the proxy's
/// configuration cannot carry (or, for socks5, the username is not a new Linux account name), or a
/// source range has host bits set or is IPv4-mapped.
pub fn render(config: &ProxyConfig<'_>) -> Result<SecretString, RenderError> {
    validate(config)?;
    let document = match config.protocol {
        ProxyProtocol::Http => http::document(config),
        ProxyProtocol::Socks5 => socks5::document(config),
    };
    document.to_secret()
}

fn validate(config: &ProxyConfig<'_>) -> Result<(), RenderError> {
    if config.port == 0 {
        return Err(RenderError::Port {
            field: FIELD_PORT,
            value: config.port,
        });
    }
    validate_username(config.username, config.protocol)?;
    validate_password(config.password)?;
    for (index, range) in config.allowed_source_ranges.iter().enumerate() {
        validate_source_range(index, range)?;
    }
    Ok(())
}

/// Letters, digits, `.`, `_` and `-`: what tinyproxy's `BasicAuth` line accepts.
fn is_credential_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

fn validate_username(value: &str, protocol: ProxyProtocol) -> Result<(), RenderError> {
    let refuse = |reason: String| RenderError::Username {
        field: FIELD_USERNAME,
        value: value.to_owned(),
        reason,
    };
    if value.is_empty() || value.len() > MAX_CREDENTIAL_LENGTH {
        return Err(refuse(format!("must be 1 to {MAX_CREDENTIAL_LENGTH} characters")));
    }
    if !value.chars().all(is_credential_char) {
        return Err(refuse("may contain only letters, digits, '.', '_' and '-'".into()));
    }
    if protocol == ProxyProtocol::Socks5 {
        socks5::validate_account_name(value).map_err(refuse)?;
    }
    Ok(())
}

/// Never echoes the value, nor which character or position was refused.
fn validate_password(value: &str) -> Result<(), RenderError> {
    let refuse = |reason: String| RenderError::Password {
        field: FIELD_PASSWORD,
        reason,
    };
    if value.is_empty() || value.len() > MAX_CREDENTIAL_LENGTH {
        return Err(refuse(format!("must be 1 to {MAX_CREDENTIAL_LENGTH} characters")));
    }
    if !value.chars().all(is_credential_char) {
        return Err(refuse("may contain only letters, digits, '.', '_' and '-'".into()));
    }
    Ok(())
}

fn validate_source_range(index: usize, range: &IpNet) -> Result<(), RenderError> {
    let refuse = |reason: String| RenderError::SourceRange {
        field: format!("{FIELD_ALLOWED_SOURCE_RANGES}[{index}]"),
        value: *range,
        reason,
    };
    if range.trunc() != *range {
        return Err(refuse(format!("has host bits set; did you mean {}?", range.trunc())));
    }
    // dante refuses IPv4-mapped IPv6 addresses ("we do not use IPv4-mapped IPv6 addresses"); tinyproxy
    // would match them, so the two protocols would disagree. The IPv4 form says the same thing.
    if let IpNet::V6(v6) = range
        && v6.prefix_len() >= 96
        && v6.network().to_ipv4_mapped().is_some()
    {
        return Err(refuse(
            "is an IPv4-mapped IPv6 range; give the IPv4 range instead".into(),
        ));
    }
    Ok(())
}

/// The source ranges the proxy's ACL allows: the configured ones, or every IPv4 and IPv6 source.
fn acl_ranges(config: &ProxyConfig<'_>) -> Vec<String> {
    if config.allowed_source_ranges.is_empty() {
        vec!["0.0.0.0/0".to_owned(), "::/0".to_owned()]
    } else {
        config.allowed_source_ranges.iter().map(ToString::to_string).collect()
    }
}

/// The subset of cloud-config this module emits, in the order cloud-init acts on it.
#[derive(Serialize)]
struct CloudConfig {
    /// `false` makes cloud-init's set_passwords module turn sshd's password authentication off; set when
    /// the document creates an account with a password.
    #[serde(skip_serializing_if = "Option::is_none")]
    ssh_pwauth: Option<bool>,
    write_files: Vec<WriteFile>,
    package_update: bool,
    packages: Vec<&'static str>,
    runcmd: Vec<String>,
}

#[derive(Serialize)]
struct WriteFile {
    path: String,
    owner: &'static str,
    /// A string: cloud-init reads YAML 1.1, where an unquoted 0600 would be an octal integer.
    permissions: &'static str,
    #[serde(serialize_with = "literal_block")]
    content: Zeroizing<String>,
}

fn literal_block<S: serde::Serializer>(content: &Zeroizing<String>, serializer: S) -> Result<S::Ok, S::Error> {
    serde_saphyr::LitStr(content.as_str()).serialize(serializer)
}

impl CloudConfig {
    fn to_secret(&self) -> Result<SecretString, RenderError> {
        // Reserved up front so the serializer does not reallocate (and leave copies of) the buffer.
        let mut out = Zeroizing::new(String::with_capacity(64 * 1024));
        out.push_str("#cloud-config\n");
        // Block scalars only where asked for (file contents); long shell lines stay single-line scalars
        // rather than being folded at whitespace.
        let options = serde_saphyr::ser_options! { prefer_block_scalars: false };
        serde_saphyr::to_fmt_writer_with_options(&mut *out, self, options).map_err(|_| RenderError::Serialize)?;
        Ok(SecretString::from(out.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use secrecy::ExposeSecret;
    use serde_json::Value;

    use super::*;

    /// The password of the golden documents: fake, and distinctive enough to search for.
    pub(super) const GOLDEN_PASSWORD: &str = "golden.Passw0rd-4f9c";

    pub(super) fn golden_ranges() -> Vec<IpNet> {
        ["10.0.0.0/8", "192.168.10.0/24", "2001:db8::/32"]
            .iter()
            .map(|r| r.parse().unwrap())
            .collect()
    }

    pub(super) fn render_to_string(config: &ProxyConfig<'_>) -> String {
        render(config).unwrap().expose_secret().to_owned()
    }

    /// Compares `actual` with `testdata/<name>`; with `UPDATE_GOLDEN=1` rewrites the file instead.
    pub(super) fn assert_golden(name: &str, actual: &str) {
        let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "src", "cloud_init", "testdata", name]
            .iter()
            .collect();
        if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
            std::fs::write(&path, actual).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
            return;
        }
        let expected = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}; run with UPDATE_GOLDEN=1 to create it", path.display()));
        assert!(
            expected == actual,
            "{} differs from the rendered document (run with UPDATE_GOLDEN=1 to accept it):\n--- expected\n{expected}\n--- actual\n{actual}",
            path.display()
        );
    }

    fn config(protocol: ProxyProtocol, ranges: &[IpNet]) -> ProxyConfig<'_> {
        ProxyConfig {
            protocol,
            port: 8080,
            username: "egress",
            password: GOLDEN_PASSWORD,
            allowed_source_ranges: ranges,
        }
    }

    fn parse(document: &str) -> Value {
        serde_saphyr::from_str(document).unwrap_or_else(|e| panic!("not YAML: {e}\n{document}"))
    }

    fn strings(value: &Value) -> Vec<&str> {
        value.as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect()
    }

    const PROTOCOLS: [ProxyProtocol; 2] = [ProxyProtocol::Http, ProxyProtocol::Socks5];

    #[test]
    fn each_document_is_cloud_config_yaml_with_the_expected_top_level_keys() {
        let ranges = golden_ranges();
        for (protocol, package, extra_keys) in [
            (ProxyProtocol::Http, "tinyproxy", &[][..]),
            (ProxyProtocol::Socks5, "dante-server", &["ssh_pwauth"][..]),
        ] {
            let rendered = render_to_string(&config(protocol, &ranges));
            assert_eq!(rendered.lines().next(), Some("#cloud-config"), "{protocol:?}");
            let parsed = parse(&rendered);
            let mut keys: Vec<&str> = parsed.as_object().unwrap().keys().map(String::as_str).collect();
            keys.sort_unstable();
            let mut expected = vec!["package_update", "packages", "runcmd", "write_files"];
            expected.extend_from_slice(extra_keys);
            expected.sort_unstable();
            assert_eq!(keys, expected, "{protocol:?}");
            assert_eq!(strings(&parsed["packages"]), [package]);
            assert_eq!(parsed["package_update"], Value::Bool(true));
            for file in parsed["write_files"].as_array().unwrap() {
                // Strings, not YAML 1.1 octal integers.
                assert!(
                    file["permissions"].as_str().is_some_and(|p| p.starts_with('0')),
                    "{file}"
                );
                assert!(file["path"].as_str().unwrap().starts_with(STAGING_DIR), "{file}");
            }
        }
    }

    #[test]
    fn the_yaml_carries_the_files_and_commands_unchanged() {
        let ranges = golden_ranges();
        for protocol in PROTOCOLS {
            let config = config(protocol, &ranges);
            let document = match protocol {
                ProxyProtocol::Http => http::document(&config),
                ProxyProtocol::Socks5 => socks5::document(&config),
            };
            let parsed = parse(&render_to_string(&config));
            assert_eq!(strings(&parsed["runcmd"]), document.runcmd, "{protocol:?}");
            let files = parsed["write_files"].as_array().unwrap();
            assert_eq!(files.len(), document.write_files.len());
            for (parsed, file) in files.iter().zip(&document.write_files) {
                assert_eq!(parsed["path"].as_str(), Some(file.path.as_str()));
                assert_eq!(parsed["owner"].as_str(), Some(file.owner));
                assert_eq!(parsed["permissions"].as_str(), Some(file.permissions));
                assert_eq!(
                    parsed["content"].as_str(),
                    Some(file.content.as_str()),
                    "{protocol:?} {}",
                    file.path
                );
            }
        }
    }

    #[test]
    fn the_password_appears_only_in_the_basicauth_line_or_the_chpasswd_input() {
        let ranges = golden_ranges();
        for protocol in PROTOCOLS {
            let rendered = render_to_string(&config(protocol, &ranges));
            assert_eq!(
                rendered.matches(GOLDEN_PASSWORD).count(),
                1,
                "{protocol:?}:\n{rendered}"
            );
            let parsed = parse(&rendered);
            for command in strings(&parsed["runcmd"]) {
                assert!(!command.contains(GOLDEN_PASSWORD), "{protocol:?}: {command}");
            }
            let holders: Vec<(&str, &str)> = parsed["write_files"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|f| f["content"].as_str().unwrap().contains(GOLDEN_PASSWORD))
                .map(|f| (f["path"].as_str().unwrap(), f["permissions"].as_str().unwrap()))
                .collect();
            let content_lines: Vec<String> = parsed["write_files"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|f| {
                    f["content"]
                        .as_str()
                        .unwrap()
                        .lines()
                        .map(str::to_owned)
                        .collect::<Vec<_>>()
                })
                .filter(|l| l.contains(GOLDEN_PASSWORD))
                .collect();
            match protocol {
                ProxyProtocol::Http => {
                    assert_eq!(holders, [("/etc/egress-proxies/tinyproxy.conf", "0600")]);
                    assert_eq!(content_lines, [format!("BasicAuth egress {GOLDEN_PASSWORD}")]);
                }
                ProxyProtocol::Socks5 => {
                    assert_eq!(holders, [("/etc/egress-proxies/chpasswd", "0600")]);
                    assert_eq!(content_lines, [format!("egress:{GOLDEN_PASSWORD}")]);
                }
            }
        }
    }

    #[test]
    fn port_zero_is_refused() {
        for protocol in PROTOCOLS {
            let mut config = config(protocol, &[]);
            config.port = 0;
            let error = render(&config).unwrap_err();
            assert!(matches!(error, RenderError::Port { value: 0, .. }), "{error:?}");
            assert_eq!(error.to_string(), "proxy.port: must be a port from 1 to 65535, got 0");
        }
    }

    #[test]
    fn usernames_that_would_break_the_configuration_are_refused_and_named() {
        let too_long = "a".repeat(MAX_CREDENTIAL_LENGTH + 1);
        for protocol in PROTOCOLS {
            for username in [
                "",
                "two words",
                "tab\there",
                "quote\"d",
                "single'quote",
                "hash#tag",
                "user:name",
                "bell\u{7}",
                "é",
                &too_long,
            ] {
                let mut config = config(protocol, &[]);
                config.username = username;
                let error = render(&config).unwrap_err();
                assert!(
                    matches!(error, RenderError::Username { .. }),
                    "{protocol:?} {username:?}: {error:?}"
                );
                let message = error.to_string();
                assert!(message.starts_with("proxy.auth.username: "), "{message}");
                assert!(message.ends_with(&format!("got {username:?}")), "{message}");
            }
        }
    }

    #[test]
    fn passwords_that_would_break_the_configuration_are_refused_without_being_echoed() {
        let too_long = format!("{GOLDEN_PASSWORD}{}", "a".repeat(MAX_CREDENTIAL_LENGTH));
        let bad = [
            String::new(),
            format!("{GOLDEN_PASSWORD} space"),
            format!("{GOLDEN_PASSWORD}\"quote"),
            format!("{GOLDEN_PASSWORD}'quote"),
            format!("{GOLDEN_PASSWORD}#hash"),
            format!("{GOLDEN_PASSWORD}:colon"),
            format!("{GOLDEN_PASSWORD}\nnewline"),
            format!("{GOLDEN_PASSWORD}\u{7}"),
            format!("{GOLDEN_PASSWORD}ü"),
            too_long,
        ];
        for protocol in PROTOCOLS {
            for password in &bad {
                let mut config = config(protocol, &[]);
                config.password = password;
                let error = render(&config).unwrap_err();
                assert!(matches!(error, RenderError::Password { .. }), "{protocol:?}: {error:?}");
                for shown in [error.to_string(), format!("{error:?}")] {
                    assert!(shown.contains("proxy.auth.password"), "{shown}");
                    assert!(!shown.contains(GOLDEN_PASSWORD), "the password leaked: {shown}");
                }
            }
        }
    }

    #[test]
    fn source_ranges_with_host_bits_or_ipv4_mapped_addresses_are_refused_and_named() {
        for (range, reason) in [
            ("10.1.2.3/8", "did you mean 10.0.0.0/8?"),
            ("::ffff:10.0.0.0/104", "IPv4-mapped"),
        ] {
            let ranges = [golden_ranges()[0], range.parse().unwrap()];
            let error = render(&config(ProxyProtocol::Http, &ranges)).unwrap_err();
            let message = error.to_string();
            assert!(message.starts_with("proxy.allowed_source_ranges[1]: "), "{message}");
            assert_eq!(error.field(), "proxy.allowed_source_ranges[1]");
            assert!(error.description().contains(reason), "{}", error.description());
            assert!(!error.description().starts_with("proxy."), "{}", error.description());
            assert!(
                message.contains(reason) && message.ends_with(&format!("got {}", ranges[1])),
                "{message}"
            );
        }
    }

    #[test]
    fn credentials_valid_for_socks5_are_valid_for_http_but_not_the_reverse() {
        for protocol in PROTOCOLS {
            let mut config = config(protocol, &[]);
            config.username = "proxy_user-1";
            config.password = "A-z.0_9";
            assert!(render(&config).is_ok(), "{protocol:?}");
        }
        let mut config = config(ProxyProtocol::Http, &[]);
        config.username = "Proxy.User";
        assert!(render(&config).is_ok());
        config.protocol = ProxyProtocol::Socks5;
        assert!(matches!(render(&config), Err(RenderError::Username { .. })));
    }

    #[test]
    fn the_debug_form_of_a_config_hides_the_password() {
        let shown = format!("{:?}", config(ProxyProtocol::Http, &[]));
        assert!(shown.contains("egress") && !shown.contains(GOLDEN_PASSWORD), "{shown}");
    }
}
