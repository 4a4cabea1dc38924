//! Profiler control (`cuProfilerStart`, `cuProfilerStop`). They only bound
//! the region a profiler attached to the process records; with none
//! attached the driver answers success, and programs (the CUDA samples'
//! `matrixMul`, `asyncAPI`) stop when it does not. No profiler can attach
//! to the guest's process through vgpu (the work runs in the backend), so
//! here they are what they are natively without one.

use crate::runtime::require_context;

crate::ffi::entry! {
    /// Starts profiling: nothing to start, a context is all it needs.
    fn cuProfilerStart() {
        require_context().map(drop)
    }
}

crate::ffi::entry! {
    /// Stops profiling: as `cuProfilerStart`.
    fn cuProfilerStop() {
        require_context().map(drop)
    }
}
