//! Flow control: token buckets and backoff. (Filled in by the flow-control work.)
