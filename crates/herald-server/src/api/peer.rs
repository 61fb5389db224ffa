//! What the connection layer learned about the peer, handed to every request of the
//! connection as a request extension.
//!
//! The TLS layer inserts [`VerifiedClientCertificates`] when a client presented a
//! certificate chain that verified against `--client-ca-file`; authentication reads it
//! (CN = user name, O = groups, as kube-apiserver does). On plain HTTP, and on TLS
//! connections without a client certificate, the extension is absent.
//!
//! Every request also carries the [`PeerAddr`] of its connection (the audit log's
//! `sourceIPs`).

use std::net::SocketAddr;
use std::sync::Arc;

use rustls_pki_types::CertificateDer;

/// The client certificate chain of a TLS connection, leaf first, already verified against
/// the client CA. Cheap to clone (one `Arc`), so every request of a keep-alive connection
/// carries the same chain.
#[derive(Clone, Debug)]
pub struct VerifiedClientCertificates(pub Arc<[CertificateDer<'static>]>);

impl VerifiedClientCertificates {
    /// The leaf (end-entity) certificate, the one that names the user. `None` only for an
    /// empty chain, which the TLS layer never inserts.
    pub fn leaf(&self) -> Option<&CertificateDer<'static>> {
        self.0.first()
    }
}

/// The address of the connection's remote end (the client, or the last proxy before
/// Herald), inserted into every request the accept loop serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerAddr(pub SocketAddr);
