//! Supervision of one instance's tinyproxy: a task that starts it (or adopts the one a previous daemon
//! left running), restarts it with exponential backoff when it exits, gives up for one window after a
//! crash loop, and stops it (SIGTERM, then SIGKILL after a budget) when the instance is deleted.

use std::{
    collections::VecDeque,
    net::Ipv4Addr,
    path::PathBuf,
    sync::{Arc, Mutex, MutexGuard},
    time::{Duration, Instant},
};

use tokio::{process::Child, sync::watch, task::JoinHandle};
use tracing::Instrument;

use crate::{process, tinyproxy::CONF_FILE};

/// How often a starting tinyproxy's socket is looked for: first, and at most. Reading the kernel's socket
/// table costs in proportion to the host's connections, so the poll slows down and stops once seen.
const READY_POLL_FIRST: Duration = Duration::from_millis(20);
const READY_POLL_MAX: Duration = Duration::from_secs(2);
/// How long a SIGKILLed process gets to disappear before supervision gives up on it.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// The supervision settings shared by every instance.
#[derive(Clone, Debug)]
pub struct SupervisorConfig {
    pub tinyproxy: PathBuf,
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    pub crash_exits: u32,
    pub crash_window: Duration,
    pub stop_timeout: Duration,
}

/// The instance a supervisor runs.
#[derive(Clone, Debug)]
pub struct Target {
    pub name: String,
    pub dir: PathBuf,
    pub address: Ipv4Addr,
    pub port: u16,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Supervision has not begun: the instance's files are still being written.
    NotStarted,
    /// A tinyproxy process exists (it may not listen yet).
    Up,
    /// Waiting to restart an exited tinyproxy.
    Backoff,
    /// Too many exits in one window (or the files cannot be used): not restarted for a window.
    CrashLoop,
    Stopping,
    Stopped,
}

#[derive(Clone, Debug)]
pub struct Status {
    pub phase: Phase,
    pub pid: Option<u32>,
    /// Whether the current process has been seen listening on the instance's address and port. tinyproxy
    /// never closes its listening socket while it runs, so this holds until the process exits.
    pub listening: bool,
    /// Whether this instance has ever listened (in this daemon's life, or per its record).
    pub served: bool,
    pub exits: u64,
    /// How the last process ended, for Check's message; never holds a sensitive value.
    pub last_exit: Option<String>,
}

/// Called once, the first time the instance is seen listening.
pub type OnServed = Box<dyn FnOnce() + Send + Sync + 'static>;

/// A handle on one instance's supervision task.
#[derive(Debug)]
pub struct Supervisor {
    status: Arc<Mutex<Status>>,
    stop: watch::Sender<bool>,
    task: Mutex<Option<JoinHandle<()>>>,
}

fn lock(status: &Mutex<Status>) -> MutexGuard<'_, Status> {
    status.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Supervisor {
    pub fn new(served: bool) -> Self {
        Self {
            status: Arc::new(Mutex::new(Status {
                phase: Phase::NotStarted,
                pid: None,
                listening: false,
                served,
                exits: 0,
                last_exit: None,
            })),
            stop: watch::Sender::new(false),
            task: Mutex::new(None),
        }
    }

    pub fn status(&self) -> Status {
        lock(&self.status).clone()
    }

    /// Starts supervising: adopts `adopt` when given, else starts a new tinyproxy.
    pub fn launch(&self, config: Arc<SupervisorConfig>, target: Target, adopt: Option<u32>, on_served: OnServed) {
        let span = tracing::info_span!(parent: None, "supervise", provider = "host", instance = %target.name);
        let run = Run {
            config,
            target,
            status: self.status.clone(),
            stop: self.stop.subscribe(),
            on_served: Some(on_served),
        };
        let task = tokio::spawn(run.supervise(adopt).instrument(span));
        *self.task.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
    }

    /// Marks the instance as unable to run without starting anything (its files are unusable).
    pub fn fail(&self, why: String) {
        let mut status = lock(&self.status);
        status.phase = Phase::CrashLoop;
        status.last_exit = Some(why);
    }

    /// Stops the process and waits for the supervision task to end; bounded by the stop budget plus the
    /// kill wait.
    pub async fn stop(&self) {
        self.stop.send_replace(true);
        let task = self.task.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(task) = task {
            let _ = task.await;
        }
        lock(&self.status).phase = Phase::Stopped;
    }
}

/// A supervised process: our child, or one a previous daemon started that we adopted.
enum Proc {
    Child(Child),
    Adopted(u32),
}

impl Proc {
    fn pid(&self) -> Option<u32> {
        match self {
            Proc::Child(child) => child.id(),
            Proc::Adopted(pid) => Some(*pid),
        }
    }

    /// Waits for the process to end and says how it ended. Cancel-safe: it can be called again.
    async fn wait(&mut self) -> String {
        match self {
            Proc::Child(child) => match child.wait().await {
                Ok(status) => status.to_string(),
                Err(error) => format!("waiting for it failed: {error}"),
            },
            Proc::Adopted(pid) => {
                process::wait_exit(*pid).await;
                "exited (an adopted process: its exit status is unknown)".to_owned()
            }
        }
    }

    async fn kill(&mut self) {
        let result = match self {
            Proc::Child(child) => child.start_kill(),
            Proc::Adopted(pid) => process::signal(*pid, "KILL").await,
        };
        if let Err(error) = result {
            tracing::warn!(%error, "could not SIGKILL tinyproxy");
        }
    }
}

enum Ended {
    Exited(String),
    /// Delete asked for the process to stop.
    Stop,
    /// The daemon is going away (the handle was dropped): the process is left running, to be adopted by
    /// the next daemon.
    Abandon,
}

struct Run {
    config: Arc<SupervisorConfig>,
    target: Target,
    status: Arc<Mutex<Status>>,
    stop: watch::Receiver<bool>,
    on_served: Option<OnServed>,
}

impl Run {
    async fn supervise(mut self, mut adopt: Option<u32>) {
        let mut recent_exits: VecDeque<Instant> = VecDeque::new();
        loop {
            if *self.stop.borrow() {
                return self.set_phase(Phase::Stopped, None);
            }
            let started = match adopt.take() {
                Some(pid) => {
                    tracing::info!(instance = %self.target.name, pid, "adopted the running tinyproxy");
                    Ok(Proc::Adopted(pid))
                }
                None => self.start(),
            };
            let how = match started {
                Ok(mut proc) => {
                    self.set_phase(Phase::Up, proc.pid());
                    match self.watch(&mut proc).await {
                        Ended::Exited(how) => how,
                        Ended::Abandon => return,
                        Ended::Stop => {
                            self.set_phase(Phase::Stopping, proc.pid());
                            self.terminate(&mut proc).await;
                            return self.set_phase(Phase::Stopped, None);
                        }
                    }
                }
                Err(error) => format!("could not be started: {error}"),
            };
            let pause = self.after_exit(&mut recent_exits, how);
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                changed = self.stop.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
            }
        }
    }

    /// Records an exit and says how long to wait before the next start: the backoff, or one window after
    /// a crash loop.
    fn after_exit(&self, recent_exits: &mut VecDeque<Instant>, how: String) -> Duration {
        let now = Instant::now();
        recent_exits.push_back(now);
        while recent_exits
            .front()
            .is_some_and(|t| now.duration_since(*t) > self.config.crash_window)
        {
            recent_exits.pop_front();
        }
        {
            let mut status = lock(&self.status);
            status.exits += 1;
            status.last_exit = Some(how.clone());
        }
        if recent_exits.len() >= self.config.crash_exits as usize {
            tracing::warn!(
                instance = %self.target.name,
                exits = recent_exits.len(),
                how = %how,
                "tinyproxy is crash-looping; the instance is Stopped until the next attempt in one window"
            );
            recent_exits.clear();
            self.set_phase(Phase::CrashLoop, None);
            self.config.crash_window
        } else {
            let pause = backoff(&self.config, recent_exits.len());
            tracing::warn!(instance = %self.target.name, how = %how, ?pause, "tinyproxy exited; restarting");
            self.set_phase(Phase::Backoff, None);
            pause
        }
    }

    fn start(&self) -> std::io::Result<Proc> {
        let conf = self.target.dir.join(CONF_FILE);
        let child = process::spawn(&self.config.tinyproxy, &conf, &self.target.dir)?;
        tracing::info!(instance = %self.target.name, pid = child.id(), address = %self.target.address, "started tinyproxy");
        Ok(Proc::Child(child))
    }

    /// Waits for the process to exit or for a stop request, noting when it listens.
    async fn watch(&mut self, proc: &mut Proc) -> Ended {
        let (address, port) = (self.target.address, self.target.port);
        let ready = async move {
            let mut pause = READY_POLL_FIRST;
            loop {
                let sockets = process::listening_sockets_async().await.unwrap_or_default();
                if sockets.contains(&(address, port)) {
                    return;
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(READY_POLL_MAX);
            }
        };
        tokio::pin!(ready);
        let mut watching_ready = true;
        loop {
            tokio::select! {
                how = proc.wait() => return Ended::Exited(how),
                changed = self.stop.changed() => {
                    if changed.is_err() {
                        return Ended::Abandon;
                    }
                    if *self.stop.borrow() {
                        return Ended::Stop;
                    }
                }
                () = &mut ready, if watching_ready => {
                    watching_ready = false;
                    {
                        let mut status = lock(&self.status);
                        status.listening = true;
                        status.served = true;
                    }
                    if let Some(on_served) = self.on_served.take() {
                        on_served();
                    }
                }
            }
        }
    }

    async fn terminate(&self, proc: &mut Proc) {
        if let Some(pid) = proc.pid()
            && let Err(error) = process::signal(pid, "TERM").await
        {
            tracing::warn!(instance = %self.target.name, pid, %error, "could not SIGTERM tinyproxy");
        }
        if tokio::time::timeout(self.config.stop_timeout, proc.wait())
            .await
            .is_err()
        {
            tracing::warn!(instance = %self.target.name, budget = ?self.config.stop_timeout, "tinyproxy ignored SIGTERM; sending SIGKILL");
            proc.kill().await;
            if tokio::time::timeout(KILL_WAIT, proc.wait()).await.is_err() {
                tracing::warn!(instance = %self.target.name, "tinyproxy did not exit after SIGKILL");
            }
        }
        tracing::info!(instance = %self.target.name, "stopped tinyproxy");
    }

    fn set_phase(&self, phase: Phase, pid: Option<u32>) {
        let mut status = lock(&self.status);
        if phase != Phase::Stopping {
            status.listening = false;
        }
        status.phase = phase;
        status.pid = pid;
    }
}

/// The pause before the next start: `initial` doubled for each recent exit after the first, at most `max`.
pub fn backoff(config: &SupervisorConfig, recent_exits: usize) -> Duration {
    let doublings = recent_exits.saturating_sub(1).min(20) as u32;
    config
        .backoff_initial
        .saturating_mul(1 << doublings)
        .min(config.backoff_max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> SupervisorConfig {
        SupervisorConfig {
            tinyproxy: PathBuf::from("/nonexistent/tinyproxy"),
            backoff_initial: Duration::from_millis(200),
            backoff_max: Duration::from_millis(1000),
            crash_exits: 3,
            crash_window: Duration::from_secs(60),
            stop_timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn the_backoff_doubles_per_recent_exit_up_to_the_maximum() {
        let config = config();
        let pauses: Vec<u128> = (1..=5).map(|n| backoff(&config, n).as_millis()).collect();
        assert_eq!(pauses, [200, 400, 800, 1000, 1000]);
        assert_eq!(backoff(&config, 1000), Duration::from_millis(1000));
    }

    #[tokio::test]
    async fn a_binary_that_cannot_start_ends_in_a_crash_loop() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = config();
        config.backoff_initial = Duration::from_millis(10);
        config.backoff_max = Duration::from_millis(10);
        let supervisor = Supervisor::new(false);
        let target = Target {
            name: "egress-a1".into(),
            dir: dir.path().to_owned(),
            address: Ipv4Addr::LOCALHOST,
            port: 1,
        };
        supervisor.launch(Arc::new(config), target, None, Box::new(|| {}));
        let deadline = Instant::now() + Duration::from_secs(5);
        while supervisor.status().phase != Phase::CrashLoop {
            assert!(Instant::now() < deadline, "{:?}", supervisor.status());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let status = supervisor.status();
        assert_eq!(status.exits, 3);
        assert!(status.last_exit.unwrap().contains("could not be started"));
        assert!(!status.served);
        supervisor.stop().await;
        assert_eq!(supervisor.status().phase, Phase::Stopped);
    }
}
