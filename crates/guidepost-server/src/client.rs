//! Who a request comes from: the address that connected, or, when that is a proxy the server
//! was told to trust (`--trusted-proxy`), the client that proxy names in `X-Forwarded-For`.
//! Per-address rate limits count clients, not the proxy in front of them all; a header from a
//! caller that is not a trusted proxy is ignored, so nobody picks their own address.

use std::net::IpAddr;

use axum::http::HeaderMap;
use ipnet::IpNet;

/// The proxies whose `X-Forwarded-For` is believed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(pub Vec<IpNet>);

impl TrustedProxies {
    /// Reads an address (`10.0.0.5`) or a range (`10.0.0.0/8`, `fd00::/8`).
    pub fn parse_entry(text: &str) -> Result<IpNet, String> {
        let text = text.trim();
        text.parse::<IpNet>()
            .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
            .map_err(|_| format!("`{text}` is neither an IP address nor a range such as 10.0.0.0/8"))
    }

    fn trusts(&self, address: IpAddr) -> bool {
        self.0.iter().any(|net| net.contains(&address))
    }

    /// The client's address: `peer` itself unless it is trusted; then, from the right of
    /// `X-Forwarded-For` (each proxy appends the address it was reached from), the first
    /// entry that is not itself a trusted proxy. An entry that is not an address ends the walk
    /// at the last trusted hop.
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if !self.trusts(peer) {
            return peer;
        }
        let hops: Vec<&str> = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .collect();
        let mut client = peer;
        for hop in hops.iter().rev() {
            if !self.trusts(client) {
                break;
            }
            match hop.parse::<IpAddr>() {
                Ok(address) => client = address,
                Err(_) => break,
            }
        }
        client
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for v in values {
            map.append("x-forwarded-for", v.parse().unwrap());
        }
        map
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn only_trusted_proxies_name_the_client() {
        let proxies = TrustedProxies(vec![
            TrustedProxies::parse_entry("10.0.0.0/8").unwrap(),
            TrustedProxies::parse_entry("192.0.2.1").unwrap(),
        ]);
        // Nobody trusted: the header is the caller's own claim, ignored.
        assert_eq!(TrustedProxies::default().client(ip("10.0.0.5"), &headers(&["203.0.113.7"])), ip("10.0.0.5"));
        assert_eq!(proxies.client(ip("198.51.100.9"), &headers(&["203.0.113.7"])), ip("198.51.100.9"));
        // Through a trusted proxy: the address it names.
        assert_eq!(proxies.client(ip("10.0.0.5"), &headers(&["203.0.113.7"])), ip("203.0.113.7"));
        // A forged first entry is skipped: the walk stops at the first untrusted hop.
        assert_eq!(proxies.client(ip("10.0.0.5"), &headers(&["1.2.3.4, 203.0.113.7"])), ip("203.0.113.7"));
        // Two trusted proxies in a row, over two header lines.
        assert_eq!(proxies.client(ip("10.0.0.5"), &headers(&["203.0.113.7", "192.0.2.1"])), ip("203.0.113.7"));
        // No header, or garbage: the proxy itself.
        assert_eq!(proxies.client(ip("10.0.0.5"), &HeaderMap::new()), ip("10.0.0.5"));
        assert_eq!(proxies.client(ip("10.0.0.5"), &headers(&["unknown"])), ip("10.0.0.5"));
        assert!(TrustedProxies::parse_entry("not an address").unwrap_err().contains("not an address"));
        assert_eq!(TrustedProxies::parse_entry("fd00::/8").unwrap().to_string(), "fd00::/8");
    }
}
