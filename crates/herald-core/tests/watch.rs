//! apimachinery's mux_test.go scenarios and Herald's ordering/drop guarantees, for both
//! distribution drivers. No test uses time.

use std::future::Future;
use std::sync::Arc;
use std::task::Poll;

use futures::StreamExt;
use herald_core::watch::{
    Broadcaster, BroadcasterBuilder, Distribution, FullChannelBehavior, Stopped, TryRecvError,
    Watcher,
};

use FullChannelBehavior::{DropIfChannelFull as Drop, WaitIfChannelFull as Wait};

const MODES: [Distribution; 2] = [Distribution::InCaller, Distribution::OnThread];

#[derive(Debug, Clone, PartialEq, Eq)]
struct Event {
    kind: &'static str,
    name: &'static str,
    msg: &'static str,
}

fn ev(kind: &'static str, name: &'static str, msg: &'static str) -> Event {
    Event { kind, name, msg }
}

fn make<T: Clone + Send + 'static>(
    incoming: usize,
    queue: usize,
    behavior: FullChannelBehavior,
    mode: Distribution,
) -> Broadcaster<T> {
    BroadcasterBuilder::new(queue, behavior)
        .incoming_capacity(incoming)
        .distribution(mode)
        .build()
}

async fn drain<T: Clone + Send + 'static>(mut w: Watcher<T>) -> Vec<T> {
    let mut got = Vec::new();
    while let Some(item) = w.recv().await {
        got.push(item);
    }
    got
}

/// Polls a future exactly once.
async fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(std::pin::Pin::new(&mut *f).poll(cx))).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcaster_delivers_everything_in_order_then_ends() {
    let table = vec![
        ev("ADDED", "foo", "hello world 1"),
        ev("ADDED", "bar", "hello world 2"),
        ev("MODIFIED", "foo", "goodbye world 3"),
        ev("DELETED", "bar", "hello world 4"),
    ];
    for mode in MODES {
        let b = make(25, 0, Wait, mode);
        let consumers: Vec<_> = (0..2)
            .map(|_| tokio::spawn(drain(b.watch().unwrap())))
            .collect();
        for e in &table {
            b.action(e.clone()).await.unwrap();
        }
        b.shutdown().await;
        for c in consumers {
            assert_eq!(c.await.unwrap(), table, "{mode:?}");
        }
        assert!(b.is_finished());
    }
}

#[tokio::test]
async fn broadcaster_watcher_close() {
    for mode in MODES {
        let b = make::<Event>(25, 0, Wait, mode);
        let mut w1 = b.watch().unwrap();
        let mut w2 = b.watch().unwrap();
        w1.stop();
        b.shutdown().await;
        assert_eq!(w1.recv().await, None);
        assert_eq!(w2.recv().await, None);
        // Stopping again, after shutdown, is harmless.
        w1.stop();
        w2.stop();
        w1.stop();
        assert_eq!(w1.try_recv(), Err(TryRecvError::Ended));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcaster_watcher_stop_deadlock() {
    for mode in MODES {
        let b = make(25, 0, Wait, mode);
        let mut w1 = b.watch().unwrap();
        let mut w2 = b.watch().unwrap();
        let task = tokio::spawn(async move {
            let (first, stopped_other) = tokio::select! {
                e = w1.recv() => { w2.stop(); (e, 2) }
                e = w2.recv() => { w1.stop(); (e, 1) }
            };
            (first, stopped_other, w1, w2)
        });
        b.action(ev("ADDED", "foo", "x")).await.unwrap();
        let (first, stopped_other, mut w1, mut w2) = task.await.unwrap();
        assert_eq!(first, Some(ev("ADDED", "foo", "x")));
        b.shutdown().await;
        // The stopped watcher may still hand out what was queued before its stop, then ends;
        // the reader got the event once and then sees the end.
        let (reader, other) = if stopped_other == 2 {
            (&mut w1, &mut w2)
        } else {
            (&mut w2, &mut w1)
        };
        assert_eq!(reader.recv().await, None);
        let rest = drain_mut(other).await;
        assert!(rest.len() <= 1, "{mode:?}: {rest:?}");
    }
}

async fn drain_mut<T: Clone + Send + 'static>(w: &mut Watcher<T>) -> Vec<T> {
    let mut got = Vec::new();
    while let Some(item) = w.recv().await {
        got.push(item);
    }
    got
}

#[tokio::test]
async fn broadcaster_drop_if_channel_full() {
    for mode in MODES {
        let b = make(25, 1, Drop, mode);
        let w1 = b.watch().unwrap();
        let w2 = b.watch().unwrap();
        assert_eq!(b.action_or_drop(ev("ADDED", "event1", "")), Ok(true));
        assert_eq!(b.action_or_drop(ev("ADDED", "event2", "")), Ok(true));
        b.shutdown().await;
        for w in [w1, w2] {
            assert_eq!(w.dropped(), 1, "{mode:?}");
            assert_eq!(drain(w).await, vec![ev("ADDED", "event1", "")], "{mode:?}");
        }
    }
}

#[tokio::test]
async fn broadcaster_watch_after_shutdown() {
    for mode in MODES {
        let b = make::<Event>(25, 0, Wait, mode);
        b.shutdown().await;
        assert_eq!(b.watch().err(), Some(Stopped));
        let prefix = vec![ev("ADDED", "e1", ""), ev("ADDED", "e2", "")];
        let err = b.watch_with_prefix(prefix).err().unwrap();
        assert_eq!(err.to_string(), "broadcaster already stopped");
    }
}

#[tokio::test]
async fn broadcaster_send_event_after_shutdown() {
    for mode in MODES {
        let b = make(25, 1, Drop, mode);
        let _w1 = b.watch().unwrap();
        let _w2 = b.watch().unwrap();
        b.shutdown().await;
        b.shutdown().await; // idempotent
        let e = ev("ADDED", "foo", "");
        assert_eq!(b.action(e.clone()).await, Err(Stopped));
        assert_eq!(b.action_or_drop(e), Err(Stopped));
        assert_eq!(Stopped.to_string(), "broadcaster already stopped");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcaster_shutdown_race() {
    for mode in MODES {
        for round in 0..200u32 {
            let b = make(1, 1, Wait, mode);
            let w1 = b.watch().unwrap();
            let w2 = b.watch().unwrap();
            let s1 = w1.stopper();
            let s2 = w2.stopper();
            let producer = {
                let b = b.clone();
                tokio::spawn(async move {
                    for i in 0..4u32 {
                        if b.action(i).await.is_err() {
                            break;
                        }
                    }
                })
            };
            let stop1 = tokio::spawn(async move { s1.stop() });
            let stop2 = tokio::spawn(async move { s2.stop() });
            let shut = {
                let b = b.clone();
                tokio::spawn(async move { b.shutdown().await })
            };
            for t in [stop1, stop2, shut] {
                t.await.unwrap();
            }
            producer.await.unwrap();
            assert!(b.is_finished(), "{mode:?} round {round}");
            for w in [w1, w2] {
                let got = drain(w).await;
                assert!(got.len() <= 1, "queue bound 1 while never read: {got:?}");
            }
        }
    }
}

#[tokio::test]
async fn watcher_registered_mid_stream_sees_exactly_the_suffix() {
    for mode in MODES {
        let b = make(256, 256, Wait, mode);
        let w1 = b.watch().unwrap();
        let c1 = tokio::spawn(drain(w1));
        for i in 0..50u32 {
            b.action(i).await.unwrap();
        }
        let w2 = b.watch().unwrap();
        let c2 = tokio::spawn(drain(w2));
        for i in 50..120u32 {
            b.action(i).await.unwrap();
        }
        b.shutdown().await;
        assert_eq!(c1.await.unwrap(), (0..120).collect::<Vec<_>>(), "{mode:?}");
        assert_eq!(c2.await.unwrap(), (50..120).collect::<Vec<_>>(), "{mode:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_registration_is_ordered_with_the_stream() {
    const N: u32 = 3000;
    for mode in MODES {
        let b = make(64, 32, Wait, mode);
        let producer = {
            let b = b.clone();
            tokio::spawn(async move {
                for i in 0..N {
                    b.action(i).await.unwrap();
                    if i % 97 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        };
        let mut consumers = Vec::new();
        for _ in 0..20 {
            consumers.push(tokio::spawn(drain(b.watch().unwrap())));
            tokio::task::yield_now().await;
        }
        producer.await.unwrap();
        b.shutdown().await;
        let mut starts = Vec::new();
        for c in consumers {
            let got = c.await.unwrap();
            // Whatever moment it registered at, a watcher sees a gap-free suffix.
            let start = got.first().copied().unwrap_or(N);
            assert_eq!(got, (start..N).collect::<Vec<_>>(), "{mode:?}");
            starts.push(start);
        }
        assert!(starts.windows(2).all(|w| w[0] <= w[1]), "{starts:?}");
    }
}

#[tokio::test]
async fn dropped_counts_every_item_a_full_watcher_missed() {
    for mode in MODES {
        let b = make(25, 3, Drop, mode);
        let mut slow = b.watch().unwrap();
        let fast = b.watch().unwrap();
        let fast = tokio::spawn(drain(fast));
        for i in 0..10u32 {
            // Thread mode: pace the producer so the incoming queue never refuses.
            while !b.action_or_drop(i).unwrap() {
                tokio::task::yield_now().await;
            }
            tokio::task::yield_now().await;
        }
        // Thread mode distributes asynchronously: let it catch up (no time involved).
        wait_until(|| slow.dropped() == 7).await;
        assert_eq!(slow.recv().await, Some(0));
        assert_eq!(slow.recv().await, Some(1));
        for i in 10..15u32 {
            while !b.action_or_drop(i).unwrap() {
                tokio::task::yield_now().await;
            }
        }
        b.shutdown().await;
        assert_eq!(drain_mut(&mut slow).await, vec![2, 10, 11], "{mode:?}");
        assert_eq!(slow.dropped(), 7 + 3, "{mode:?}");
        let fast_got = fast.await.unwrap();
        // The fast reader may or may not have kept up, but it loses nothing silently.
        assert!(fast_got.windows(2).all(|w| w[0] < w[1]));
    }
}

/// Yields until `cond` holds; bounded so that a broken broadcaster fails instead of hanging.
async fn wait_until(cond: impl Fn() -> bool) {
    for _ in 0..1_000_000 {
        if cond() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("condition never became true");
}

#[tokio::test]
async fn dropped_count_is_exact_in_caller_mode() {
    let b = make(25, 3, Drop, Distribution::InCaller);
    let mut w = b.watch().unwrap();
    for i in 0..10u32 {
        assert_eq!(b.action_or_drop(i), Ok(true));
    }
    assert_eq!(w.dropped(), 7);
    assert_eq!(w.recv().await, Some(0));
    assert_eq!(w.recv().await, Some(1));
    // Two of three slots are free again (one item is still held by the watcher).
    for i in 10..15u32 {
        assert_eq!(b.action_or_drop(i), Ok(true));
    }
    assert_eq!(w.dropped(), 10);
    b.shutdown().await;
    assert_eq!(drain_mut(&mut w).await, vec![2, 10, 11]);
}

#[tokio::test]
async fn wait_mode_bounds_the_incoming_queue_and_resumes_on_read() {
    let b = make(2, 1, Wait, Distribution::InCaller);
    let mut w = b.watch().unwrap();
    assert_eq!(b.action_or_drop(1u32), Ok(true)); // delivered: watcher queue full
    assert_eq!(b.action_or_drop(2), Ok(true)); // held for the watcher
    assert_eq!(b.action_or_drop(3), Ok(true)); // held: incoming queue full
    assert_eq!(b.action_or_drop(4), Ok(false));
    let mut pending = Box::pin(b.action(4));
    assert!(poll_once(&mut pending).await.is_pending());
    assert_eq!(w.recv().await, Some(1)); // makes room: 2 moves on, 4 gets in
    assert_eq!(pending.await, Ok(()));
    assert_eq!(b.action_or_drop(5), Ok(false));
    b.request_shutdown();
    assert!(!b.is_finished(), "3 and 4 still wait for the watcher");
    assert_eq!(drain_mut(&mut w).await, vec![2, 3, 4]);
    assert!(b.is_finished());
    assert_eq!(w.dropped(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_mode_slow_watcher_does_not_stop_others_and_stop_releases_it() {
    for mode in MODES {
        let b = make(8, 1, Wait, mode);
        let mut slow = b.watch().unwrap();
        let mut fast_w = b.watch().unwrap();
        let fast = tokio::spawn(async move {
            let mut got = Vec::new();
            for _ in 0..5 {
                got.push(fast_w.recv().await.unwrap());
            }
            (got, fast_w)
        });
        for i in 0..5u32 {
            b.action(i).await.unwrap();
        }
        b.request_shutdown();
        // `fast` reads all five although `slow` holds item 0 only.
        let (fast_got, mut fast_w) = fast.await.unwrap();
        assert_eq!(fast_got, vec![0, 1, 2, 3, 4], "{mode:?}");
        assert!(!b.is_finished());
        assert_eq!(slow.recv().await, Some(0));
        slow.stop();
        b.shutdown().await;
        assert_eq!(fast_w.recv().await, None);
        // After its stop, `slow` hands out at most what was already queued, then ends.
        let rest = drain_mut(&mut slow).await;
        assert!(rest.len() <= 1 && rest.iter().all(|&x| x == 1), "{rest:?}");
    }
}

#[tokio::test]
async fn dropping_a_stalled_watcher_unblocks_wait_mode() {
    for mode in MODES {
        let b = make(4, 1, Wait, mode);
        let w = b.watch().unwrap();
        b.action(1u32).await.unwrap();
        b.action(2).await.unwrap();
        drop(w);
        b.shutdown().await;
        assert!(b.is_finished());
    }
}

#[tokio::test]
async fn watch_with_prefix_comes_first_and_sizes_the_queue() {
    for mode in MODES {
        let b = make(25, 2, Drop, mode);
        let w = b.watch_with_prefix(vec![100u32, 101, 102]).unwrap();
        assert_eq!(w.capacity(), 4);
        let plain = b.watch().unwrap();
        assert_eq!(plain.capacity(), 2);
        assert_eq!(b.action_or_drop(1), Ok(true));
        assert_eq!(b.action_or_drop(2), Ok(true));
        b.shutdown().await;
        assert_eq!(w.dropped(), 1, "{mode:?}");
        assert_eq!(drain(w).await, vec![100, 101, 102, 1]);
        assert_eq!(drain(plain).await, vec![1, 2]);
    }
}

#[tokio::test]
async fn stream_and_try_recv() {
    for mode in MODES {
        let b = make(25, 10, Wait, mode);
        let mut w = b.watch().unwrap();
        assert_eq!(w.try_recv(), Err(TryRecvError::Empty));
        let stream = b.watch().unwrap();
        for i in 0..5u32 {
            b.action(i).await.unwrap();
        }
        b.shutdown().await;
        assert_eq!(w.try_recv(), Ok(0));
        assert_eq!(w.recv().await, Some(1));
        assert_eq!(stream.collect::<Vec<_>>().await, vec![0, 1, 2, 3, 4]);
        assert_eq!(w.try_recv(), Ok(2));
        assert_eq!(drain_mut(&mut w).await, vec![3, 4]);
        assert_eq!(w.try_recv(), Err(TryRecvError::Ended));
    }
}

#[tokio::test]
async fn dropping_the_last_handle_shuts_down() {
    for mode in MODES {
        let b = make(25, 10, Drop, mode);
        let b2 = b.clone();
        let w = b.watch().unwrap();
        assert_eq!(b.action_or_drop(Arc::new("x")), Ok(true));
        drop(b);
        assert!(!b2.is_stopped(), "a clone still holds it open");
        drop(b2);
        assert_eq!(drain(w).await, vec![Arc::new("x")], "{mode:?}");
    }
}

#[tokio::test]
async fn watcher_ids_count_up() {
    let b = make::<u8>(25, 1, Drop, Distribution::InCaller);
    let ids: Vec<u64> = (0..3).map(|_| b.watch().unwrap().id()).collect();
    assert_eq!(ids, vec![0, 1, 2]);
    b.shutdown().await;
}

#[test]
fn handles_are_send_and_sync() {
    fn send_sync<X: Send + Sync>() {}
    fn send<X: Send>() {}
    send_sync::<Broadcaster<Arc<String>>>();
    send::<Watcher<Arc<String>>>();
    send_sync::<herald_core::watch::WatchStopper<u8>>();
}

/// Clones fine until told not to, then panics once.
#[derive(Debug)]
struct Fragile(Arc<std::sync::atomic::AtomicBool>);

impl Clone for Fragile {
    fn clone(&self) -> Self {
        if self.0.swap(false, std::sync::atomic::Ordering::SeqCst) {
            panic!("clone failed");
        }
        Fragile(Arc::clone(&self.0))
    }
}

#[tokio::test]
async fn a_panicking_clone_on_the_thread_does_not_strand_items() {
    let fail = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let b = make(25, 10, Drop, Distribution::OnThread);
    let w = b.watch().unwrap();
    assert_eq!(b.action_or_drop(Fragile(fail.clone())), Ok(true));
    // The thread's step panicked; later calls distribute in the caller and the broadcaster
    // still shuts down and ends the watch.
    wait_until(|| !fail.load(std::sync::atomic::Ordering::SeqCst)).await;
    let mut delivered = false;
    for _ in 0..1000 {
        if b.action_or_drop(Fragile(fail.clone())) == Ok(true) {
            delivered = true;
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(delivered);
    b.shutdown().await;
    assert!(!drain(w).await.is_empty());
}
