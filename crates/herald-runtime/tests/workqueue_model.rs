//! Randomized check of WorkQueue against a simple model of client-go's queue semantics.

use std::collections::{HashSet, VecDeque};

use futures::FutureExt;
use herald_runtime::workqueue::WorkQueue;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Add(u8),
    Get,
    /// Finish the n-th (modulo) item being processed.
    Done(usize),
    /// `done` for an item that may not be processing at all.
    StrayDone(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..8).prop_map(Op::Add),
        3 => Just(Op::Get),
        2 => any::<usize>().prop_map(Op::Done),
        1 => (0u8..8).prop_map(Op::StrayDone),
    ]
}

#[derive(Default)]
struct Model {
    queue: VecDeque<u8>,
    dirty: HashSet<u8>,
    processing: Vec<u8>,
}

impl Model {
    fn add(&mut self, k: u8) {
        if !self.dirty.insert(k) {
            return;
        }
        if !self.processing.contains(&k) {
            self.queue.push_back(k);
        }
    }
    fn get(&mut self) -> Option<u8> {
        let k = self.queue.pop_front()?;
        self.dirty.remove(&k);
        self.processing.push(k);
        Some(k)
    }
    fn done(&mut self, k: u8) {
        let Some(pos) = self.processing.iter().position(|&p| p == k) else {
            return;
        };
        self.processing.remove(pos);
        if self.dirty.contains(&k) {
            self.queue.push_back(k);
        }
    }
}

proptest! {
    #[test]
    fn matches_the_model(ops in proptest::collection::vec(op(), 1..200)) {
        let q: WorkQueue<u8> = WorkQueue::new();
        let mut m = Model::default();
        for op in ops {
            match op {
                Op::Add(k) => { q.add(k); m.add(k); }
                Op::Get => {
                    // A get that would wait is dropped at once (cancel-safe): no item.
                    let got = q.get().now_or_never().flatten();
                    prop_assert_eq!(got, m.get());
                }
                Op::Done(n) => {
                    if !m.processing.is_empty() {
                        let k = m.processing[n % m.processing.len()];
                        q.done(&k);
                        m.done(k);
                    }
                }
                Op::StrayDone(k) => {
                    q.done(&k);
                    m.done(k);
                }
            }
            prop_assert_eq!(q.len(), m.queue.len());
            prop_assert_eq!(q.num_processing(), m.processing.len());
            let distinct: HashSet<u8> = m.processing.iter().copied().collect();
            prop_assert_eq!(distinct.len(), m.processing.len(), "never two at once");
        }
        // Drain what is left: exactly the model's queue, in order.
        q.shutdown();
        let mut rest = vec![];
        while let Some(Some(k)) = q.get().now_or_never() {
            rest.push(k);
        }
        prop_assert_eq!(rest, m.queue.iter().copied().collect::<Vec<_>>());
    }
}
