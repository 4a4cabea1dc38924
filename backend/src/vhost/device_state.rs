//! Live migration: the vhost-user DEVICE_STATE transfer. QEMU hands a pipe
//! (`SET_DEVICE_STATE_FD`) once the VM is stopped and the vrings drained;
//! the vGPU's state and buffer contents stream through it on a thread of
//! their own (the control thread must keep answering QEMU), and
//! `CHECK_DEVICE_STATE` reports how it went. On the destination the same
//! stream rebuilds the vGPU on this host's device, after a compatibility
//! check; a refusal fails the migration and the source VM runs on.

use std::io;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use vhost::vhost_user::message::VhostTransferStateDirection;

use crate::startup::error_chain;
use crate::vgpu::Vgpu;

/// Pipe capacity asked for during a transfer (the system's limit applies).
const PIPE_SIZE: libc::c_int = 1 << 20;

/// The transfer thread of the migration in progress, if any.
#[derive(Default)]
pub struct Transfer(Mutex<Option<JoinHandle<Result<String, String>>>>);

pub fn start_transfer(
    vgpu: &Arc<Vgpu>,
    transfer: &Transfer,
    direction: VhostTransferStateDirection,
    file: std::fs::File,
) -> io::Result<()> {
    let mut slot = transfer.0.lock().unwrap_or_else(|e| e.into_inner());
    if slot.as_ref().is_some_and(|t| !t.is_finished()) {
        return Err(io::Error::other(
            "a device-state transfer is already running",
        ));
    }
    let vgpu = vgpu.clone();
    // A bigger pipe means fewer switches between the backend and QEMU for
    // hundreds of MiB of buffer contents (the default holds 64 KiB).
    // SAFETY: fcntl on a descriptor this function owns; failure is harmless.
    unsafe {
        libc::fcntl(
            std::os::fd::AsRawFd::as_raw_fd(&file),
            libc::F_SETPIPE_SZ,
            PIPE_SIZE,
        )
    };
    let thread = std::thread::Builder::new().name("vgpu-device-state".into());
    let handle = match direction {
        VhostTransferStateDirection::SAVE => thread.spawn(move || {
            let started = std::time::Instant::now();
            let writer = io::BufWriter::with_capacity(1 << 20, file);
            crate::persist::save_for_migration(&vgpu, writer)
                .map_err(|e| error_chain(&e))
                .and_then(|(mut w, report)| {
                    io::Write::flush(&mut w).map_err(|e| e.to_string())?;
                    vgpu.metrics().migrations_out.note(started.elapsed());
                    Ok(format!(
                        "sent {} session(s), {} bytes ({} of buffers), drain {:?}, in {} ms",
                        report.sessions,
                        report.stream_bytes,
                        report.buffer_bytes,
                        report.drain,
                        started.elapsed().as_millis()
                    ))
                })
        })?,
        VhostTransferStateDirection::LOAD => thread.spawn(move || {
            let started = std::time::Instant::now();
            let mut reader = io::BufReader::with_capacity(1 << 20, file);
            match crate::persist::restore_migration(&vgpu, &mut reader) {
                Ok(report) => Ok({
                    vgpu.metrics().migrations_in.note(started.elapsed());
                    format!(
                        "received {} session(s), {} bytes ({} of buffers), rebuilt in {:?}, in {} ms",
                        report.sessions,
                        report.stream_bytes,
                        report.buffer_bytes,
                        report.rebuild,
                        started.elapsed().as_millis()
                    )
                }),
                Err(e) => {
                    let why = error_chain(&e);
                    // Said here: QEMU may never ask CHECK_DEVICE_STATE.
                    log::error!("refusing the incoming vGPU: {why}");
                    // Take the rest of the stream, so QEMU's sender does not
                    // fail on a closed pipe before it can ask for the result.
                    let _ = io::copy(&mut reader, &mut io::sink());
                    Err(why)
                }
            }
        })?,
    };
    *slot = Some(handle);
    Ok(())
}

pub fn finish_transfer(transfer: &Transfer) -> io::Result<()> {
    let handle = transfer.0.lock().unwrap_or_else(|e| e.into_inner()).take();
    let Some(handle) = handle else {
        return Err(io::Error::other("no device-state transfer was started"));
    };
    match handle.join() {
        Ok(Ok(summary)) => {
            log::info!("device state: {summary}");
            Ok(())
        }
        Ok(Err(e)) => {
            log::error!("device-state transfer failed: {e}");
            Err(io::Error::other(e))
        }
        Err(_) => Err(io::Error::other(
            "the device-state transfer thread panicked",
        )),
    }
}
