//! HTTPS: the TLS handshake of [`listen`](super::listen), as kube-apiserver configures its own.
//!
//! - **Versions**: TLS 1.2 and 1.3 only ([`PROTOCOL_VERSIONS`]); a client that offers
//!   nothing newer than TLS 1.1 fails the handshake. Cipher suites are rustls's (`ring`),
//!   all of them AEAD with forward secrecy.
//! - **ALPN**: `h2` and `http/1.1` ([`ALPN_PROTOCOLS`]). A client that offers `h2` is served
//!   HTTP/2; any other (or none) HTTP/1.1.
//! - **Serving certificate** (`--tls-cert-file`, `--tls-private-key-file`, or the generated
//!   one of [`pki`]): held by a [`ReloadingCertificate`], which looks at its two files
//!   before every handshake and loads them again when they changed (see there for what a
//!   failed reload does).
//! - **Client certificates** (`--client-ca-file`, or the generated CA): optional, as
//!   kube-apiserver asks for them. A connection without one is served (authentication
//!   decides later what it may do); one that presents a chain that does not verify against
//!   the client CA fails the handshake and never reaches the router. The CA file is held by
//!   a [`ReloadingClientCa`], looked at before every handshake and loaded again when it
//!   changed, as the serving certificate is. A verified chain rides
//!   on every request of its connection as a
//!   [`VerifiedClientCertificates`] extension.
//!
//! The handshake runs in the connection's own task within the header timeout
//! ([`ConnectionOptions::read_header_timeout`](super::listen::ConnectionOptions)), as Go
//! bounds its TLS handshakes.
//!
//! ```no_run
//! use std::sync::Arc;
//! use herald_server::api::tls::{ReloadingCertificate, Tls};
//! # fn run() -> Result<(), herald_server::api::tls::TlsError> {
//! let cert = ReloadingCertificate::from_files("tls.crt".as_ref(), "tls.key".as_ref())?;
//! let tls = Tls::new(Arc::new(cert), None)?; // no client CA: no client certificates
//! // listen::serve_with(listener, tls, app, options, metrics, shutdown)
//! # Ok(()) }
//! ```

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::{ServerConfig, SupportedProtocolVersion};
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpStream;

use super::listen::{Handshake, Protocol, Session};
use super::peer::VerifiedClientCertificates;

mod client_ca;
pub mod pki;
mod reload;

pub use self::client_ca::ReloadingClientCa;
pub use self::reload::{Refresh, ReloadingCertificate};

/// The TLS versions served: 1.3 and 1.2. Older ones fail the handshake.
pub static PROTOCOL_VERSIONS: &[&SupportedProtocolVersion] =
    &[&rustls::version::TLS13, &rustls::version::TLS12];

/// The ALPN protocols offered, preferred first: HTTP/2, then HTTP/1.1.
pub const ALPN_PROTOCOLS: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// Where the serving certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServingCertificate {
    /// PEM files (`--tls-cert-file`: the certificate, then any intermediates;
    /// `--tls-private-key-file`: its key, PKCS#8, PKCS#1 or SEC1), reloaded when they change.
    Files {
        /// The certificate chain, leaf first.
        cert_file: PathBuf,
        /// The leaf's private key.
        key_file: PathBuf,
    },
    /// Herald's own CA and certificates ([`pki`]): under `<data>/pki` with the SQLite store
    /// (created on first start, reused after), in memory with the memory store.
    Generated,
}

/// How HTTPS is set up (`herald serve`'s TLS flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsOptions {
    /// The serving certificate.
    pub serving: ServingCertificate,
    /// PEM file of the CAs client certificates are verified against (`--client-ca-file`).
    /// `None` with [`ServingCertificate::Generated`]: the generated CA (so the generated admin
    /// certificate is accepted); `None` with [`ServingCertificate::Files`]: no client
    /// certificates are asked for.
    pub client_ca_file: Option<PathBuf>,
}

impl Default for TlsOptions {
    /// The generated certificates, the generated CA as the client CA.
    fn default() -> Self {
        TlsOptions {
            serving: ServingCertificate::Generated,
            client_ca_file: None,
        }
    }
}

/// Why TLS could not be set up. Each message names the file and says what is wrong with it
/// (never the file's contents, which may be key material); an underlying error is the
/// [`source`](std::error::Error::source), so print the chain (anyhow's `{:#}`, or tracing's
/// `error = &e as &dyn Error`) to see it.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read the {what} {}", path.display())]
    Read {
        /// Which file it is ("TLS certificate file", "client CA file"…).
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        error: io::Error,
    },
    /// A file was read but does not hold what it should.
    #[error("the {what} {} is not usable: {reason}", path.display())]
    Invalid {
        /// Which file it is.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong, in words.
        reason: String,
    },
    /// Generating or loading Herald's own certificates failed.
    #[error(transparent)]
    Pki(pki::PkiError),
    /// rustls refused the configuration.
    #[error("cannot set up TLS")]
    Config(#[source] rustls::Error),
}

/// The crypto provider of every TLS configuration here: rustls's `ring`.
pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The certificates of the PEM file `path` (`what` names it in errors); at least one.
pub fn read_certificates(
    path: &Path,
    what: &'static str,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read(path, what)?;
    parse_certificates(&bytes, path, what)
}

/// The certificates of the PEM text `bytes`, read from `path`; at least one.
fn parse_certificates(
    bytes: &[u8],
    path: &Path,
    what: &'static str,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(path, what, format!("it is not valid PEM ({e})")))?;
    if certs.is_empty() {
        return Err(invalid(
            path,
            what,
            "it holds no PEM CERTIFICATE block".to_string(),
        ));
    }
    Ok(certs)
}

/// The private key of the PEM file `path`.
fn read_private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    const WHAT: &str = "TLS private key file";
    let bytes = read(path, WHAT)?;
    // The pem error names only the section kind or position, never the contents.
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| {
        let reason = match e {
            rustls_pki_types::pem::Error::NoItemsFound => {
                "it holds no PEM PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY block".to_string()
            }
            other => format!("it is not a valid PEM private key ({other})"),
        };
        invalid(path, WHAT, reason)
    })
}

fn read(path: &Path, what: &'static str) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|error| TlsError::Read {
        what,
        path: path.to_path_buf(),
        error,
    })
}

fn invalid(path: &Path, what: &'static str, reason: String) -> TlsError {
    TlsError::Invalid {
        what,
        path: path.to_path_buf(),
        reason,
    }
}

/// The TLS [`Handshake`]: rustls with this module's settings (see the [module docs](self)).
/// Cheap to clone (one `Arc` each).
#[derive(Clone)]
pub struct Tls {
    acceptor: tokio_rustls::TlsAcceptor,
    config: Arc<ServerConfig>,
    certificate: Arc<ReloadingCertificate>,
    client_ca: Option<Arc<ReloadingClientCa>>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("certificate", &self.certificate)
            .field("client_ca", &self.client_ca)
            .finish_non_exhaustive()
    }
}

impl Tls {
    /// Serves `certificate`; with `client_ca`, asks clients for a certificate and verifies
    /// one that is presented against those CAs (a client without one is still served).
    pub fn new(
        certificate: Arc<ReloadingCertificate>,
        client_ca: Option<Vec<CertificateDer<'static>>>,
    ) -> Result<Tls, TlsError> {
        let client_ca = client_ca
            .map(ReloadingClientCa::fixed)
            .transpose()?
            .map(Arc::new);
        Tls::reloading(certificate, client_ca)
    }

    /// As [`Tls::new`], with client CAs that may change while serving (a
    /// [`ReloadingClientCa::from_file`]); each handshake refreshes both.
    pub fn reloading(
        certificate: Arc<ReloadingCertificate>,
        client_ca: Option<Arc<ReloadingClientCa>>,
    ) -> Result<Tls, TlsError> {
        let builder = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(PROTOCOL_VERSIONS)
            .map_err(TlsError::Config)?;
        let builder = match &client_ca {
            Some(verifier) => builder.with_client_cert_verifier(verifier.clone()),
            None => builder.with_no_client_auth(),
        };
        let mut config = builder.with_cert_resolver(certificate.clone());
        config.alpn_protocols = ALPN_PROTOCOLS.iter().map(|p| p.to_vec()).collect();
        let config = Arc::new(config);
        Ok(Tls {
            acceptor: tokio_rustls::TlsAcceptor::from(config.clone()),
            config,
            certificate,
            client_ca,
        })
    }

    /// The rustls configuration served (versions, ALPN, verifier).
    pub fn config(&self) -> &Arc<ServerConfig> {
        &self.config
    }

    /// The serving certificate.
    pub fn certificate(&self) -> &Arc<ReloadingCertificate> {
        &self.certificate
    }
}

impl Handshake for Tls {
    type Io = tokio_rustls::server::TlsStream<TcpStream>;

    /// Looks at the certificate and client CA files first ([`ReloadingCertificate::refresh`],
    /// [`ReloadingClientCa::refresh`]: three `stat`s when nothing changed), so the handshake
    /// serves and verifies with the files as they are now.
    async fn handshake(&self, tcp: TcpStream) -> io::Result<Self::Io> {
        self.certificate.refresh();
        if let Some(client_ca) = &self.client_ca {
            client_ca.refresh();
        }
        self.acceptor.accept(tcp).await
    }

    fn session(&self, io: &Self::Io) -> Session {
        let (_, conn) = io.get_ref();
        let protocol = match conn.alpn_protocol() {
            Some(b"h2") => Protocol::Http2,
            _ => Protocol::Http1,
        };
        // rustls hands out peer certificates only after its verifier accepted them.
        let client_certificates = conn
            .peer_certificates()
            .filter(|chain| !chain.is_empty())
            .map(|chain| VerifiedClientCertificates(chain.to_vec().into()));
        Session {
            protocol,
            client_certificates,
        }
    }
}
