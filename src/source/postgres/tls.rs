//! TLS for the PostgreSQL source: rustls with the ring provider, as the DSN's `sslmode` asks.
//!
//! Owns the rustls client configuration and nothing else (tokio-postgres decides, from
//! `sslmode`, whether TLS is attempted). Two modes, as libpq has them:
//! - no `sslrootcert` in the config: the channel is encrypted but the server's certificate is
//!   not checked against any authority (libpq's `sslmode=require` without a root file). The
//!   handshake signatures are still verified, so the session is bound to the certificate the
//!   server presented;
//! - `sslrootcert` given: the certificate chain and the host name are verified against those
//!   roots (libpq's `verify-full`).

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::connect::ROOTCERT_BYTES_MAX;
use crate::json::ConfigError;

/// The connector tokio-postgres uses for every connection of the source.
pub(crate) fn connector(
    rootcert: Option<&Path>,
) -> Result<tokio_postgres_rustls::MakeRustlsConnect, ConfigError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| ConfigError::invalid("", format!("TLS setup: {e}")))?;
    let config = match rootcert {
        Some(path) => {
            let bad = |p: String| ConfigError::invalid("sslrootcert", p);
            // Bounded while reading, whatever size the file states.
            let pem = crate::io_bound::read_text(path, ROOTCERT_BYTES_MAX)
                .map_err(|e| bad(crate::source::mapping::chain_text(&e)))?;
            let mut roots = RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                let cert = cert.map_err(|e| bad(format!("{} is not PEM: {e}", path.display())))?;
                roots.add(cert).map_err(|e| {
                    bad(format!(
                        "{} holds an unusable certificate: {e}",
                        path.display()
                    ))
                })?;
            }
            if roots.is_empty() {
                return Err(bad(format!("{} holds no certificate", path.display())));
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(EncryptOnly {
                algorithms: provider.signature_verification_algorithms,
            }))
            .with_no_client_auth(),
    };
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

/// libpq's `sslmode=require`: any certificate, but a correct handshake with it.
#[derive(Debug)]
struct EncryptOnly {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for EncryptOnly {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
