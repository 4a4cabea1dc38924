//! Control requests the supervisor relays: each arrives on the channel
//! with a stream of its own (and the file it names, open), so a long
//! checkpoint never holds up a status query.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};

use crate::channel::{Channel, SupervisorRequest};
use crate::control_schema::{ErrorCode, ErrorReply, Line};
use crate::worker::commands::{run, to_line};
use crate::worker::registry::Registry;

/// Reads the channel until the supervisor goes away, which ends the
/// worker: a vGPU nobody can control or account for is not served.
pub fn spawn(channel: Arc<Channel>, registry: Arc<Registry>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("supervisor".into())
        .spawn(move || loop {
            match channel.recv::<SupervisorRequest>() {
                Ok(Some((SupervisorRequest::Control, fds))) => {
                    let registry = registry.clone();
                    let spawned = std::thread::Builder::new()
                        .name("control-request".into())
                        .spawn(move || serve(fds, &registry));
                    if let Err(e) = spawned {
                        log::warn!("cannot serve a control request: {e}");
                    }
                }
                Ok(Some((SupervisorRequest::Precopy, fds))) => {
                    let Some(stream) = fds.into_iter().next().map(UnixStream::from) else {
                        log::warn!("a pre-copy connection came without its stream");
                        continue;
                    };
                    let registry = registry.clone();
                    let spawned = std::thread::Builder::new()
                        .name("precopy".into())
                        .spawn(move || crate::worker::precopy::serve(stream, registry));
                    if let Err(e) = spawned {
                        log::warn!("cannot serve a pre-copy connection: {e}");
                    }
                }
                Ok(None) => {
                    log::error!(
                        "the supervisor went away; worker {} ends",
                        std::process::id()
                    );
                    std::process::exit(1);
                }
                Err(e) => log::warn!("supervisor channel: {e}"),
            }
        })?;
    Ok(())
}

fn serve(fds: Vec<OwnedFd>, registry: &Registry) {
    let mut fds = fds.into_iter();
    let Some(stream) = fds.next().map(UnixStream::from) else {
        log::warn!("a control request came without its stream");
        return;
    };
    let file = fds.next().map(File::from);
    if let Err(e) = answer(stream, file, registry) {
        log::debug!("control request: {e}");
    }
}

fn answer(stream: UnixStream, file: Option<File>, registry: &Registry) -> std::io::Result<()> {
    let mut line = String::new();
    BufReader::new(stream.try_clone()?).read_line(&mut line)?;
    let out = Arc::new(Mutex::new(stream));
    let result = serde_json::from_str::<Vec<String>>(line.trim_end())
        .map_err(|e| {
            ErrorReply::new(
                ErrorCode::BadArgument,
                format!("malformed worker request: {e}"),
            )
        })
        .and_then(|words| {
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            run(&words, file, registry, &out)
        });
    let answer = match result {
        Ok(answer) => answer,
        Err(error) => to_line(&Line::Error { error }),
    };
    let mut stream = out.lock().unwrap_or_else(|e| e.into_inner());
    writeln!(stream, "{answer}")
}
