//! Work a provider must finish even when its caller stops waiting. A handler future is dropped when the
//! caller's deadline passes, which would cut a Create or Delete off between two backend calls; run as a
//! task of its own (in the handler's span) the work finishes, and the caller's retry finds its result.

use std::future::Future;

use tracing::Instrument;

/// Runs `work` to completion on a task of its own and returns its output; a panic in `work` is resumed in
/// the caller, so the server answers INTERNAL as for any handler panic.
pub async fn run_detached<T: Send + 'static>(work: impl Future<Output = T> + Send + 'static) -> T {
    match tokio::spawn(work.in_current_span()).await {
        Ok(output) => output,
        Err(error) => std::panic::resume_unwind(error.into_panic()),
    }
}

#[cfg(test)]
mod tests {
    use std::{
        sync::{
            Arc,
            atomic::{AtomicBool, Ordering},
        },
        time::Duration,
    };

    use super::*;

    #[tokio::test]
    async fn the_work_finishes_after_its_caller_gives_up() {
        let finished = Arc::new(AtomicBool::new(false));
        let flag = finished.clone();
        let call = run_detached(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            flag.store(true, Ordering::SeqCst);
        });
        assert!(
            tokio::time::timeout(Duration::from_millis(1), call).await.is_err(),
            "the caller gave up"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(finished.load(Ordering::SeqCst));
    }

    #[tokio::test]
    #[should_panic(expected = "boom")]
    async fn a_panic_in_the_work_reaches_the_caller() {
        run_detached(async { panic!("boom") }).await
    }
}
