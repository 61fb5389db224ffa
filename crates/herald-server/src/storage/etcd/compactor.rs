//! The background compactor, as kube-apiserver runs it.
//!
//! Every [`compaction_interval`](super::EtcdOptions::compaction_interval) each replica runs a
//! transaction on etcd's `compact_rev_key` (outside the prefix, the key kube-apiserver uses):
//! if the key's version is still the one this replica saw last time, it writes the revision
//! it saw then and compacts etcd to it; otherwise another replica (or a kube-apiserver on the
//! same etcd) did so this round, and this one only remembers the key's version and the
//! current revision. So etcd is compacted about once per interval whatever the number of
//! replicas, to the revision of one interval before: about one interval of history stays.

use std::sync::Weak;

use etcd_client::{Compare, CompareOp, Txn, TxnOp, TxnOpResponse};

use super::{Inner, header_revision};
use crate::storage::Revision;

/// The key kube-apiserver's compactors coordinate through.
pub(super) const COMPACT_REV_KEY: &str = "compact_rev_key";

/// Runs until the backend is dropped.
pub(super) async fn run(inner: Weak<Inner>) {
    // The key's version this replica last saw, and the revision then.
    let mut version = 0i64;
    let mut revision: Revision = 0;
    loop {
        let Some(interval) = inner.upgrade().map(|i| i.opts.compaction_interval) else {
            return;
        };
        tokio::time::sleep(interval).await;
        let Some(i) = inner.upgrade() else {
            return;
        };
        match round(&i, version, revision).await {
            Ok((v, r)) => (version, revision) = (v, r),
            Err(e) => tracing::warn!(error = %e, "etcd compaction failed; retried next interval"),
        }
    }
}

/// One round: returns the key's version and the current revision for the next.
async fn round(
    i: &Inner,
    version: i64,
    revision: Revision,
) -> crate::storage::Result<(i64, Revision)> {
    let txn = Txn::new()
        .when([Compare::version(COMPACT_REV_KEY, CompareOp::Equal, version)])
        .and_then([TxnOp::put(COMPACT_REV_KEY, revision.to_string(), None)])
        .or_else([TxnOp::get(COMPACT_REV_KEY, None)]);
    let resp = i.txn("compaction round", txn).await?;
    let current = header_revision(resp.header());
    if !resp.succeeded() {
        let seen = resp
            .op_responses()
            .into_iter()
            .find_map(|r| match r {
                TxnOpResponse::Get(g) => g.kvs().first().map(|kv| kv.version()),
                _ => None,
            })
            .unwrap_or(0);
        return Ok((seen, current));
    }
    // Nothing is compacted on the first round (no revision seen yet).
    if revision > 0 {
        i.compact_to(revision).await?;
        tracing::debug!(revision, "compacted etcd");
    }
    Ok((version + 1, current))
}
