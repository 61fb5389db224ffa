//! HTTPS on 127.0.0.1 with real TLS clients: ALPN and HTTP/2, TLS versions, the serving
//! certificate reloaded from its files, client certificates (verified → a request
//! extension; from another CA → no handshake, nothing reaches the registry), and the
//! refusals at start (plain HTTP off loopback, unusable certificate files).
//!
//! Every wait is bounded ([`GUARD`]); the TLS 1.1 check runs the real `openssl s_client`
//! (installed by `.ci/run`).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use bytes::Bytes;
use herald_server::api::listen::{self, ConnectionOptions};
use herald_server::api::metrics::Metrics;
use herald_server::api::peer::VerifiedClientCertificates;
use herald_server::api::tls::pki::Pki;
use herald_server::api::tls::{
    Refresh, ReloadingCertificate, ReloadingClientCa, ServingCertificate, Tls, TlsOptions,
    read_certificates,
};
use herald_server::server::{Server, ServerError, ServerOptions, StoreKind, Transport};
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

const GUARD: Duration = Duration::from_secs(20);

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn pem_certs(pem: &str) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<_, _>>()
        .unwrap()
}

fn pem_key(pem: &str) -> PrivateKeyDer<'static> {
    PrivateKeyDer::from_pem_slice(pem.as_bytes()).unwrap()
}

/// A TLS client trusting `ca`, offering `alpn`, with `versions`, presenting `client` if any.
struct Client {
    ca: String,
    alpn: Vec<Vec<u8>>,
    versions: Vec<&'static rustls::SupportedProtocolVersion>,
    client: Option<(String, String)>,
}

impl Client {
    fn trusting(ca: &str) -> Client {
        Client {
            ca: ca.to_string(),
            alpn: vec![b"http/1.1".to_vec()],
            versions: vec![&rustls::version::TLS13, &rustls::version::TLS12],
            client: None,
        }
    }

    async fn connect(&self, addr: SocketAddr) -> std::io::Result<TlsStream<TcpStream>> {
        let mut roots = rustls::RootCertStore::empty();
        for c in pem_certs(&self.ca) {
            roots.add(c).unwrap();
        }
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&self.versions)
            .unwrap()
            .with_root_certificates(roots);
        let mut config = match &self.client {
            Some((cert, key)) => builder
                .with_client_auth_cert(pem_certs(cert), pem_key(key))
                .unwrap(),
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = self.alpn.clone();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = TcpStream::connect(addr).await?;
        let name = ServerName::IpAddress(addr.ip().into());
        tokio::time::timeout(GUARD, connector.connect(name, tcp))
            .await
            .expect("the handshake ends")
    }

    /// One request over HTTP/1.1 (or HTTP/2 when ALPN chose it); the status and body.
    async fn request(
        &self,
        addr: SocketAddr,
        method: &str,
        path: &str,
        body: &str,
    ) -> Result<(u16, String), String> {
        let tls = self.connect(addr).await.map_err(|e| e.to_string())?;
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        let req = http::Request::builder()
            .method(method)
            .uri(format!("https://{addr}{path}"))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .unwrap();
        let io = TokioIo::new(tls);
        let resp = if h2 {
            let (mut send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(conn);
            send.send_request(req).await
        } else {
            let (mut send, conn) = hyper::client::conn::http1::handshake(io)
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(conn);
            let mut req = req;
            req.headers_mut()
                .insert("host", addr.to_string().parse().unwrap());
            send.send_request(req).await
        };
        let resp = resp.map_err(|e| format!("{e:?}"))?;
        let status = resp.status().as_u16();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
    }
}

async fn https_memory() -> Server {
    Server::start(ServerOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        transport: Transport::Https(TlsOptions::default()),
        ..ServerOptions::default()
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn http2_is_served_when_the_client_offers_it_and_http1_otherwise() {
    let server = https_memory().await;
    assert!(
        server.url().starts_with("https://127.0.0.1:"),
        "{}",
        server.url()
    );
    let ca = server.pki().unwrap().ca_cert().to_string();
    let mut h2 = Client::trusting(&ca);
    h2.alpn = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let tls = h2.connect(server.addr()).await.unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    drop(tls);
    let (code, body) = h2
        .request(server.addr(), "GET", "/version", "")
        .await
        .unwrap();
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("gitVersion"), "{body}");

    let h1 = Client::trusting(&ca);
    let tls = h1.connect(server.addr()).await.unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    drop(tls);
    let (code, _) = h1
        .request(server.addr(), "GET", "/version", "")
        .await
        .unwrap();
    assert_eq!(code, 200);

    // No ALPN at all: HTTP/1.1.
    let mut none = Client::trusting(&ca);
    none.alpn = vec![];
    let (code, _) = none
        .request(server.addr(), "GET", "/healthz", "")
        .await
        .unwrap();
    assert_eq!(code, 200);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn tls_1_2_and_1_3_are_served_and_1_1_is_refused() {
    let server = https_memory().await;
    let ca = server.pki().unwrap().ca_cert().to_string();
    for (version, name) in [
        (&rustls::version::TLS12, rustls::ProtocolVersion::TLSv1_2),
        (&rustls::version::TLS13, rustls::ProtocolVersion::TLSv1_3),
    ] {
        let mut c = Client::trusting(&ca);
        c.versions = vec![version];
        let tls = c.connect(server.addr()).await.unwrap();
        assert_eq!(tls.get_ref().1.protocol_version(), Some(name));
    }
    // rustls cannot offer less than 1.2: the real openssl does. Its TLS 1.2 handshake
    // succeeds, so its TLS 1.1 failure is the server's refusal.
    let port = server.addr().port().to_string();
    let s_client = |version: &'static str| {
        let connect = format!("127.0.0.1:{port}");
        async move {
            let out = tokio::time::timeout(
                GUARD,
                tokio::process::Command::new("openssl")
                    .args(["s_client", "-connect", &connect, version])
                    // Let openssl itself offer TLS 1.1 (its default security level forbids it).
                    .args(["-cipher", "DEFAULT:@SECLEVEL=0"])
                    .stdin(std::process::Stdio::null())
                    .kill_on_drop(true)
                    .output(),
            )
            .await
            .expect("openssl ends")
            .expect("openssl is installed (.ci/run installs it)");
            (
                out.status.success(),
                String::from_utf8_lossy(&out.stdout).into_owned()
                    + &String::from_utf8_lossy(&out.stderr),
            )
        }
    };
    let (ok, text) = s_client("-tls1_2").await;
    assert!(ok, "TLS 1.2 works with openssl: {text}");
    assert!(text.contains("TLSv1.2"), "{text}");
    let (ok, text) = s_client("-tls1_1").await;
    assert!(!ok, "TLS 1.1 must be refused: {text}");
    assert!(
        text.contains("protocol version") || text.contains("alert"),
        "the server refused the version: {text}"
    );
    server.shutdown().await.unwrap();
}

/// A fresh CA, and a certificate and key for 127.0.0.1 it signed: PEM read from the files
/// [`Pki::load_or_create`] wrote.
fn certificate() -> (String, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let p = Pki::load_or_create(dir.path(), "127.0.0.1".parse().unwrap()).unwrap();
    let read = |n: &str| std::fs::read_to_string(dir.path().join(n)).unwrap();
    (
        p.ca_cert().to_string(),
        read("serving.crt"),
        read("serving.key"),
    )
}

fn write(path: &Path, text: &str) {
    // Replaced whole, as cert-manager and kubelet write them.
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[tokio::test]
async fn the_serving_certificate_is_reloaded_without_a_restart_and_a_broken_one_is_not_taken() {
    let dir = tempfile::tempdir().unwrap();
    let (cert_file, key_file) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let (ca_a, cert_a, key_a) = certificate();
    let (ca_b, cert_b, key_b) = certificate();
    write(&cert_file, &cert_a);
    write(&key_file, &key_a);
    let server = Server::start(ServerOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        transport: Transport::Https(TlsOptions {
            serving: ServingCertificate::Files {
                cert_file: cert_file.clone(),
                key_file: key_file.clone(),
            },
            client_ca_file: None,
        }),
        ..ServerOptions::default()
    })
    .await
    .unwrap();
    assert!(server.pki().is_none());
    let served = |ca: &str| {
        let c = Client::trusting(ca);
        let addr = server.addr();
        async move {
            c.connect(addr)
                .await
                .map(|tls| tls.get_ref().1.peer_certificates().unwrap()[0].clone())
        }
    };
    assert_eq!(served(&ca_a).await.unwrap(), pem_certs(&cert_a)[0]);
    assert!(
        served(&ca_b).await.is_err(),
        "B's CA does not trust A's certificate"
    );

    write(&key_file, &key_b);
    write(&cert_file, &cert_b);
    assert_eq!(
        served(&ca_b).await.unwrap(),
        pem_certs(&cert_b)[0],
        "reloaded"
    );

    // A broken certificate file, then a key of another certificate: B stays.
    write(
        &cert_file,
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    );
    assert_eq!(served(&ca_b).await.unwrap(), pem_certs(&cert_b)[0]);
    write(&cert_file, &cert_b);
    write(&key_file, &key_a);
    assert_eq!(served(&ca_b).await.unwrap(), pem_certs(&cert_b)[0]);
    std::fs::remove_file(&key_file).unwrap();
    assert_eq!(served(&ca_b).await.unwrap(), pem_certs(&cert_b)[0]);
    // Fixed: A again.
    write(&cert_file, &cert_a);
    write(&key_file, &key_a);
    assert_eq!(served(&ca_a).await.unwrap(), pem_certs(&cert_a)[0]);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn refresh_says_what_it_did() {
    let dir = tempfile::tempdir().unwrap();
    let (cert_file, key_file) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let (_, cert_a, key_a) = certificate();
    let (_, cert_b, key_b) = certificate();
    write(&cert_file, &cert_a);
    write(&key_file, &key_a);
    let c = ReloadingCertificate::from_files(&cert_file, &key_file).unwrap();
    assert_eq!(c.refresh(), Refresh::Unchanged);
    write(&cert_file, &cert_b);
    assert_eq!(
        c.refresh(),
        Refresh::KeptLastGood,
        "B's certificate with A's key"
    );
    assert_eq!(c.current().cert[0], pem_certs(&cert_a)[0]);
    assert_eq!(c.refresh(), Refresh::Unchanged, "tried once per change");
    write(&key_file, &key_b);
    assert_eq!(c.refresh(), Refresh::Reloaded);
    assert_eq!(c.current().cert[0], pem_certs(&cert_b)[0]);
}

#[tokio::test]
async fn a_client_certificate_of_another_ca_fails_the_handshake_and_reaches_nothing() {
    let server = https_memory().await;
    let pki = server.pki().unwrap().clone();
    let stranger = Pki::generate("127.0.0.1".parse().unwrap()).unwrap();
    let event = r#"{"apiVersion":"v1","kind":"Event","metadata":{"name":"e1","namespace":"default"},"involvedObject":{"kind":"Pod","name":"p","namespace":"default"},"reason":"R","message":"m"}"#;
    for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
        let mut bad = Client::trusting(pki.ca_cert());
        bad.versions = vec![version];
        bad.client = Some((
            stranger.admin().client_cert.clone(),
            stranger.admin().client_key.clone(),
        ));
        let r = bad
            .request(
                server.addr(),
                "POST",
                "/api/v1/namespaces/default/events",
                event,
            )
            .await;
        assert!(r.is_err(), "{version:?}: {r:?}");
    }
    // The admin certificate of this server's CA works, and nothing was created before.
    let mut admin = Client::trusting(pki.ca_cert());
    admin.client = Some((
        pki.admin().client_cert.clone(),
        pki.admin().client_key.clone(),
    ));
    let (code, body) = admin
        .request(server.addr(), "GET", "/api/v1/events", "")
        .await
        .unwrap();
    assert_eq!(code, 200, "{body}");
    assert!(body.contains(r#""items":[]"#), "{body}");
    assert!(
        !server.metrics().encode().contains("verb=\"CREATE\""),
        "no create was counted"
    );
    let (code, body) = admin
        .request(
            server.addr(),
            "POST",
            "/api/v1/namespaces/default/events",
            event,
        )
        .await
        .unwrap();
    assert_eq!(code, 201, "{body}");
    server.shutdown().await.unwrap();
}

/// [`whoami`] served over `tls` on 127.0.0.1, until [`Whoami::stop`].
struct Whoami {
    addr: SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Whoami {
    async fn serve(tls: Tls) -> Whoami {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(listen::serve_with(
            listener,
            tls,
            whoami(),
            ConnectionOptions::default(),
            Arc::new(Metrics::default()),
            async move {
                let _ = stopped.await;
            },
        ));
        Whoami { addr, stop, task }
    }

    async fn stop(self) {
        self.stop.send(()).unwrap();
        tokio::time::timeout(GUARD, self.task)
            .await
            .expect("stops")
            .unwrap()
            .unwrap();
    }
}

/// A handler that says which client certificate its request carried.
fn whoami() -> Router {
    Router::new().route(
        "/whoami",
        get(|req: axum::extract::Request| async move {
            match req.extensions().get::<VerifiedClientCertificates>() {
                Some(c) => format!("{}", c.leaf().map_or(0, |l| l.len())),
                None => "none".to_string(),
            }
        }),
    )
}

#[tokio::test]
async fn a_verified_client_certificate_rides_on_every_request_as_an_extension() {
    let pki = Pki::generate("127.0.0.1".parse().unwrap()).unwrap();
    let (chain, key) = pki.serving().unwrap();
    let tls = Tls::new(
        Arc::new(ReloadingCertificate::fixed(chain, key).unwrap()),
        Some(pki.ca_der()),
    )
    .unwrap();
    let whoami = Whoami::serve(tls).await;
    let addr = whoami.addr;
    let leaf_len = pem_certs(&pki.admin().client_cert)[0].len();
    for alpn in [&b"h2"[..], &b"http/1.1"[..]] {
        let mut admin = Client::trusting(pki.ca_cert());
        admin.alpn = vec![alpn.to_vec()];
        admin.client = Some((
            pki.admin().client_cert.clone(),
            pki.admin().client_key.clone(),
        ));
        let (code, body) = admin.request(addr, "GET", "/whoami", "").await.unwrap();
        assert_eq!((code, body), (200, leaf_len.to_string()));
        let mut anonymous = Client::trusting(pki.ca_cert());
        anonymous.alpn = vec![alpn.to_vec()];
        let (code, body) = anonymous.request(addr, "GET", "/whoami", "").await.unwrap();
        assert_eq!((code, body.as_str()), (200, "none"));
    }
    whoami.stop().await;
}

/// `--client-ca-file` is reloaded without a restart: after the file is replaced, the new CA's
/// certificates verify and the old one's fail the handshake; a replacement that is not a CA
/// bundle keeps the last good CAs.
#[tokio::test]
async fn the_client_ca_file_is_reloaded_without_a_restart() {
    let a = Pki::generate("127.0.0.1".parse().unwrap()).unwrap();
    let b = Pki::generate("127.0.0.1".parse().unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("client-ca.crt");
    write(&ca_file, a.ca_cert());
    let (chain, key) = a.serving().unwrap();
    let client_ca = Arc::new(ReloadingClientCa::from_file(&ca_file).unwrap());
    let tls = Tls::reloading(
        Arc::new(ReloadingCertificate::fixed(chain, key).unwrap()),
        Some(client_ca.clone()),
    )
    .unwrap();
    let whoami = Whoami::serve(tls).await;
    let addr = whoami.addr;
    // Both clients trust the server (a's CA signed its serving certificate).
    let client_of = |pki: &Pki| {
        let mut c = Client::trusting(a.ca_cert());
        c.client = Some((
            pki.admin().client_cert.clone(),
            pki.admin().client_key.clone(),
        ));
        c
    };
    let leaf_len = |pki: &Pki| pem_certs(&pki.admin().client_cert)[0].len().to_string();

    let r = client_of(&a).request(addr, "GET", "/whoami", "").await;
    assert_eq!(r, Ok((200, leaf_len(&a))));
    let r = client_of(&b).request(addr, "GET", "/whoami", "").await;
    assert!(r.is_err(), "b's certificate is not trusted yet: {r:?}");

    write(&ca_file, b.ca_cert());
    let r = client_of(&b).request(addr, "GET", "/whoami", "").await;
    assert_eq!(
        r,
        Ok((200, leaf_len(&b))),
        "b's CA was loaded at the handshake"
    );
    let r = client_of(&a).request(addr, "GET", "/whoami", "").await;
    assert!(r.is_err(), "a's CA is no longer trusted: {r:?}");

    write(&ca_file, "not a certificate\n");
    assert_eq!(client_ca.refresh(), Refresh::KeptLastGood);
    let r = client_of(&b).request(addr, "GET", "/whoami", "").await;
    assert_eq!(r, Ok((200, leaf_len(&b))), "the last good CAs stay");
    assert_eq!(client_ca.refresh(), Refresh::Unchanged);

    whoami.stop().await;
}

#[tokio::test]
async fn plain_http_off_loopback_is_refused_with_the_reason() {
    let e = Server::start(ServerOptions {
        listen: "0.0.0.0:0".parse().unwrap(),
        ..ServerOptions::default()
    })
    .await
    .unwrap_err();
    assert!(
        matches!(e, ServerError::PlainHttpNotLoopback { .. }),
        "{e:?}"
    );
    let text = e.to_string();
    assert!(
        text.starts_with("refusing to serve plain HTTP on 0.0.0.0:0: anyone who can reach it"),
        "{text}"
    );
    assert!(!text.contains('\n'));
}

#[tokio::test]
async fn unusable_certificate_files_are_one_line_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (cert_file, key_file) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let (_, cert, key) = certificate();
    let (_, _, other_key) = certificate();
    let start = |client_ca_file: Option<std::path::PathBuf>| {
        Server::start(ServerOptions {
            listen: "127.0.0.1:0".parse().unwrap(),
            transport: Transport::Https(TlsOptions {
                serving: ServingCertificate::Files {
                    cert_file: cert_file.clone(),
                    key_file: key_file.clone(),
                },
                client_ca_file,
            }),
            ..ServerOptions::default()
        })
    };
    let cases: [(&str, &str, &Path, &str); 5] = [
        (
            "not pem",
            &key,
            &cert_file,
            "it holds no PEM CERTIFICATE block",
        ),
        (&cert, "", &key_file, "it holds no PEM PRIVATE KEY"),
        (
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
            &key,
            &cert_file,
            "is not a valid X.509 certificate",
        ),
        (
            &cert,
            &other_key,
            &key_file,
            "it is not the key of the certificate",
        ),
        (
            &cert,
            "-----BEGIN PRIVATE KEY-----\n!!\n-----END PRIVATE KEY-----\n",
            &key_file,
            "it is not a valid PEM private key",
        ),
    ];
    for (c, k, named, says) in cases {
        std::fs::write(&cert_file, c).unwrap();
        std::fs::write(&key_file, k).unwrap();
        let e = start(None).await.unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, ServerError::Tls(_)), "{e:?}");
        assert!(text.contains(&named.display().to_string()), "{text}");
        assert!(text.contains(says), "{text}");
        assert!(!text.contains('\n'), "{text}");
        assert!(!text.contains("BEGIN"), "no file contents: {text}");
    }
    std::fs::write(&cert_file, &cert).unwrap();
    std::fs::write(&key_file, &key).unwrap();
    let ca_file = dir.path().join("ca.crt");
    let e = start(Some(ca_file.clone())).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("cannot read the client CA file {}", ca_file.display())
    );
    // The cause is kept as the error's source, not lost.
    let cause = std::error::Error::source(&e).expect("the io error is the source");
    assert_eq!(
        cause
            .downcast_ref::<std::io::Error>()
            .map(std::io::Error::kind),
        Some(std::io::ErrorKind::NotFound),
        "{cause:?}"
    );
    std::fs::write(&ca_file, "nothing").unwrap();
    let e = start(Some(ca_file.clone())).await.unwrap_err().to_string();
    assert!(e.contains("client CA file"), "{e}");
    assert!(read_certificates(&cert_file, "x").is_ok());
    start(None).await.unwrap().shutdown().await.unwrap();
}

#[tokio::test]
async fn the_sqlite_store_keeps_its_certificates_in_the_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let options = ServerOptions {
        store: StoreKind::Sqlite { dir: data.clone() },
        listen: "127.0.0.1:0".parse().unwrap(),
        transport: Transport::Https(TlsOptions::default()),
        ..ServerOptions::default()
    };
    let server = Server::start(options.clone()).await.unwrap();
    let first = server.pki().unwrap().admin().clone();
    assert_eq!(
        server.pki().unwrap().dir(),
        Some(data.join("pki").as_path())
    );
    server.shutdown().await.unwrap();
    let server = Server::start(options).await.unwrap();
    let again = server.pki().unwrap().admin().clone();
    assert_eq!(first.ca_cert, again.ca_cert, "reused");
    assert_eq!(first.client_cert, again.client_cert, "reused");
    let mut admin = Client::trusting(&again.ca_cert);
    admin.client = Some((again.client_cert.clone(), again.client_key.clone()));
    let (code, _) = admin
        .request(server.addr(), "GET", "/api/v1/events", "")
        .await
        .unwrap();
    assert_eq!(code, 200);
    server.shutdown().await.unwrap();
}
