//! Host CUDA objects behind a session's handles, released when the last
//! holder lets go. Each keeps what a snapshot needs to rebuild it: a
//! context its flags, a module its image and the globals looked up in it,
//! a function its name and the attributes set on it, streams and events
//! their flags.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use cudarc::driver::sys;
use vgpu_protocol::cuda::ImageKind;

/// A host context (one per guest context, primary or not, so a fault in one
/// VM's context cannot take down another's).
#[derive(Debug)]
pub struct HostContext {
    pub raw: sys::CUcontext,
    pub flags: u32,
}

/// A `__device__` variable whose address the guest was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Global {
    pub name: Vec<u8>,
    /// The address the guest holds.
    pub guest: u64,
    /// Where the variable is (differs from `guest` after a restore put the
    /// module elsewhere).
    pub host: u64,
    pub size: u64,
}

/// A loaded module and the image it came from.
#[derive(Debug)]
pub struct HostModule {
    pub raw: sys::CUmodule,
    pub kind: ImageKind,
    /// Kept for snapshots: PTX or a fat binary can be rebuilt for another
    /// architecture; a cubin only for the one it was built for.
    pub image: Arc<[u8]>,
    /// The code the image holds, read once at load (not in a checkpoint's
    /// pause, where a large fat binary's walk would hold the guest).
    pub archs: super::image::ImageArchs,
    /// Globals handed out.
    pub globals: Mutex<Vec<Global>>,
    /// Guest handles of the functions looked up in it (released with it).
    pub functions: Mutex<Vec<u64>>,
    pub ctx: Arc<HostContext>,
}

/// What the guest set on a function, to set again after a restore.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FunctionSettings {
    /// (attribute, value), each attribute once, in the order last set.
    pub attributes: Vec<(u32, i32)>,
    pub cache_config: Option<u32>,
}

/// A kernel and its parameter layout (offset, size) as the driver reports.
#[derive(Debug)]
pub struct HostFunction {
    pub raw: sys::CUfunction,
    pub name: Vec<u8>,
    pub params: Vec<(u32, u32)>,
    /// Bytes of the packed parameter buffer.
    pub param_len: usize,
    pub module: Arc<HostModule>,
    pub settings: Mutex<FunctionSettings>,
}

#[derive(Debug)]
pub struct HostStream {
    pub raw: sys::CUstream,
    pub flags: u32,
    pub priority: i32,
    pub ctx: Arc<HostContext>,
}

#[derive(Debug)]
pub struct HostEvent {
    pub raw: sys::CUevent,
    pub flags: u32,
    pub ctx: Arc<HostContext>,
    /// Whether it was ever recorded (a restore records it again).
    pub recorded: AtomicBool,
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
