//! The device-state stream of a live migration, leaning on a whole
//! checkpoint both hosts hold. The operator takes a checkpoint while the VM
//! runs (its buffers copied as the guest computes), copies it to the
//! destination and names it on both back-ends (`vgpu-ctl migration-base`);
//! at the stop the source then sends an incremental checkpoint (objects, and
//! only the buffers written since), and the destination merges it with its
//! copy as it reads. Without a base both sides do as before.

use std::io::{Read, Write};
use std::sync::Arc;

use vgpu_migration as m;

use super::live::{capture, precopy, write, LiveOptions};
use super::{restore, Continuity, Error, Report};
use crate::vgpu::Vgpu;

/// What the source writes at the stop: an incremental checkpoint against
/// the migration base, or the whole vGPU.
pub fn save_for_migration<W: Write>(vgpu: &Arc<Vgpu>, out: W) -> Result<(W, Report), Error> {
    let outgoing = vgpu
        .migration_base
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .outgoing();
    let Some(incremental) = outgoing else {
        return super::save(vgpu, out, None);
    };
    log::info!(
        "sending only what changed since the migration base {}",
        incremental.path
    );
    // The VM is stopped: nothing to copy in rounds, only the base to skip.
    let options = LiveOptions {
        max_rounds: 0,
        ..Default::default()
    };
    let (staging, _, _) = precopy(vgpu, &options, Some(incremental.base.clone()), None)?;
    let (captured, report) = capture(vgpu, staging)?;
    let (out, summary) = write(&captured, out, Some(&incremental), None)?;
    Ok((
        out,
        Report {
            buffer_bytes: summary.buffer_bytes,
            stream_bytes: summary.stream_bytes,
            paused_bytes: captured.paused_bytes,
            ..report
        },
    ))
}

/// Restores an incoming device-state stream: a whole one as before, or an
/// incremental one merged with the migration base the destination holds.
pub fn restore_migration<R: Read>(vgpu: &Arc<Vgpu>, mut input: R) -> Result<Report, Error> {
    let mut header = [0u8; m::stream::HEADER_LEN as usize];
    let got = read_up_to(&mut input, &mut header)?;
    let version = u32::from_le_bytes([header[8], header[9], header[10], header[11]]);
    let whole = std::io::Cursor::new(header[..got].to_vec()).chain(input);
    if got < header.len() || version != m::stream::DELTA_FORMAT_VERSION {
        return restore(vgpu, whole, Continuity::Checked);
    }
    let incoming = vgpu
        .migration_base
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .incoming
        .as_ref()
        .map(|(id, file)| file.try_clone().map(|f| (*id, f)));
    let (id, mut base) = incoming
        .ok_or(Error::NoMigrationBase)?
        .map_err(Error::MigrationBase)?;
    log::info!(
        "the incoming vGPU is incremental: merging it with the migration base {:032x}",
        id.0
    );
    std::io::Seek::rewind(&mut base).map_err(Error::MigrationBase)?;
    let (reader, writer) = std::io::pipe().map_err(Error::MigrationBase)?;
    // The restore reads the merged stream on a thread of its own while
    // this one merges into the pipe.
    let target = vgpu.clone();
    let restoring = std::thread::Builder::new()
        .name("vgpu-restore".into())
        .spawn(move || {
            let reader = std::io::BufReader::with_capacity(1 << 20, reader);
            restore(&target, reader, Continuity::Checked)
        })
        .map_err(Error::MigrationBase)?;
    let merged = {
        let writer = std::io::BufWriter::with_capacity(1 << 20, writer);
        let base = std::io::BufReader::with_capacity(1 << 20, base);
        m::merge(base, whole, writer).map(|_| ())
    };
    let restored = restoring.join().unwrap_or_else(|_| {
        Err(Error::MigrationBase(std::io::Error::other(
            "the restore panicked",
        )))
    });
    match (merged, restored) {
        // The restore stopped reading (it refused the state): its reason.
        (Err(m::MergeError::Write(_)), Err(refused)) => Err(refused),
        (Err(e), _) => Err(Error::Merge(e)),
        (Ok(()), restored) => restored,
    }
}

fn read_up_to<R: Read>(input: &mut R, buf: &mut [u8]) -> Result<usize, Error> {
    let mut got = 0;
    while got < buf.len() {
        match input.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::Read(m::ReadError::Io(e))),
        }
    }
    Ok(got)
}
