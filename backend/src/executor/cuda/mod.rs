//! The CUDA executor: runs the guest's driver-API calls on one host GPU
//! through cudarc's dynamically loaded driver bindings. A host without
//! libcuda (or without the device asked for) gets an error from
//! [`CudaExecutor::open`], never a panic, and simply offers no CUDA.
//!
//! Sessions are saved and restored through the state model of `migration/`
//! (`snapshot.rs`): allocations keep their addresses, modules their image,
//! functions their name and settings, streams and events their flags.

mod account;
mod device_output;
mod driver;
mod guest_pins;
mod image;
mod info;
mod launch;
mod launcher;
mod library;
mod limits;
mod live;
mod memory;
mod objects;
mod peer_staging;
mod pinned;
mod probe;
mod readback;
mod session;
mod shadow;
mod signalled;
mod snapshot;
mod sync;
mod transfer;

use std::sync::Arc;

use cudarc::driver::sys;
use vgpu_protocol::cuda::{CuDeviceInfoReply, OPCODES};

use super::{ExecSession, Executor};
pub use driver::DriverError;
use memory::Arena;
pub use session::CudaSession;

/// Why the CUDA device cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    #[error("CUDA driver unusable")]
    Driver(#[from] DriverError),
    #[error("no CUDA device {index}: the host has {count}")]
    NoDevice { index: u32, count: i32 },
}

/// What every session of the device shares.
pub struct DeviceShared {
    pub device: sys::CUdevice,
    pub info: CuDeviceInfoReply,
    pub driver_version: u32,
    pub arena: Arc<Arena>,
    /// Retained for the executor's lifetime: current while sessions release
    /// memory with no context of their own left.
    pub primary: sys::CUcontext,
    /// The VM's guest memory registered with the driver, if any
    /// (`guest_pins.rs`), and the largest region registered.
    pub guest_pins: std::sync::Mutex<Option<guest_pins::GuestPins>>,
    pub pin_limit: std::sync::atomic::AtomicU64,
    /// Bytes of device memory held by checkpoint copies (`shadow.rs`).
    pub shadow_bytes: std::sync::atomic::AtomicU64,
}

// SAFETY: the device ordinal and the primary context are driver handles
// usable from any thread; the rest is plain data or thread-safe.
unsafe impl Send for DeviceShared {}
// SAFETY: as above.
unsafe impl Sync for DeviceShared {}

/// One CUDA device, shared by every VM this daemon serves.
pub struct CudaExecutor {
    index: u32,
    shared: Arc<DeviceShared>,
}

impl CudaExecutor {
    /// Opens host device `index` (`--device cuda:<index>`).
    pub fn open(index: u32) -> Result<CudaExecutor, CudaError> {
        driver::load()?;
        // SAFETY: `load` checked that the library and every symbol exist.
        driver::check_call("cuInit", unsafe { sys::cuInit(0) })?;
        let mut count = 0;
        // SAFETY: `count` is valid for writes.
        driver::check_call("cuDeviceGetCount", unsafe {
            sys::cuDeviceGetCount(&mut count)
        })?;
        if i64::from(index) >= i64::from(count) {
            return Err(CudaError::NoDevice { index, count });
        }
        let mut device = 0;
        // SAFETY: `device` is valid for writes; the ordinal is in range.
        driver::check_call("cuDeviceGet", unsafe {
            sys::cuDeviceGet(&mut device, index as i32)
        })?;
        let mut version = 0;
        // SAFETY: `version` is valid for writes.
        driver::check_call("cuDriverGetVersion", unsafe {
            sys::cuDriverGetVersion(&mut version)
        })?;
        let mut primary = std::ptr::null_mut();
        // SAFETY: `primary` is valid for writes; released in `Drop`.
        driver::check_call("cuDevicePrimaryCtxRetain", unsafe {
            sys::cuDevicePrimaryCtxRetain(&mut primary, device)
        })?;
        let opened = (|| {
            // SAFETY: `primary` was just retained.
            driver::check_call("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(primary) })?;
            let arena = Arena::reserve(device)?;
            let info = info::device_info(device)?;
            Ok::<_, DriverError>((arena, info))
        })();
        let (arena, info) = match opened {
            Ok(parts) => parts,
            Err(e) => {
                // SAFETY: retained above, released once.
                unsafe { sys::cuDevicePrimaryCtxRelease_v2(device) };
                return Err(e.into());
            }
        };
        Ok(CudaExecutor {
            index,
            shared: Arc::new(DeviceShared {
                device,
                info,
                driver_version: u32::try_from(version).unwrap_or(0),
                arena: Arc::new(arena),
                primary,
                guest_pins: std::sync::Mutex::new(None),
                pin_limit: std::sync::atomic::AtomicU64::new(0),
                shadow_bytes: std::sync::atomic::AtomicU64::new(0),
            }),
        })
    }
}

impl CudaExecutor {
    /// Registers guest memory regions of at most `limit` bytes with the
    /// driver when a front-end maps them (`--cuda-pin-guest-memory`; 0:
    /// none).
    pub fn set_pin_limit(&self, limit: u64) {
        self.shared
            .pin_limit
            .store(limit, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Drop for DeviceShared {
    fn drop(&mut self) {
        // Unregistered while the primary context is still retained.
        drop(self.guest_pins.get_mut().map(Option::take));
        // SAFETY: retained in `open`, released once; sessions hold `Arc`s
        // to this, so none is left.
        unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.device) };
    }
}

impl Executor for CudaExecutor {
    fn describe(&self) -> String {
        format!(
            "CUDA: cuda:{} {}",
            self.index,
            String::from_utf8_lossy(&self.shared.info.name)
        )
    }

    fn serves(&self, opcode: u32) -> bool {
        OPCODES.contains(&opcode)
    }

    fn open_session(&self) -> Box<dyn ExecSession> {
        Box::new(CudaSession::new(self.shared.clone()))
    }

    fn kind(&self) -> Option<vgpu_migration::ExecutorKind> {
        Some(vgpu_migration::ExecutorKind::Cuda)
    }

    /// Registers the new mapping's regions (the old registration goes
    /// first: a region kept across the change has the same address, which
    /// the driver will not register twice).
    fn map_guest_memory(&self, mem: &Arc<crate::chain::GuestRam>) {
        let limit = self
            .shared
            .pin_limit
            .load(std::sync::atomic::Ordering::Relaxed);
        let mut pins = self
            .shared
            .guest_pins
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        drop(pins.take());
        if limit > 0 {
            *pins = Some(guest_pins::GuestPins::register(
                mem.clone(),
                limit,
                self.shared.primary,
            ));
        }
    }

    /// Rebuilds a session's CUDA objects.
    fn restore_session(
        &self,
        state: &vgpu_migration::ExecutorState,
    ) -> Result<super::RestoredSession, super::SnapshotError> {
        let vgpu_migration::ExecutorState::Cuda(state) = state else {
            return Err(super::SnapshotError::WrongKind {
                given: state.kind(),
                here: vgpu_migration::ExecutorKind::Cuda,
            });
        };
        snapshot::restore(self.shared.clone(), state.newest())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opening_without_a_gpu_is_an_error_not_a_panic() {
        match CudaExecutor::open(0) {
            Ok(executor) => {
                assert!(executor.serves(0x2040));
                assert!(!executor.serves(0x1037));
            }
            Err(e) => println!("skipped: no CUDA device ({e})"),
        }
        assert!(matches!(
            CudaExecutor::open(u32::MAX),
            Err(CudaError::NoDevice { .. } | CudaError::Driver(_))
        ));
    }
}
