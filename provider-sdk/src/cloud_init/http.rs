//! The default cloud-init for `protocol: http`: tinyproxy from the image's `tinyproxy` package.
//!
//! The configuration is complete rather than a patch of the package's file: `Port`, no `Listen` line
//! (tinyproxy then listens on every address, IPv4 and IPv6), one `BasicAuth` line, one `Allow` per
//! source range (`0.0.0.0/0` and `::/0` when the Proxy allows every source), `DisableViaHeader Yes`, and
//! no `ConnectPort` line, which lets CONNECT reach every port. It logs to syslog at `Notice`: tinyproxy
//! logs neither the `Proxy-Authorization` header nor its own configuration, so no credential reaches a
//! log.
//!
//! # Ownership: root:tinyproxy, mode 0640
//!
//! tinyproxy reads its configuration first as root (it is started as root and drops privileges itself:
//! `main()` loads the file before `change_user()` switches to the file's `User`/`Group`, after binding
//! the port), but it re-reads the file on
//! SIGHUP (`systemctl reload`, a log rotation) *after* dropping privileges, as user tinyproxy; a 0600
//! root-owned file would make every reload fail ("Reloading config file failed!"), as would a unit that
//! starts tinyproxy directly as its user. Group read for `tinyproxy` exposes nothing new: the process
//! running as that user holds the password in memory anyway. The group only exists once the package is
//! installed, which is one more reason the file is staged 0600 root:root by `write_files` and given its
//! final owner by `runcmd` (see the ordering note in the [module above](super)).
//!
//! `MaxClients 256`: each client costs tinyproxy a thread and two sockets, so 256 clients stay under the
//! default soft limit of 1024 open files, while leaving room for a cluster's pooled connections (Debian's
//! default is 100).

use secrecy::zeroize::Zeroizing;

use super::{CloudConfig, ProxyConfig, STAGING_DIR, WriteFile, acl_ranges};

/// The package's configuration file, as Debian's tinyproxy.service starts it.
const CONFIG_PATH: &str = "/etc/tinyproxy/tinyproxy.conf";

/// The pid file Debian's tinyproxy.service (`Type=forking`) waits for.
const PID_FILE: &str = "/run/tinyproxy/tinyproxy.pid";

const MAX_CLIENTS: u32 = 256;

/// Idle timeout of a client or upstream connection, in seconds (the package's default).
const TIMEOUT_SECONDS: u32 = 600;

/// The document for an already validated `config`.
pub(super) fn document(config: &ProxyConfig<'_>) -> CloudConfig {
    let staged = format!("{STAGING_DIR}/tinyproxy.conf");
    CloudConfig {
        ssh_pwauth: None,
        write_files: vec![WriteFile {
            path: staged.clone(),
            owner: "root:root",
            permissions: "0600",
            content: tinyproxy_conf(config),
        }],
        package_update: true,
        packages: vec!["tinyproxy"],
        runcmd: vec![
            // chown and chmod before the rename: the file is never readable beyond root and the group,
            // and rename(2) within /etc replaces the package's file atomically.
            format!("chown root:tinyproxy {staged} && chmod 0640 {staged} && mv -f {staged} {CONFIG_PATH}"),
            "systemctl enable tinyproxy".to_owned(),
            // A restart, not `enable --now`: the package's postinst already started it with its default
            // configuration.
            "systemctl restart tinyproxy".to_owned(),
        ],
    }
}

/// tinyproxy.conf. Lines are matched whole by tinyproxy's parser, so no trailing comments; a comment
/// line must start in column one.
fn tinyproxy_conf(config: &ProxyConfig<'_>) -> Zeroizing<String> {
    let mut conf = Zeroizing::new(String::with_capacity(4096));
    conf.push_str(&format!(
        "# Written by egress-proxies-operator's default cloud-init; changes are lost when the Proxy changes.\n\
         User tinyproxy\n\
         Group tinyproxy\n\
         Port {port}\n\
         # No Listen line: listen on every address, IPv4 and IPv6.\n\
         Timeout {TIMEOUT_SECONDS}\n\
         DefaultErrorFile \"/usr/share/tinyproxy/default.html\"\n\
         Syslog On\n\
         LogLevel Notice\n\
         PidFile \"{PID_FILE}\"\n\
         MaxClients {MAX_CLIENTS}\n\
         DisableViaHeader Yes\n\
         # No ConnectPort line: CONNECT may reach every port.\n",
        port = config.port,
    ));
    // Pushed piecewise: format! would leave an unzeroized copy of the line holding the password.
    conf.push_str("BasicAuth ");
    conf.push_str(config.username);
    conf.push(' ');
    conf.push_str(config.password);
    conf.push('\n');
    for range in acl_ranges(config) {
        conf.push_str(&format!("Allow {range}\n"));
    }
    conf
}

#[cfg(test)]
mod tests {
    use super::super::tests::{GOLDEN_PASSWORD, assert_golden, golden_ranges, render_to_string};
    use super::*;
    use crate::model::Protocol as ProxyProtocol;

    fn config<'a>(ranges: &'a [ipnet::IpNet]) -> ProxyConfig<'a> {
        ProxyConfig {
            protocol: ProxyProtocol::Http,
            port: 3128,
            username: "egress",
            password: GOLDEN_PASSWORD,
            allowed_source_ranges: ranges,
        }
    }

    #[test]
    fn the_http_document_matches_the_golden_file() {
        let ranges = golden_ranges();
        assert_golden("http.yaml", &render_to_string(&config(&ranges)));
    }

    #[test]
    fn every_source_range_becomes_one_allow_line() {
        let ranges = golden_ranges();
        let conf = tinyproxy_conf(&config(&ranges));
        let allows: Vec<&str> = conf.lines().filter(|l| l.starts_with("Allow ")).collect();
        assert_eq!(
            allows,
            ["Allow 10.0.0.0/8", "Allow 192.168.10.0/24", "Allow 2001:db8::/32"]
        );
    }

    #[test]
    fn an_empty_source_range_list_allows_every_ipv4_and_ipv6_source() {
        let conf = tinyproxy_conf(&config(&[]));
        let allows: Vec<&str> = conf.lines().filter(|l| l.starts_with("Allow ")).collect();
        assert_eq!(allows, ["Allow 0.0.0.0/0", "Allow ::/0"]);
    }

    #[test]
    fn the_configuration_has_auth_no_via_header_no_connect_ports_and_no_listen_address() {
        let conf = tinyproxy_conf(&config(&[]));
        let lines: Vec<&str> = conf.lines().collect();
        assert!(lines.contains(&"Port 3128"));
        assert!(lines.contains(&format!("BasicAuth egress {GOLDEN_PASSWORD}").as_str()));
        assert!(lines.contains(&"DisableViaHeader Yes"));
        assert!(lines.contains(&"Syslog On"));
        let directives = || lines.iter().filter(|l| !l.starts_with('#'));
        assert!(!directives().any(|l| l.starts_with("ConnectPort")), "{conf:?}");
        assert!(!directives().any(|l| l.starts_with("Listen")), "{conf:?}");
        assert!(
            !directives().any(|l| l.starts_with("LogFile")),
            "Syslog and LogFile exclude each other"
        );
    }

    #[test]
    fn the_configuration_is_moved_into_place_only_after_the_package_is_installed() {
        let document = document(&config(&[]));
        let staged = &document.write_files[0];
        assert!(staged.path.starts_with(STAGING_DIR), "{}", staged.path);
        assert_eq!((staged.owner, staged.permissions), ("root:root", "0600"));
        assert!(document.write_files.iter().all(|f| f.path != CONFIG_PATH));
        let install = &document.runcmd[0];
        assert!(
            install.ends_with(&format!("mv -f {} {CONFIG_PATH}", staged.path)),
            "{install}"
        );
        assert!(
            install.contains("chown root:tinyproxy") && install.contains("chmod 0640"),
            "{install}"
        );
        assert_eq!(document.runcmd.last().unwrap(), "systemctl restart tinyproxy");
    }
}
