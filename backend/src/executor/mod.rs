//! Compute back-ends behind one trait. Each runs a session's calls on a real
//! device; the vGPU layer above knows nothing of OpenCL or CUDA objects.

#[cfg(feature = "cuda")]
pub mod cuda;
pub mod opencl;

use vgpu_protocol::{Request, Status};

use crate::chain::GuestIo;

/// A host device that serves sessions.
pub trait Executor: Send + Sync {
    /// Human-readable device name for logs and status.
    fn describe(&self) -> String;

    /// Whether calls with this opcode are this executor's (OpenCL, CUDA).
    fn serves(&self, opcode: u32) -> bool;

    /// A new, empty session (its own handle namespace).
    fn open_session(&self) -> Box<dyn ExecSession>;
}

/// One guest process's objects on the device. Dropping it releases them all.
pub trait ExecSession: Send {
    /// Runs one call; `io` gives access to the chain's bulk data.
    fn execute(&mut self, request: &Request, io: &mut GuestIo) -> Result<Vec<u8>, Status>;

    /// Live objects per `ObjectKind::index`.
    fn object_counts(&self) -> Vec<u64>;

    /// A function that, called from another thread, unblocks anything the
    /// session may be stuck waiting on (unset user events), so a close can go
    /// through.
    fn aborter(&self) -> Box<dyn Fn() + Send + Sync>;
}
