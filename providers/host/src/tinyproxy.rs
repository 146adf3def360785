//! tinyproxy's side of an instance: the config file rendered from the request's proxy settings, the
//! rules its parser imposes on credentials, and reading the password back when a restarted daemon
//! re-renders the file.

use std::{fmt::Write as _, net::Ipv4Addr, path::Path};

use ipnet::IpNet;
use secrecy::{ExposeSecret, SecretString};

/// File names inside an instance's directory.
pub const CONF_FILE: &str = "tinyproxy.conf";
pub const PID_FILE: &str = "tinyproxy.pid";
pub const LOG_FILE: &str = "tinyproxy.log";

/// What one instance's tinyproxy is configured with.
#[derive(Debug)]
pub struct ProxyConf<'a> {
    pub name: &'a str,
    pub address: Ipv4Addr,
    pub port: u16,
    pub username: &'a str,
    pub password: &'a SecretString,
    pub allowed_source_ranges: &'a [IpNet],
    pub max_clients: u32,
    /// The instance's directory, which holds the pid and log files.
    pub dir: &'a Path,
}

/// True for a word tinyproxy 1.11's `BasicAuth` line accepts: its parser matches `[-A-Za-z0-9._]+` for
/// both the user and the password, and refuses the whole file otherwise.
pub fn is_basic_auth_word(value: &str) -> bool {
    !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The config file's text. It holds the password, so it comes back as a secret.
pub fn render(conf: &ProxyConf<'_>) -> SecretString {
    let mut text = String::new();
    let mut line = |args: std::fmt::Arguments<'_>| {
        let _ = text.write_fmt(args);
        text.push('\n');
    };
    line(format_args!(
        "# Written by egress-provider-host for instance {}; rewritten when the daemon restarts it.",
        conf.name
    ));
    line(format_args!("Port {}", conf.port));
    line(format_args!("Listen {}", conf.address));
    // The outgoing address: what the destination sees as the source.
    line(format_args!("Bind {}", conf.address));
    line(format_args!(
        "BasicAuth {} {}",
        conf.username,
        conf.password.expose_secret()
    ));
    if conf.allowed_source_ranges.is_empty() {
        // tinyproxy allows everyone when no Allow line exists; writing it out says it was meant.
        line(format_args!("Allow 0.0.0.0/0"));
        line(format_args!("Allow ::/0"));
    } else {
        for range in conf.allowed_source_ranges {
            line(format_args!("Allow {range}"));
        }
    }
    line(format_args!("DisableViaHeader Yes"));
    line(format_args!("MaxClients {}", conf.max_clients));
    line(format_args!("PidFile \"{}\"", conf.dir.join(PID_FILE).display()));
    line(format_args!("LogFile \"{}\"", conf.dir.join(LOG_FILE).display()));
    line(format_args!("LogLevel Warning"));
    SecretString::from(text)
}

/// The password of the `BasicAuth` line of a file [`render`] wrote.
pub fn read_password(conf_text: &str) -> Option<SecretString> {
    conf_text.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        match (words.next(), words.next(), words.next(), words.next()) {
            (Some("BasicAuth"), Some(_user), Some(password), None) => Some(SecretString::from(password)),
            _ => None,
        }
    })
}

/// The version `tinyproxy -v` prints (`tinyproxy 1.11.1` → `1.11.1`).
pub fn parse_version(output: &str) -> Option<String> {
    let line = output.lines().find(|line| line.trim_start().starts_with("tinyproxy"))?;
    line.split_whitespace().nth(1).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(ranges: &[&str]) -> String {
        let password = SecretString::from("s3cret.pw");
        let ranges: Vec<IpNet> = ranges.iter().map(|r| r.parse().unwrap()).collect();
        let conf = ProxyConf {
            name: "egress-a1",
            address: "127.0.1.5".parse().unwrap(),
            port: 3128,
            username: "egress",
            password: &password,
            allowed_source_ranges: &ranges,
            max_clients: 50,
            dir: Path::new("/var/lib/egress/egress-a1"),
        };
        render(&conf).expose_secret().to_owned()
    }

    #[test]
    fn the_config_listens_on_and_sends_from_the_instance_address() {
        let text = rendered(&["10.0.0.0/8"]);
        let lines: Vec<&str> = text.lines().skip(1).collect();
        assert_eq!(
            lines,
            [
                "Port 3128",
                "Listen 127.0.1.5",
                "Bind 127.0.1.5",
                "BasicAuth egress s3cret.pw",
                "Allow 10.0.0.0/8",
                "DisableViaHeader Yes",
                "MaxClients 50",
                "PidFile \"/var/lib/egress/egress-a1/tinyproxy.pid\"",
                "LogFile \"/var/lib/egress/egress-a1/tinyproxy.log\"",
                "LogLevel Warning",
            ]
        );
    }

    #[test]
    fn no_allowed_ranges_allows_every_source_explicitly() {
        let text = rendered(&[]);
        assert!(text.contains("Allow 0.0.0.0/0\nAllow ::/0\n"), "{text}");
    }

    #[test]
    fn every_allowed_range_gets_its_own_line_in_order() {
        let text = rendered(&["192.0.2.0/24", "fd00::/8"]);
        assert!(text.contains("Allow 192.0.2.0/24\nAllow fd00::/8\n"), "{text}");
        assert!(!text.contains("0.0.0.0/0"), "{text}");
    }

    #[test]
    fn connect_is_not_limited_to_some_ports() {
        assert!(!rendered(&[]).contains("ConnectPort"));
    }

    #[test]
    fn the_password_is_read_back_from_the_rendered_file() {
        let password = read_password(&rendered(&[])).unwrap();
        assert_eq!(password.expose_secret(), "s3cret.pw");
        assert!(read_password("Port 1\n").is_none());
    }

    #[test]
    fn basic_auth_words_are_what_tinyproxy_parses() {
        for good in ["egress", "A.b_c-9", "x"] {
            assert!(is_basic_auth_word(good), "{good}");
        }
        for bad in ["", "a b", "p@ss", "p+w", "ümlaut", "a\"b", "a#b"] {
            assert!(!is_basic_auth_word(bad), "{bad}");
        }
    }

    #[test]
    fn the_version_is_read_from_tinyproxy_dash_v() {
        assert_eq!(parse_version("tinyproxy 1.11.1\n").as_deref(), Some("1.11.1"));
        assert_eq!(parse_version("something else\n"), None);
    }
}
