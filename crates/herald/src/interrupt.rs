//! Ctrl-C (and SIGTERM) as a cancellation token: long-running commands stop what they are
//! doing, finish cleanly (flush, restore the terminal) and still print their summary.

use tokio_util::sync::CancellationToken;

/// A token cancelled at the first Ctrl-C (SIGINT) or, on Unix, SIGTERM (what `timeout`
/// and `kill` send). Must be called inside a tokio runtime.
pub fn on_ctrl_c() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            t.cancel();
        }
    });
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            let t = token.clone();
            tokio::spawn(async move {
                if term.recv().await.is_some() {
                    t.cancel();
                }
            });
        }
    }
    token
}
