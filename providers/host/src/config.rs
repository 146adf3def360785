//! The host provider's config block (contract §10): the address pool, where records live, which tinyproxy
//! runs, and the budgets of supervision. Strict: unknown fields are refused, and every problem names its
//! field and value.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use provider_sdk::config::{ConfigViolation, Validate};
use serde::Deserialize;

use crate::pool::Pool;

const DEFAULT_TINYPROXY: &str = "/usr/bin/tinyproxy";

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HostConfig {
    /// Addresses instances listen on and send from: `10.0.0.5`, `10.0.0.5-10.0.0.9` or `10.0.0.0/28`.
    pub pool: Vec<String>,
    /// Where records and per-instance files live. `~` and `${VAR}` are expanded; when omitted,
    /// `$XDG_CACHE_HOME/egress-proxies/host`, else `$HOME/.cache/egress-proxies/host`.
    #[serde(default)]
    pub state_dir: Option<String>,
    #[serde(default = "default_tinyproxy")]
    pub tinyproxy_path: PathBuf,
    /// tinyproxy's `MaxClients`: concurrent connections per instance.
    #[serde(default = "default_max_clients")]
    pub max_clients: u32,
    #[serde(default)]
    pub restart_backoff: RestartBackoff,
    #[serde(default)]
    pub crash_loop: CrashLoop,
    /// How long a stopping tinyproxy gets after SIGTERM before SIGKILL.
    #[serde(default = "default_stop_timeout_ms")]
    pub stop_timeout_ms: u64,
    /// How long a Create or Delete waits for another call on the same instance name.
    #[serde(default = "default_lock_timeout_ms")]
    pub lock_timeout_ms: u64,
    /// Budget of `tinyproxy -v` in Check.
    #[serde(default = "default_check_timeout_ms")]
    pub check_timeout_ms: u64,
}

/// Delay before restarting an exited tinyproxy: `initialMs`, doubled per exit inside the crash-loop
/// window, at most `maxMs`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RestartBackoff {
    #[serde(default = "default_initial_ms")]
    pub initial_ms: u64,
    #[serde(default = "default_max_ms")]
    pub max_ms: u64,
}

/// `exits` exits within `windowSeconds` is a crash loop: the instance is Stopped, Check fails, and the
/// next attempt waits one window.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CrashLoop {
    #[serde(default = "default_crash_exits")]
    pub exits: u32,
    #[serde(default = "default_crash_window")]
    pub window_seconds: u64,
}

fn default_tinyproxy() -> PathBuf {
    PathBuf::from(DEFAULT_TINYPROXY)
}
fn default_max_clients() -> u32 {
    100
}
fn default_stop_timeout_ms() -> u64 {
    5_000
}
fn default_lock_timeout_ms() -> u64 {
    10_000
}
fn default_check_timeout_ms() -> u64 {
    2_000
}
fn default_initial_ms() -> u64 {
    200
}
fn default_max_ms() -> u64 {
    30_000
}
fn default_crash_exits() -> u32 {
    5
}
fn default_crash_window() -> u64 {
    60
}

impl Default for RestartBackoff {
    fn default() -> Self {
        Self {
            initial_ms: default_initial_ms(),
            max_ms: default_max_ms(),
        }
    }
}

impl Default for CrashLoop {
    fn default() -> Self {
        Self {
            exits: default_crash_exits(),
            window_seconds: default_crash_window(),
        }
    }
}

/// The config resolved into the values the provider uses.
#[derive(Clone, Debug)]
pub struct Settings {
    pub pool: Pool,
    pub state_dir: PathBuf,
    pub tinyproxy_path: PathBuf,
    pub max_clients: u32,
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    pub crash_exits: u32,
    pub crash_window: Duration,
    pub stop_timeout: Duration,
    pub lock_timeout: Duration,
    pub check_timeout: Duration,
}

impl HostConfig {
    /// Resolves the config with the process environment; fails only where [`Validate`] would.
    pub fn settings(&self) -> Result<Settings, String> {
        let env = |name: &str| std::env::var(name).ok();
        let pool = Pool::parse(&self.pool).map_err(|v| join(&v))?;
        let state_dir = state_dir(self.state_dir.as_deref(), env).map_err(|v| v.to_string())?;
        Ok(Settings {
            pool,
            state_dir,
            tinyproxy_path: self.tinyproxy_path.clone(),
            max_clients: self.max_clients,
            backoff_initial: Duration::from_millis(self.restart_backoff.initial_ms),
            backoff_max: Duration::from_millis(self.restart_backoff.max_ms),
            crash_exits: self.crash_loop.exits,
            crash_window: Duration::from_secs(self.crash_loop.window_seconds),
            stop_timeout: Duration::from_millis(self.stop_timeout_ms),
            lock_timeout: Duration::from_millis(self.lock_timeout_ms),
            check_timeout: Duration::from_millis(self.check_timeout_ms),
        })
    }

    fn validate_with(&self, env: impl Fn(&str) -> Option<String>) -> Vec<ConfigViolation> {
        let mut violations = Pool::parse(&self.pool).err().unwrap_or_default();
        if let Err(violation) = state_dir(self.state_dir.as_deref(), env) {
            violations.push(violation);
        }
        let tinyproxy = &self.tinyproxy_path;
        if !tinyproxy.is_absolute() {
            violations.push(ConfigViolation::new(
                "tinyproxyPath",
                tinyproxy,
                "must be an absolute path",
            ));
        }
        let mut range = |field: &str, value: u64, min: u64, max: u64| {
            if !(min..=max).contains(&value) {
                violations.push(ConfigViolation::new(field, value, format!("must be {min} to {max}")));
            }
        };
        range("maxClients", u64::from(self.max_clients), 1, 100_000);
        range("restartBackoff.initialMs", self.restart_backoff.initial_ms, 10, 600_000);
        range("restartBackoff.maxMs", self.restart_backoff.max_ms, 10, 600_000);
        range("crashLoop.exits", u64::from(self.crash_loop.exits), 2, 1_000);
        range("crashLoop.windowSeconds", self.crash_loop.window_seconds, 1, 86_400);
        range("stopTimeoutMs", self.stop_timeout_ms, 100, 60_000);
        range("lockTimeoutMs", self.lock_timeout_ms, 100, 60_000);
        range("checkTimeoutMs", self.check_timeout_ms, 100, 60_000);
        if self.restart_backoff.max_ms < self.restart_backoff.initial_ms {
            violations.push(ConfigViolation::new(
                "restartBackoff.maxMs",
                self.restart_backoff.max_ms,
                format!(
                    "must be at least restartBackoff.initialMs ({})",
                    self.restart_backoff.initial_ms
                ),
            ));
        }
        violations
    }
}

impl Validate for HostConfig {
    fn validate(&self) -> Vec<ConfigViolation> {
        self.validate_with(|name| std::env::var(name).ok())
    }
}

fn join(violations: &[ConfigViolation]) -> String {
    violations
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The state directory: the configured one expanded, or the per-user cache default.
fn state_dir(configured: Option<&str>, env: impl Fn(&str) -> Option<String>) -> Result<PathBuf, ConfigViolation> {
    let set = |name: &str| env(name).filter(|value| !value.is_empty());
    let path = match configured {
        Some(raw) => expand(raw, &set).map_err(|problem| ConfigViolation::new("stateDir", raw, problem))?,
        None => match (set("XDG_CACHE_HOME"), set("HOME")) {
            (Some(cache), _) => Path::new(&cache).join("egress-proxies/host"),
            (None, Some(home)) => Path::new(&home).join(".cache/egress-proxies/host"),
            (None, None) => {
                return Err(ConfigViolation::new(
                    "stateDir",
                    "",
                    "must be given when neither XDG_CACHE_HOME nor HOME is set",
                ));
            }
        },
    };
    let shown = path.display().to_string();
    if !path.is_absolute() {
        return Err(ConfigViolation::new("stateDir", shown, "must be an absolute path"));
    }
    // The path is written into tinyproxy.conf as a quoted string, which cannot hold these.
    if shown.chars().any(|c| c == '"' || c.is_control()) {
        return Err(ConfigViolation::new(
            "stateDir",
            shown,
            "must not contain '\"' or control characters",
        ));
    }
    Ok(path)
}

/// Expands a leading `~` (HOME) and every `${NAME}`; an unset variable is an error naming it.
fn expand(raw: &str, env: &impl Fn(&str) -> Option<String>) -> Result<PathBuf, String> {
    let home = || env("HOME").ok_or_else(|| "starts with ~ but HOME is not set".to_owned());
    let mut text = match raw.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => format!("{}{rest}", home()?),
        _ => raw.to_owned(),
    };
    while let Some(start) = text.find("${") {
        let end = text[start..]
            .find('}')
            .map(|i| start + i)
            .ok_or_else(|| "has an unterminated ${".to_owned())?;
        let name = &text[start + 2..end];
        let valid = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(format!("names ${{{name}}}, which is not a variable name"));
        }
        let value = env(name).ok_or_else(|| format!("names ${{{name}}}, which is not set"))?;
        text.replace_range(start..=end, &value);
    }
    Ok(PathBuf::from(text))
}

#[cfg(test)]
mod tests {
    use provider_sdk::config::parse;

    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOME" => Some("/home/ada".into()),
            "STATE" => Some("/srv/state".into()),
            _ => None,
        }
    }

    /// Deserialises without validating, so that tests validate with `env` rather than the process's.
    fn config(text: &str) -> HostConfig {
        serde_saphyr::from_str(text).unwrap()
    }

    fn problems(text: &str) -> String {
        join(&config(text).validate_with(env))
    }

    #[test]
    fn a_pool_alone_is_a_complete_config_with_defaults() {
        let config = config("pool: [127.0.1.0/28]\n");
        assert!(config.validate_with(env).is_empty());
        assert_eq!(config.tinyproxy_path, Path::new("/usr/bin/tinyproxy"));
        assert_eq!(config.max_clients, 100);
        assert_eq!(config.restart_backoff.initial_ms, 200);
        assert_eq!(config.crash_loop.exits, 5);
        assert_eq!(config.crash_loop.window_seconds, 60);
    }

    #[test]
    fn the_pool_is_required() {
        let error = parse::<HostConfig>("host.yaml", "stateDir: /tmp/x\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("pool"), "{error}");
    }

    #[test]
    fn unknown_fields_are_refused_by_name() {
        let error = parse::<HostConfig>("host.yaml", "pool: [10.0.0.1]\nstatedir: /x\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("statedir"), "{error}");
        let nested = parse::<HostConfig>("host.yaml", "pool: [10.0.0.1]\ncrashLoop: {exit: 3}\n")
            .unwrap_err()
            .to_string();
        assert!(nested.contains("exit"), "{nested}");
    }

    #[test]
    fn the_state_dir_defaults_to_the_users_cache() {
        assert_eq!(
            state_dir(None, env).unwrap(),
            Path::new("/home/ada/.cache/egress-proxies/host")
        );
        let xdg = |name: &str| (name == "XDG_CACHE_HOME").then(|| "/var/cache/ada".to_owned());
        assert_eq!(
            state_dir(None, xdg).unwrap(),
            Path::new("/var/cache/ada/egress-proxies/host")
        );
        let error = state_dir(None, |_| None).unwrap_err().to_string();
        assert!(error.contains("neither XDG_CACHE_HOME nor HOME"), "{error}");
    }

    #[test]
    fn the_state_dir_expands_a_tilde_and_variables() {
        assert_eq!(state_dir(Some("~/egress"), env).unwrap(), Path::new("/home/ada/egress"));
        assert_eq!(
            state_dir(Some("${STATE}/host"), env).unwrap(),
            Path::new("/srv/state/host")
        );
        assert_eq!(state_dir(Some("/a/~b"), env).unwrap(), Path::new("/a/~b"));
    }

    #[test]
    fn a_bad_state_dir_is_named_with_its_value() {
        let unset = problems("pool: [10.0.0.1]\nstateDir: ${NOPE}/host\n");
        assert!(
            unset.contains("stateDir: \"${NOPE}/host\" names ${NOPE}, which is not set"),
            "{unset}"
        );
        let relative = problems("pool: [10.0.0.1]\nstateDir: state\n");
        assert!(
            relative.contains("stateDir: \"state\" must be an absolute path"),
            "{relative}"
        );
        let quoted = problems("pool: [10.0.0.1]\nstateDir: '/tmp/a\"b'\n");
        assert!(quoted.contains("must not contain"), "{quoted}");
        assert!(problems("pool: [10.0.0.1]\nstateDir: /a/${x-y}\n").contains("not a variable name"));
        assert!(problems("pool: [10.0.0.1]\nstateDir: /a/${HOME\n").contains("unterminated"));
    }

    #[test]
    fn out_of_range_values_name_their_field() {
        let text = problems(
            "pool: [10.0.0.1]\ntinyproxyPath: tinyproxy\nmaxClients: 0\nrestartBackoff: {initialMs: 500, maxMs: 100}\n\
             crashLoop: {exits: 1, windowSeconds: 0}\nstopTimeoutMs: 1\nlockTimeoutMs: 9999999\ncheckTimeoutMs: 0\n",
        );
        for expected in [
            "tinyproxyPath: \"tinyproxy\" must be an absolute path",
            "maxClients: 0 must be 1 to 100000",
            "restartBackoff.maxMs: 100 must be at least restartBackoff.initialMs (500)",
            "crashLoop.exits: 1 must be 2 to 1000",
            "crashLoop.windowSeconds: 0 must be 1 to 86400",
            "stopTimeoutMs: 1 must be 100 to 60000",
            "lockTimeoutMs: 9999999 must be 100 to 60000",
            "checkTimeoutMs: 0 must be 100 to 60000",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in {text}");
        }
    }

    #[test]
    fn pool_problems_are_reported_with_the_others() {
        let text = problems("pool: [banana]\nmaxClients: 0\n");
        assert!(
            text.contains("pool[0]: \"banana\"") && text.contains("maxClients: 0"),
            "{text}"
        );
    }
}
