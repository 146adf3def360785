//! Per-name locks for providers: Create and Delete of one instance name run one at a time, while calls
//! for other names never wait on each other (contract §1.3). A lock is held through a guard that releases
//! on drop, and the map forgets a name once nobody holds or waits for its lock.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

type Map = Arc<Mutex<HashMap<String, Arc<AsyncMutex<()>>>>>;

#[derive(Clone, Debug, Default)]
pub struct NameLocks {
    map: Map,
}

/// Holds one name's lock until dropped.
#[derive(Debug)]
pub struct NameGuard {
    guard: Option<OwnedMutexGuard<()>>,
    name: String,
    map: Map,
}

impl NameLocks {
    /// Waits at most `budget` for the name's lock; `None` when another call held it all that time.
    pub async fn lock(&self, name: &str, budget: Duration) -> Option<NameGuard> {
        let mutex = {
            let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
            map.entry(name.to_owned()).or_default().clone()
        };
        // Built before the await, so that a dropped caller still lets the map forget the name.
        let mut guard = NameGuard {
            guard: None,
            name: name.to_owned(),
            map: self.map.clone(),
        };
        guard.guard = Some(tokio::time::timeout(budget, mutex.lock_owned()).await.ok()?);
        Some(guard)
    }

    #[cfg(test)]
    fn names(&self) -> usize {
        self.map.lock().unwrap().len()
    }
}

impl Drop for NameGuard {
    fn drop(&mut self) {
        self.guard.take();
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        // Only the map's own reference left: nobody holds or awaits this name.
        if map.get(&self.name).is_some_and(|mutex| Arc::strong_count(mutex) == 1) {
            map.remove(&self.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUDGET: Duration = Duration::from_millis(100);

    #[tokio::test]
    async fn one_name_is_held_by_one_caller_at_a_time() {
        let locks = NameLocks::default();
        let first = locks.lock("a", BUDGET).await.unwrap();
        assert!(locks.lock("a", BUDGET).await.is_none());
        drop(first);
        assert!(locks.lock("a", BUDGET).await.is_some());
    }

    #[tokio::test]
    async fn other_names_do_not_wait() {
        let locks = NameLocks::default();
        let _a = locks.lock("a", BUDGET).await.unwrap();
        assert!(locks.lock("b", BUDGET).await.is_some());
    }

    #[tokio::test]
    async fn released_names_are_forgotten() {
        let locks = NameLocks::default();
        let a = locks.lock("a", BUDGET).await.unwrap();
        assert!(locks.lock("a", Duration::from_millis(1)).await.is_none());
        assert_eq!(locks.names(), 1);
        drop(a);
        assert_eq!(locks.names(), 0);
    }
}
