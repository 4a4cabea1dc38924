//! The pre-copy channel of one VM (`--precopy-socket`): its QEMU asks for
//! the vGPU's stream in slices while the VM runs (source) or hands the
//! slices over as they arrive (destination). The supervisor passes each
//! connection to the worker serving that QEMU.
//!
//! One request per line, one answer per request:
//!
//! | request | answer |
//! |---|---|
//! | `begin [ROUNDS]` | `ok`: a whole checkpoint is being taken live |
//! | `pending` | `pending BYTES`: left to send before the stop |
//! | `next LIMIT` | `data N` and N bytes (N may be 0), or `end` once all was sent |
//! | `finish` | `ok`: the device state at the stop refers to what was sent |
//! | `load N` and N bytes | `ok` |
//! | `loaded` | `ok BYTES`: the kept stream is the incoming migration base |
//! | `abort` | `ok`: what this connection started is dropped |
//!
//! A request it cannot serve is answered `error MESSAGE` and logged; the
//! connection and the VM's vGPU go on. Closing the connection aborts.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use crate::persist::{Incoming, Outgoing, PrecopyError};
use crate::ratelimit::WarnLimiter;
use crate::startup::error_chain;
use crate::worker::registry::Registry;

/// The longest request line.
const MAX_LINE: u64 = 256;
/// The most bytes one `next` or `load` moves.
const MAX_SLICE: usize = 64 << 20;
/// Copy rounds of a pre-copy when `begin` names none.
const DEFAULT_ROUNDS: u32 = 5;

/// What one connection has started.
#[derive(Default)]
struct Connection {
    outgoing: Option<Outgoing>,
    incoming: Option<Incoming>,
}

#[derive(Debug, thiserror::Error)]
enum RequestError {
    #[error("unknown request {0:?}")]
    Unknown(String),
    #[error("{0:?} is not a byte count")]
    BadCount(String),
    #[error("{0} bytes is over the limit of {MAX_SLICE} for one slice")]
    TooLarge(usize),
    #[error("no pre-copy was begun on this connection")]
    NotBegun,
    #[error("no stream was loaded on this connection")]
    NothingLoaded,
    #[error("this VM has no vGPU yet: {0}")]
    NoVgpu(String),
    #[error(transparent)]
    Precopy(#[from] PrecopyError),
}

/// Serves one connection until QEMU closes it.
pub fn serve(stream: UnixStream, registry: Arc<Registry>) {
    if let Err(e) = serve_lines(stream, &registry) {
        log::debug!("pre-copy channel: {e}");
    }
}

fn serve_lines(stream: UnixStream, registry: &Registry) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = std::io::BufWriter::new(stream);
    let mut connection = Connection::default();
    let warnings = WarnLimiter::default();
    let mut line = String::new();
    loop {
        line.clear();
        if (&mut reader).take(MAX_LINE).read_line(&mut line)? == 0 {
            return Ok(());
        }
        let text = line.trim_end_matches(['\n', '\r']);
        let answered = answer(text, &mut connection, registry, &mut reader, &mut out);
        match answered {
            Ok(()) => {}
            Err(Failure::Io(e)) => return Err(e),
            Err(Failure::Request(e)) => {
                let message = error_chain(&e);
                if warnings.allow() {
                    log::warn!("pre-copy request {text:?} refused: {message}");
                }
                writeln!(out, "error {}", message.replace('\n', " "))?;
            }
        }
        out.flush()?;
    }
}

enum Failure {
    Io(std::io::Error),
    Request(RequestError),
}

impl<E: Into<RequestError>> From<E> for Failure {
    fn from(e: E) -> Failure {
        Failure::Request(e.into())
    }
}

fn io(e: std::io::Error) -> Failure {
    Failure::Io(e)
}

fn count(word: Option<&str>) -> Result<usize, RequestError> {
    let word = word.unwrap_or_default();
    let n: usize = word
        .parse()
        .map_err(|_| RequestError::BadCount(word.into()))?;
    if n > MAX_SLICE {
        return Err(RequestError::TooLarge(n));
    }
    Ok(n)
}

fn answer(
    text: &str,
    connection: &mut Connection,
    registry: &Registry,
    reader: &mut impl Read,
    out: &mut impl Write,
) -> Result<(), Failure> {
    let mut words = text.split(' ');
    let vgpu = || registry.vm().map_err(|e| RequestError::NoVgpu(e.message));
    match (words.next(), words.next(), words.next()) {
        (Some("begin"), rounds, None) => {
            let rounds = match rounds {
                Some(word) => word
                    .parse()
                    .map_err(|_| RequestError::BadCount(word.into()))?,
                None => DEFAULT_ROUNDS,
            };
            // A second begin replaces the first, which is dropped first.
            connection.outgoing = None;
            connection.outgoing = Some(Outgoing::begin(vgpu()?, rounds)?);
            writeln!(out, "ok").map_err(io)
        }
        (Some("pending"), None, None) => {
            let outgoing = connection.outgoing.as_mut().ok_or(RequestError::NotBegun)?;
            writeln!(out, "pending {}", outgoing.pending()).map_err(io)
        }
        (Some("next"), limit, None) => {
            let limit = count(limit)?;
            let outgoing = connection.outgoing.as_mut().ok_or(RequestError::NotBegun)?;
            match outgoing.next(limit)? {
                Some(bytes) => {
                    writeln!(out, "data {}", bytes.len()).map_err(io)?;
                    out.write_all(&bytes).map_err(io)
                }
                None => writeln!(out, "end").map_err(io),
            }
        }
        (Some("finish"), None, None) => {
            let outgoing = connection.outgoing.as_mut().ok_or(RequestError::NotBegun)?;
            outgoing.finish()?;
            writeln!(out, "ok").map_err(io)
        }
        (Some("load"), len, None) => {
            let len = count(len)?;
            // The bytes follow the line whatever happens to them, so the
            // connection stays in step even when they are refused.
            let mut bytes = vec![0u8; len];
            reader.read_exact(&mut bytes).map_err(io)?;
            let incoming = match connection.incoming.as_mut() {
                Some(incoming) => incoming,
                None => connection.incoming.insert(Incoming::new(vgpu()?)?),
            };
            incoming.append(&bytes)?;
            writeln!(out, "ok").map_err(io)
        }
        (Some("loaded"), None, None) => {
            let incoming = connection
                .incoming
                .take()
                .ok_or(RequestError::NothingLoaded)?;
            let kept = incoming.keep()?;
            writeln!(out, "ok {kept}").map_err(io)
        }
        (Some("abort"), None, None) => {
            if connection.outgoing.is_some() || connection.incoming.is_some() {
                log::info!("pre-copy aborted by the front-end");
            }
            *connection = Connection::default();
            writeln!(out, "ok").map_err(io)
        }
        _ => Err(RequestError::Unknown(text.chars().take(64).collect()).into()),
    }
}
