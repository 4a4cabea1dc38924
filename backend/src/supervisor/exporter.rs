//! `--metrics`: a tiny HTTP/1.1 responder for Prometheus. `GET /metrics`
//! answers the figures of [`crate::supervisor::metrics`] in the text
//! exposition format; anything else a 404 or 405. One request per
//! connection, served in turn, each bounded in size and time, so a slow or
//! hostile scraper cannot hold the backend's memory. The listeners are
//! bound before the backend leaves the host's network namespace.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use crate::config::{parse_endpoint, Endpoint};
use crate::supervisor::Supervisor;

/// A bound endpoint, not yet serving.
pub enum Bound {
    Unix(UnixListener, PathBuf),
    Tcp(TcpListener),
}

pub fn bind(endpoint: &Endpoint) -> std::io::Result<Bound> {
    match endpoint {
        Endpoint::Unix(path) => {
            if path.exists() {
                std::fs::remove_file(path)?;
            }
            Ok(Bound::Unix(UnixListener::bind(path)?, path.clone()))
        }
        Endpoint::Tcp(address) => Ok(Bound::Tcp(TcpListener::bind(address)?)),
    }
}

impl Bound {
    /// Serves on a thread of its own until the process ends.
    pub fn serve(self, registry: Arc<Supervisor>) -> std::io::Result<()> {
        std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || match self {
                Bound::Unix(listener, _) => {
                    for stream in listener.incoming().flatten() {
                        let _ = stream.set_read_timeout(Some(TIMEOUT));
                        let _ = stream.set_write_timeout(Some(TIMEOUT));
                        answer(stream, &registry);
                    }
                }
                Bound::Tcp(listener) => {
                    for stream in listener.incoming().flatten() {
                        let _ = stream.set_read_timeout(Some(TIMEOUT));
                        let _ = stream.set_write_timeout(Some(TIMEOUT));
                        answer(stream, &registry);
                    }
                }
            })?;
        Ok(())
    }

    /// The socket file to remove at exit, if any.
    pub fn path(&self) -> Option<PathBuf> {
        match self {
            Bound::Unix(_, path) => Some(path.clone()),
            Bound::Tcp(_) => None,
        }
    }
}

const TIMEOUT: Duration = Duration::from_secs(5);
/// Longest request head read.
const MAX_HEAD: usize = 8192;

/// The request line of an HTTP request head, once the head is complete.
fn request_line(head: &[u8]) -> Option<&str> {
    let end = head.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&head[..end]).ok()?;
    head.lines().next()
}

/// Status line and body for a request line.
pub fn respond(line: &str, body: impl FnOnce() -> String) -> (&'static str, String) {
    let mut words = line.split(' ');
    match (words.next(), words.next()) {
        (Some("GET"), Some("/metrics")) => ("200 OK", body()),
        (Some("GET"), Some(_)) => ("404 Not Found", "try /metrics\n".into()),
        _ => ("405 Method Not Allowed", "only GET /metrics\n".into()),
    }
}

fn answer(mut stream: impl Read + Write, registry: &Supervisor) {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    let line = loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if let Some(line) = request_line(&head) {
            break line.to_string();
        }
        if head.len() > MAX_HEAD {
            return;
        }
    };
    let (status, body) = respond(&line, || {
        crate::vgpu::metrics::prometheus(&crate::supervisor::metrics(registry))
    });
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_and_bad_ones_are_named() {
        assert_eq!(
            parse_endpoint("unix:/run/vgpu/vm1.metrics"),
            Ok(Endpoint::Unix("/run/vgpu/vm1.metrics".into()))
        );
        assert_eq!(
            parse_endpoint("tcp:127.0.0.1:9464"),
            Ok(Endpoint::Tcp("127.0.0.1:9464".parse().unwrap()))
        );
        for bad in ["unix:", "tcp:localhost", "tcp:127.0.0.1", "http://x", ""] {
            assert!(parse_endpoint(bad).unwrap_err().contains(bad), "{bad}");
        }
    }

    #[test]
    fn only_get_metrics_gets_the_figures() {
        let body = || "figures".to_string();
        assert_eq!(
            respond("GET /metrics HTTP/1.1", body),
            ("200 OK", "figures".into())
        );
        assert_eq!(respond("GET / HTTP/1.1", body).0, "404 Not Found");
        assert_eq!(
            respond("POST /metrics HTTP/1.1", body).0,
            "405 Method Not Allowed"
        );
    }

    #[test]
    fn a_request_line_needs_the_whole_head() {
        assert_eq!(request_line(b"GET /metrics HTTP/1.1\r\nHost: x\r\n"), None);
        assert_eq!(
            request_line(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Some("GET /metrics HTTP/1.1")
        );
    }
}
