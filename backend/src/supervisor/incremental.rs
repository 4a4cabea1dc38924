//! The supervisor's part of incremental checkpoints: it opens the files,
//! so it names the base to the worker (its identity, read from the base's
//! first chunk) and, for a restore, merges the incremental checkpoint with
//! its base into the whole stream the worker reads through a pipe.

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::Path;

use crate::control_schema::{ErrorCode, ErrorReply};
use crate::startup::error_chain;
use crate::supervisor::WorkerLink;

fn file_error(message: String) -> ErrorReply {
    ErrorReply::new(ErrorCode::File, message)
}

/// The identity (hex) and absolute path of the whole checkpoint `base`,
/// refused when it is `file` itself (the new checkpoint would replace the
/// base it needs).
pub fn base_words(base: &str, file: &str) -> Result<(String, String), ErrorReply> {
    let path = std::fs::canonicalize(base)
        .map_err(|e| file_error(format!("cannot open the base {base}: {e}")))?;
    if std::fs::canonicalize(file).is_ok_and(|f| f == path) {
        return Err(ErrorReply::new(
            ErrorCode::BadArgument,
            format!("{file} is the base itself: write the incremental checkpoint elsewhere"),
        ));
    }
    let mut f =
        File::open(&path).map_err(|e| file_error(format!("cannot open the base {base}: {e}")))?;
    let id = vgpu_migration::base_id(&mut f).map_err(|e| {
        ErrorReply::new(
            ErrorCode::CheckpointFailed,
            format!("{base} is not a whole checkpoint: {}", error_chain(&e)),
        )
    })?;
    let id = id.ok_or_else(|| {
        ErrorReply::new(
            ErrorCode::CheckpointFailed,
            format!("{base} has no identity (written by an older build, or a merge): take a whole checkpoint first"),
        )
    })?;
    Ok((format!("{:032x}", id.0), path.display().to_string()))
}

/// Restores `worker`'s vGPU from the incremental checkpoint `file` on top
/// of `base`: the merge streams into a pipe the worker reads, so neither
/// side holds more than a chunk. The merge's error, when it fails, is the
/// one reported (the worker then only sees a truncated stream).
pub fn restore(
    worker: &WorkerLink,
    file: &str,
    base: &str,
    relay: impl FnOnce(&File) -> Result<String, ErrorReply>,
) -> Result<String, ErrorReply> {
    let open =
        |p: &str| File::open(Path::new(p)).map_err(|e| file_error(format!("cannot open {p}: {e}")));
    let (delta, base_file) = (open(file)?, open(base)?);
    let (reader, writer) = std::io::pipe()
        .map_err(|e| file_error(format!("cannot make a pipe for the merge: {e}")))?;
    let merging = std::thread::Builder::new()
        .name("vgpu-merge".into())
        .spawn(move || {
            vgpu_migration::merge(
                BufReader::with_capacity(1 << 20, base_file),
                BufReader::with_capacity(1 << 20, delta),
                BufWriter::with_capacity(1 << 20, writer),
            )
            .map(|_| ())
        })
        .map_err(|e| file_error(format!("cannot start the merge: {e}")))?;
    let reader = File::from(std::os::fd::OwnedFd::from(reader));
    let restored = relay(&reader);
    // The worker has its own copy: closing ours lets a merge whose reader
    // gave up fail on the pipe instead of waiting.
    drop(reader);
    let merged = match merging.join() {
        Ok(merged) => merged,
        Err(_) => {
            return Err(ErrorReply::new(
                ErrorCode::RestoreFailed,
                "the merge of the checkpoints panicked",
            ))
        }
    };
    match (merged, restored) {
        // The worker stopped reading (it refused the state): its reason.
        (Err(vgpu_migration::MergeError::Write(_)), Err(refused)) => Err(refused),
        (Err(e), _) => Err(ErrorReply::new(
            ErrorCode::RestoreFailed,
            format!(
                "restore into front-end {} failed: cannot merge {file} with {base}: {}",
                worker.vm_id,
                error_chain(&e)
            ),
        )),
        (Ok(()), restored) => restored,
    }
}
