//! Herald's shared vocabulary.
//!
//! Everything here is free of I/O and of any async runtime so that the client library
//! (`herald-runtime`), the event store (`herald-server`) and the command line can all
//! build on it:
//!
//! - [`clock`]: the injected time source every time-dependent piece takes.
//! - [`flow`]: token buckets and exponential backoff with client-go's arithmetic.
//! - [`watch`]: the bounded, ordered fan-out [`watch::Broadcaster`].
//! - [`naming`]: event names and DNS-1123 validation.
//! - [`event`]: event conversion between API groups, per-group validation, field selectors.
//! - [`labels`]: label selectors and the label/name syntax rules, with kube's messages.
//! - [`status`]: Kubernetes `Status` errors with kube-apiserver's messages.

pub mod clock;
pub mod event;
pub mod flow;
pub mod labels;
pub mod naming;
pub mod status;
pub mod watch;
