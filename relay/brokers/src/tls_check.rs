//! Why a broker refused our TLS handshake, when the client library does not say. librdkafka
//! reports every failed certificate check as "certificate verify failed: … verify that
//! ssl.ca.location is correctly configured", the same words for an untrusted CA, an expired
//! certificate and a certificate that does not name the host. [`why_untrusted`] repeats the
//! check once with rustls against the same address and CA file, whose error names the cause
//! ("certificate not valid for name \"127.0.0.2\""). It only explains: the refusal itself is
//! the client library's, and nothing is ever sent over this connection.

use std::io::Write;
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore};

const TIMEOUT: Duration = Duration::from_secs(3);

/// The certificate error rustls finds for the first server of `servers` (`host:port,…`, as in
/// `bootstrapServers`), trusting only the certificates in `ca_file`. None when it finds none,
/// or cannot tell (no answer, an unreadable file): then there is nothing to add.
pub fn why_untrusted(servers: &str, ca_file: &str) -> Option<String> {
    let server = servers.split(',').next()?.trim();
    let server = server.split_once("://").map_or(server, |(_, rest)| rest);
    let (host, port) = server.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port: u16 = port.parse().ok()?;

    let mut roots = RootCertStore::empty();
    for ca in CertificateDer::pem_file_iter(ca_file).ok()? {
        roots.add(ca.ok()?).ok()?;
    }
    queuebox_core::tls::install_provider();
    let config = ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from(host.to_string()).ok()?;
    let mut tls = ClientConnection::new(Arc::new(config), name).ok()?;

    let addr = (host, port).to_socket_addrs().ok()?.next()?;
    let mut socket = TcpStream::connect_timeout(&addr, TIMEOUT).ok()?;
    socket.set_read_timeout(Some(TIMEOUT)).ok()?;
    socket.set_write_timeout(Some(TIMEOUT)).ok()?;
    // The server's certificate is checked as soon as it arrives, before this side sends a
    // certificate of its own, so the handshake needs no client certificate to get that far.
    while tls.is_handshaking() {
        if let Err(e) = tls.complete_io(&mut socket) {
            let cause = e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>());
            return match cause {
                Some(rustls::Error::InvalidCertificate(_)) => Some(e.to_string()),
                _ => None,
            };
        }
    }
    tls.send_close_notify();
    let _ = tls.write_tls(&mut socket);
    let _ = socket.flush();
    None
}
