//! Synchronous copies between the device and page-locked guest memory
//! that answer before the copy ends (`CuMemcpy*Signalled`). A synchronous
//! copy's round trip used to wrap the whole DMA: the answer left only
//! after it, and the guest heard of it a round trip's second half later.
//! Here the copy runs in its stream's time and the device itself then
//! writes a word the guest watches in its own page-locked memory
//! (`cuStreamWriteValue32`, which by default fences the copy's writes
//! before its own), so the guest sees the end of the DMA as a native
//! program's driver does. Where that cannot be done (memory not
//! registered, as after a restore; a driver without stream memory
//! operations) the copy completes before the answer, which says so.

use std::ffi::c_void;
use std::sync::OnceLock;

use cudarc::driver::sys;
use vgpu_protocol::cuda::CuSignalledCopyReply;
use vgpu_protocol::messages::{
    CuMemcpyDtoH, CuMemcpyDtoHSignalled, CuMemcpyHtoD, CuMemcpyHtoDSignalled,
};
use vgpu_protocol::{Status, Wire};

use super::driver::check;
use super::session::CudaSession;
use crate::awaited_signal::AwaitedSignal;
use crate::chain::GuestIo;
use crate::guest_ranges::maps_host_range;

/// Whether the driver has the two entry points signals need (looked up
/// once: cudarc panics on a missing symbol, so neither is called without).
fn driver_can_signal() -> bool {
    static CAN: OnceLock<bool> = OnceLock::new();
    *CAN.get_or_init(|| {
        // SAFETY: the executor only exists once `driver::load` found the
        // library, so `culib` loads it; the symbols are only looked up.
        let lib = unsafe { sys::culib() };
        [
            &b"cuStreamWriteValue32_v2"[..],
            b"cuMemHostGetDevicePointer_v2",
        ]
        .iter()
        // SAFETY: as above.
        .all(|name| unsafe { lib.get::<unsafe extern "C" fn()>(*name) }.is_ok())
    })
}

impl CudaSession {
    pub(super) fn copy_from_device_signalled(
        &mut self,
        m: &CuMemcpyDtoHSignalled,
        io: &mut GuestIo,
    ) -> Result<Vec<u8>, Status> {
        let signal = self.signal_target(m.signal_block, m.signal_offset);
        let mem = io.mem.clone();
        let copy = CuMemcpyDtoH {
            ctx: m.ctx,
            stream: m.stream,
            src: m.src,
            data: m.data,
        };
        let running = self.copy_from_device_in(&copy, io, signal.is_some())?;
        self.signal_or_wait(m.ctx, m.stream, running, signal, m.value, mem)
    }

    pub(super) fn copy_to_device_signalled(
        &mut self,
        m: &CuMemcpyHtoDSignalled,
        io: &GuestIo,
    ) -> Result<Vec<u8>, Status> {
        let signal = self.signal_target(m.signal_block, m.signal_offset);
        let copy = CuMemcpyHtoD {
            ctx: m.ctx,
            stream: m.stream,
            dst: m.dst,
            data: m.data,
        };
        let running = self.copy_to_device_in(&copy, io, signal.is_some())?;
        self.signal_or_wait(m.ctx, m.stream, running, signal, m.value, io.mem.clone())
    }

    /// The host and device addresses of the guest's signal word, where the
    /// device can write it: in registered memory, with a driver that can.
    fn signal_target(&self, block: u64, offset: u64) -> Option<(usize, sys::CUdeviceptr)> {
        if !driver_can_signal() {
            return None;
        }
        let host = self.pinned.word_in_block(block, offset)?;
        let mut device: sys::CUdeviceptr = 0;
        // SAFETY: `device` is valid for writes; `host` lies in memory
        // registered with the driver (a driver that does not map it says so).
        let code =
            unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, host as *mut c_void, 0) };
        check(code).ok().map(|()| (host, device))
    }

    /// Queues the signal after a copy still running, or waits for the copy
    /// where no signal can be queued; the reply says which.
    fn signal_or_wait(
        &mut self,
        ctx: u64,
        stream: u64,
        running: bool,
        signal: Option<(usize, sys::CUdeviceptr)>,
        value: u32,
        mem: Option<std::sync::Arc<crate::chain::GuestRam>>,
    ) -> Result<Vec<u8>, Status> {
        let landed = |landed: bool| {
            Ok(CuSignalledCopyReply {
                landed: u32::from(landed),
            }
            .to_bytes())
        };
        if !running {
            return landed(true);
        }
        let raw = self.stream(ctx, stream)?;
        if let Some((host, device)) = signal {
            // SAFETY: `raw` is a live stream of the current context (or the
            // NULL stream); `device` is the device view of a registered
            // guest word (`signal_target`). Flags 0: the write waits for
            // the stream's earlier work and fences its memory writes.
            let code = unsafe { sys::cuStreamWriteValue32_v2(raw, device, value, 0) };
            if check(code).is_ok() {
                if let Some(mem) = mem.filter(|mem| maps_host_range(mem, host, 4)) {
                    // SAFETY: `host` is 4-aligned (`word_in_block`) and its
                    // 4 bytes lie in a region of `mem` (checked above).
                    unsafe { AwaitedSignal::note(mem, host, value) };
                }
                return landed(false);
            }
        }
        // SAFETY: `raw` is a live stream of the current context.
        check(unsafe { sys::cuStreamSynchronize(raw) })?;
        landed(true)
    }
}
