//! The default cloud-init for `protocol: socks5`: dante (`danted`) from the image's `dante-server`
//! package.
//!
//! # Authentication: a system account
//!
//! dante's `username` method checks the SOCKS5 username and password against the system password file,
//! which is why `user.privileged` is root (reading the shadow file needs it; the man page says so for any
//! password-based method) and why the document creates an account: no home, no login shell
//! (`/usr/sbin/nologin`). Its password is set by `chpasswd` reading a staged file (mode 0600, removed
//! right after) on its standard input, never from a command line. `useradd ... && chpasswd` sets no
//! password when the account already exists, so a name that collides with an account of the image can
//! not take it over; the common ones are refused before rendering (`validate_account_name`). The
//! `socks pass` rule names the account (`user:`), since without it dante accepts *every* account of the
//! password file. And `ssh_pwauth: false` keeps sshd from accepting that password: a nologin shell does
//! not stop `ssh -N -D` port forwarding, which would bypass dante's rules.
//!
//! # Rules
//!
//! `internal: 0.0.0.0 port = <port>` listens on every IPv4 address. One `client pass` (may connect) and
//! one `socks pass` (may proxy, `connect` only: `bind` and `udpassociate` would open ports the firewall
//! was not asked for) per allowed source range, `0/0` (every IPv4 and IPv6 source) when the Proxy allows
//! all; explicit `block` rules after them log refusals. Before the `socks pass` rules, a `socks block`
//! keeps clients away from the instance itself (loopback) and from link-local addresses, where cloud
//! metadata services (and the instance's credentials, on some clouds) live.
//!
//! # The external interface, found at boot
//!
//! dante needs the interface outgoing connections leave from (`external:`). Its name (`eth0`, `ens5`,
//! `enp1s0`, ...) depends on the image and the machine type, so the configuration is staged as a
//! template and `runcmd` fills in the interface of the default route. It holds no secret: mode 0644.
//! Like tinyproxy's, it is only moved into place after the package is installed (see the ordering note
//! in the [module above](super)).

use secrecy::zeroize::Zeroizing;

use super::{CloudConfig, ProxyConfig, STAGING_DIR, WriteFile, acl_ranges};

/// The package's configuration file (Debian's `danted.service` reads it).
const CONFIG_PATH: &str = "/etc/danted.conf";

/// Replaced by the name of the default route's interface at boot.
const EXTERNAL_PLACEHOLDER: &str = "@EXTERNAL_INTERFACE@";

/// The longest Linux account name `useradd` accepts.
const MAX_ACCOUNT_NAME_LENGTH: usize = 32;

/// Accounts Debian and Ubuntu cloud images have (or that packages commonly add); a Proxy may not use
/// one as its SOCKS5 username. Names starting with `systemd-` are refused too.
const RESERVED_ACCOUNTS: &[&str] = &[
    "_apt",
    "admin",
    "backup",
    "bin",
    "daemon",
    "debian",
    "dnsmasq",
    "games",
    "gnats",
    "irc",
    "landscape",
    "list",
    "lp",
    "lxd",
    "mail",
    "man",
    "messagebus",
    "news",
    "nobody",
    "polkitd",
    "pollinate",
    "proxy",
    "root",
    "sshd",
    "sync",
    "sys",
    "syslog",
    "tcpdump",
    "tss",
    "ubuntu",
    "uucp",
    "uuidd",
    "www-data",
];

/// A SOCKS5 username is a Linux account name: `[a-z_][a-z0-9_-]*`, at most 32 characters (what
/// `useradd` accepts on every Debian and Ubuntu release, and what dante's `user:` keyword can carry), and
/// not an account the image already has.
pub(super) fn validate_account_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if !first_ok || !rest_ok || name.len() > MAX_ACCOUNT_NAME_LENGTH {
        return Err(format!(
            "is also a Linux account name for socks5, so it must start with a lower-case letter or '_', \
             continue with lower-case letters, digits, '_' or '-', and have at most \
             {MAX_ACCOUNT_NAME_LENGTH} characters"
        ));
    }
    if RESERVED_ACCOUNTS.contains(&name) || name.starts_with("systemd-") {
        return Err("names an account the image already has".to_owned());
    }
    Ok(())
}

/// The document for an already validated `config`.
pub(super) fn document(config: &ProxyConfig<'_>) -> CloudConfig {
    let template = format!("{STAGING_DIR}/danted.conf.in");
    let chpasswd = format!("{STAGING_DIR}/chpasswd");
    let username = config.username;
    CloudConfig {
        ssh_pwauth: Some(false),
        write_files: vec![
            WriteFile {
                path: template.clone(),
                owner: "root:root",
                permissions: "0644",
                content: danted_conf_template(config),
            },
            WriteFile {
                path: chpasswd.clone(),
                owner: "root:root",
                permissions: "0600",
                content: chpasswd_input(config),
            },
        ],
        package_update: true,
        packages: vec!["dante-server"],
        runcmd: vec![
            // The staged password file goes whatever happens: `;`, not `&&`, before the rm.
            format!(
                "useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin {username} \
                 && chpasswd < {chpasswd}; rm -f {chpasswd}"
            ),
            format!(
                "iface=\"$(ip -4 route show default | awk '{{for (i = 1; i < NF; i++) if ($i == \"dev\") {{ print $(i + 1); exit }}}}')\" \
                 && [ -n \"$iface\" ] && sed \"s/{EXTERNAL_PLACEHOLDER}/$iface/\" {template} > {CONFIG_PATH}"
            ),
            "systemctl enable danted".to_owned(),
            "systemctl restart danted".to_owned(),
        ],
    }
}

/// `<username>:<password>`, chpasswd's input; the only place the password appears.
fn chpasswd_input(config: &ProxyConfig<'_>) -> Zeroizing<String> {
    let mut input = Zeroizing::new(String::with_capacity(config.username.len() + config.password.len() + 2));
    input.push_str(config.username);
    input.push(':');
    input.push_str(config.password);
    input.push('\n');
    input
}

/// danted.conf with [`EXTERNAL_PLACEHOLDER`] for the external interface.
fn danted_conf_template(config: &ProxyConfig<'_>) -> Zeroizing<String> {
    let sources: Vec<String> = if config.allowed_source_ranges.is_empty() {
        // dante's `0/0` matches every IPv4 and IPv6 address.
        vec!["0/0".to_owned()]
    } else {
        acl_ranges(config)
    };
    let mut conf = format!(
        "# Written by egress-proxies-operator's default cloud-init; changes are lost when the Proxy changes.\n\
         logoutput: syslog\n\
         user.privileged: root\n\
         user.unprivileged: nobody\n\
         internal: 0.0.0.0 port = {port}\n\
         external: {EXTERNAL_PLACEHOLDER}\n\
         clientmethod: none\n\
         socksmethod: username\n",
        port = config.port,
    );
    for source in &sources {
        conf.push_str(&format!(
            "client pass {{\n    from: {source} to: 0/0\n    log: error\n}}\n"
        ));
    }
    conf.push_str("client block {\n    from: 0/0 to: 0/0\n    log: connect error\n}\n");
    for destination in ["127.0.0.0/8", "::1/128", "169.254.0.0/16", "fe80::/10"] {
        conf.push_str(&format!(
            "socks block {{\n    from: 0/0 to: {destination}\n    log: connect error\n}}\n"
        ));
    }
    for source in &sources {
        conf.push_str(&format!(
            "socks pass {{\n    from: {source} to: 0/0\n    command: connect\n    socksmethod: username\n    \
             user: {username}\n    log: error\n}}\n",
            username = config.username,
        ));
    }
    conf.push_str("socks block {\n    from: 0/0 to: 0/0\n    log: connect error\n}\n");
    Zeroizing::new(conf)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{GOLDEN_PASSWORD, assert_golden, golden_ranges, render_to_string};
    use super::*;
    use crate::model::Protocol as ProxyProtocol;

    fn config<'a>(ranges: &'a [ipnet::IpNet]) -> ProxyConfig<'a> {
        ProxyConfig {
            protocol: ProxyProtocol::Socks5,
            port: 1080,
            username: "egress",
            password: GOLDEN_PASSWORD,
            allowed_source_ranges: ranges,
        }
    }

    fn rule_sources(conf: &str, rule: &str) -> Vec<String> {
        let mut sources = Vec::new();
        let mut lines = conf.lines();
        while let Some(line) = lines.next() {
            if line == format!("{rule} {{") {
                let from = lines.next().unwrap().trim();
                sources.push(
                    from.strip_prefix("from: ")
                        .unwrap()
                        .split(' ')
                        .next()
                        .unwrap()
                        .to_owned(),
                );
            }
        }
        sources
    }

    #[test]
    fn the_socks5_document_matches_the_golden_file() {
        let ranges = golden_ranges();
        assert_golden("socks5.yaml", &render_to_string(&config(&ranges)));
    }

    #[test]
    fn every_source_range_becomes_one_client_pass_and_one_socks_pass_rule() {
        let ranges = golden_ranges();
        let conf = danted_conf_template(&config(&ranges));
        let expected = ["10.0.0.0/8", "192.168.10.0/24", "2001:db8::/32"];
        assert_eq!(rule_sources(&conf, "client pass"), expected);
        assert_eq!(rule_sources(&conf, "socks pass"), expected);
    }

    #[test]
    fn an_empty_source_range_list_passes_every_source() {
        let conf = danted_conf_template(&config(&[]));
        assert_eq!(rule_sources(&conf, "client pass"), ["0/0"]);
        assert_eq!(rule_sources(&conf, "socks pass"), ["0/0"]);
    }

    #[test]
    fn the_socks_rules_accept_only_the_proxy_account_and_keep_clients_off_the_instance() {
        let conf = danted_conf_template(&config(&[]));
        assert!(conf.contains("internal: 0.0.0.0 port = 1080\n"), "{conf:?}");
        assert!(
            conf.contains(&format!("external: {EXTERNAL_PLACEHOLDER}\n")),
            "{conf:?}"
        );
        assert!(conf.contains("socksmethod: username\n    user: egress\n"), "{conf:?}");
        let first_pass = conf.find("socks pass").unwrap();
        for destination in ["127.0.0.0/8", "169.254.0.0/16"] {
            let block = conf.find(&format!("to: {destination}")).unwrap();
            assert!(
                block < first_pass,
                "{destination} must be blocked before any socks pass rule"
            );
        }
    }

    #[test]
    fn the_account_gets_its_password_from_a_staged_file_that_is_removed() {
        let document = document(&config(&[]));
        let staged = document
            .write_files
            .iter()
            .find(|f| f.path.ends_with("/chpasswd"))
            .unwrap();
        assert_eq!((staged.owner, staged.permissions), ("root:root", "0600"));
        assert_eq!(staged.content.as_str(), format!("egress:{GOLDEN_PASSWORD}\n"));
        let create = &document.runcmd[0];
        assert!(
            create.contains("--shell /usr/sbin/nologin egress && chpasswd < "),
            "{create}"
        );
        assert!(create.ends_with(&format!("; rm -f {}", staged.path)), "{create}");
        assert_eq!(document.ssh_pwauth, Some(false));
    }

    #[test]
    fn the_configuration_is_rendered_into_place_only_after_the_package_is_installed() {
        let document = document(&config(&[]));
        assert!(document.write_files.iter().all(|f| f.path.starts_with(STAGING_DIR)));
        let fill = &document.runcmd[1];
        assert!(fill.contains("ip -4 route show default"), "{fill}");
        assert!(fill.ends_with(&format!("> {CONFIG_PATH}")), "{fill}");
        assert_eq!(document.runcmd.last().unwrap(), "systemctl restart danted");
    }

    #[test]
    fn a_socks5_username_must_be_a_new_linux_account_name() {
        for good in ["egress", "_proxy", "proxy-user_1", &"a".repeat(32)] {
            assert_eq!(validate_account_name(good), Ok(()), "{good}");
        }
        for bad in [
            "Egress",
            "1proxy",
            "-proxy",
            "proxy.user",
            &"a".repeat(33),
            "root",
            "ubuntu",
            "systemd-x",
        ] {
            assert!(validate_account_name(bad).is_err(), "{bad}");
        }
    }
}
