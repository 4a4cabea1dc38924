//! The device-state stream of a live migration, leaning on a whole
//! checkpoint both hosts hold. The operator takes a checkpoint while the VM
//! runs (its buffers copied as the guest computes), copies it to the
//! destination and names it on both back-ends (`vgpu-ctl migration-base`);
//! at the stop the source then sends an incremental checkpoint (objects, and
//! only the buffers written since), and the destination restores it over
//! its copy (`adopt`), taking what a pre-copy restored ahead. Without a
//! base both sides do as before.

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
/// incremental one over the migration base the destination holds.
pub fn restore_migration<R: Read>(vgpu: &Arc<Vgpu>, mut input: R) -> Result<Report, Error> {
    let mut header = [0u8; m::stream::HEADER_LEN as usize];
    let got = read_up_to(&mut input, &mut header)?;
    let version = u32::from_le_bytes([header[8], header[9], header[10], header[11]]);
    let whole = std::io::Cursor::new(header[..got].to_vec()).chain(input);
    if got < header.len() || version != m::stream::DELTA_FORMAT_VERSION {
        // A whole vGPU refers to nothing kept: what was restored ahead of
        // it goes (its device memory is the guest's to use).
        let prepared = vgpu
            .migration_base
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .prepared
            .take();
        drop(prepared);
        return restore(vgpu, whole, Continuity::Checked);
    }
    let (incoming, preparing) = {
        let mut base = vgpu
            .migration_base
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let incoming = base
            .incoming
            .as_ref()
            .map(|(id, file)| file.try_clone().map(|f| (*id, f)));
        // Used once: a restore that fails drops what was prepared.
        (incoming, base.prepared.take())
    };
    let (id, base) = incoming
        .ok_or(Error::NoMigrationBase)?
        .map_err(Error::MigrationBase)?;
    log::info!(
        "the incoming vGPU is incremental: restoring it over the migration base {:032x}",
        id.0
    );
    // Waits for the restore ahead if it is still filling buffers: what it
    // filled need not come again.
    let prepared = preparing.and_then(super::ahead::Preparing::finish);
    let input = std::io::BufReader::with_capacity(1 << 20, whole);
    super::adopt::restore_incremental(vgpu, input, (id, base), prepared)
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
