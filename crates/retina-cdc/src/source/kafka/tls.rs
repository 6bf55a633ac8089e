//! The TLS client configuration: the system's roots, plus a CA file when given
//! (a private cluster's own CA).

use std::path::Path;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

pub fn client_config(ca: Option<&Path>) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    for certificate in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(certificate);
    }
    if let Some(path) = ca {
        let certificates = CertificateDer::pem_file_iter(path)
            .map_err(|e| format!("tls_ca {}: {e}", path.display()))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("tls_ca {}: {e}", path.display()))?;
        if certificates.is_empty() {
            return Err(format!("tls_ca {}: no PEM certificate in it", path.display()));
        }
        for certificate in certificates {
            roots.add(certificate).map_err(|e| format!("tls_ca {}: {e}", path.display()))?;
        }
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}
