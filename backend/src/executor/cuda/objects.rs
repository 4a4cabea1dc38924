//! Host CUDA objects behind a session's handles, released when the last
//! holder lets go. Each keeps what a snapshot needs to rebuild it: a module
//! its image, a function its name and parameter layout. Fields only a
//! snapshot reads are marked so until `migration/` serializes them.

use std::sync::Arc;

use cudarc::driver::sys;
use vgpu_protocol::cuda::ImageKind;

/// A host context (one per guest context, primary or not, so a fault in one
/// VM's context cannot take down another's).
#[derive(Debug)]
#[allow(dead_code)] // snapshot state
pub struct HostContext {
    pub raw: sys::CUcontext,
    pub flags: u32,
}

/// A loaded module and the image it came from.
#[derive(Debug)]
#[allow(dead_code)] // snapshot state
pub struct HostModule {
    pub raw: sys::CUmodule,
    pub kind: ImageKind,
    /// Kept for snapshots: PTX or a fat binary can be rebuilt for another
    /// architecture; a cubin only for the one it was built for.
    pub image: Arc<[u8]>,
    /// Device ranges of globals handed out (start, length).
    pub globals: std::sync::Mutex<Vec<(u64, u64)>>,
    /// Guest handles of the functions looked up in it (released with it).
    pub functions: std::sync::Mutex<Vec<u64>>,
    pub ctx: Arc<HostContext>,
}

/// A kernel and its parameter layout (offset, size) as the driver reports.
#[derive(Debug)]
#[allow(dead_code)] // snapshot state
pub struct HostFunction {
    pub raw: sys::CUfunction,
    pub name: Vec<u8>,
    pub params: Vec<(u32, u32)>,
    /// Bytes of the packed parameter buffer.
    pub param_len: usize,
    pub module: Arc<HostModule>,
}

#[derive(Debug)]
#[allow(dead_code)] // snapshot state
pub struct HostStream {
    pub raw: sys::CUstream,
    pub flags: u32,
    pub priority: i32,
    pub ctx: Arc<HostContext>,
}

#[derive(Debug)]
#[allow(dead_code)] // snapshot state
pub struct HostEvent {
    pub raw: sys::CUevent,
    pub flags: u32,
    pub ctx: Arc<HostContext>,
}

macro_rules! thread_safe {
    ($($name:ident),*) => {$(
        // SAFETY: CUDA driver handles may be used from any thread; the
        // owning session serializes its calls.
        unsafe impl Send for $name {}
        // SAFETY: as above.
        unsafe impl Sync for $name {}
    )*};
}
thread_safe!(HostContext, HostModule, HostFunction, HostStream, HostEvent);

impl Drop for HostContext {
    fn drop(&mut self) {
        // SAFETY: this wrapper owns the context; everything created in it
        // holds an `Arc` to it, so nothing of it is left.
        if unsafe { sys::cuCtxDestroy_v2(self.raw) } as i32 != 0 {
            log::warn!("cuCtxDestroy failed");
        }
    }
}

impl Drop for HostModule {
    fn drop(&mut self) {
        // SAFETY: functions hold the module, so none is left; the context
        // is alive (held by `ctx`).
        unsafe { sys::cuModuleUnload(self.raw) };
    }
}

impl Drop for HostStream {
    fn drop(&mut self) {
        // SAFETY: this wrapper owns the stream; the context is alive.
        unsafe { sys::cuStreamDestroy_v2(self.raw) };
    }
}

impl Drop for HostEvent {
    fn drop(&mut self) {
        // SAFETY: this wrapper owns the event; the context is alive.
        unsafe { sys::cuEventDestroy_v2(self.raw) };
    }
}
