//! HTTP clients for everything in Guidepost that calls out: model providers, tool services,
//! servers driven by the simulator.
//!
//! TLS goes through rustls with the ring crypto backend. [`client_builder`] makes sure that
//! backend is installed as the process default before a client is built (reqwest needs one),
//! so build every client with it rather than with `reqwest::Client::builder()`; a clippy
//! rule in the workspace enforces it.
//!
//! ```
//! let client = guidepost_llm::http::client_builder()
//!     .connect_timeout(std::time::Duration::from_secs(5))
//!     .build()?;
//! # Ok::<(), reqwest::Error>(())
//! ```

use std::sync::Once;

/// Installs ring as the process's default TLS crypto provider (once; a provider installed
/// earlier by the application is kept).
pub fn install_tls_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A client builder whose TLS backend is installed.
#[allow(clippy::disallowed_methods)]
pub fn client_builder() -> reqwest::ClientBuilder {
    install_tls_provider();
    reqwest::Client::builder()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_build_with_tls() {
        assert!(client_builder().build().is_ok());
        assert!(rustls::crypto::CryptoProvider::get_default().is_some());
    }
}
