//! `libvgpu_cuda.so`: the CUDA driver API for guests. Installed as
//! `libcuda.so.1` in a VM (or put first on `LD_LIBRARY_PATH` on a host with
//! `VGPU_SOCKET` set: the loopback transport), it turns every driver-API call
//! into a vgpu protocol message. Calls whose result the application does not
//! need at once (launches, copies to the device, creations with handles the
//! library chooses) are batched; their errors surface at the next
//! synchronizing call, as CUDA's own asynchronous errors do.
//!
//! - `ffi`: C types and the panic-catching entry-point macro;
//! - `runtime`: the session, the caches and the per-thread context stack;
//! - `image`: how long a module image is, given only its address;
//! - `order`: the order and progress of stream work (vector clocks), which
//!   answers queries locally and says which asynchronous copies landed;
//! - `function_answers`: function attributes and occupancy, asked once;
//! - `heap`: page-locked allocations in the transport's shared heap;
//! - `mapped`: mapped host memory and the device memory standing for it;
//! - `trace`: per-call counts and times (`VGPU_CUDA_TRACE`), for profiling;
//! - `api/`: one file per area of the driver API.

pub mod api;
pub mod device_output;
pub mod ffi;
pub mod function_answers;
pub use vgpu_transport::heap;
pub mod image;
pub mod mapped;
pub mod order;
pub mod pools;
pub mod runtime;
pub mod trace;
