//! The device: the backend's device, or one of its sub-devices, as the
//! application sees it. Values come from the backend once and are cached; a
//! few are rewritten so the device describes what this library forwards
//! (coarse-grained SVM only, no pipes) and so the name shows the layering.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use opencl_sys::*;
use vgpu_protocol::messages::GetInfo;
use vgpu_protocol::InfoTarget;

use crate::core::info::{self, c_string};
use crate::core::object::{kind, Cl, ClResult};
use crate::core::platform;
use vgpu_protocol::ObjectKind;

// The root device has handle 0, which is never released.
kind!(Device, CL_INVALID_DEVICE, Some(ObjectKind::Device));

pub struct Device {
    /// The backend's name for it: 0 for the root device.
    handle: u64,
    /// For a sub-device: the device it was partitioned from.
    pub parent: Option<Arc<Cl<Device>>>,
    cache: Mutex<HashMap<cl_device_info, ClResult<Vec<u8>>>>,
    name: OnceLock<String>,
    /// `CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS` and `_SIZES` as numbers, which
    /// every kernel launch checks: no lookup, no allocation.
    max_dims: OnceLock<u64>,
    max_sizes: OnceLock<[u64; 3]>,
}

/// Host-API extensions this library does not forward; hidden from
/// `CL_DEVICE_EXTENSIONS` (compiler extensions pass through unchanged).
const HIDDEN_EXTENSIONS: &[&str] = &[
    "cl_khr_icd",
    "cl_khr_gl_",
    "cl_khr_egl_",
    "cl_khr_d3d",
    "cl_khr_dx9",
    "cl_khr_command_buffer",
    "cl_khr_external_",
    "cl_khr_semaphore",
    "cl_khr_image2d_from_buffer",
    "cl_khr_mipmap_image",
    "cl_khr_subgroups",
    "cl_khr_create_command_queue",
    "cl_khr_priority_hints",
    "cl_khr_throttle_hints",
    "cl_khr_terminate_context",
    "cl_khr_initialize_memory",
    "cl_khr_suggested_local_work_size",
    "cl_khr_device_enqueue_local_arg_types",
    "cl_ext_device_fission",
    "cl_ext_buffer_device_address",
    "cl_intel_unified_shared_memory",
    "cl_arm_import_memory",
    "cl_arm_shared_virtual_memory",
    "cl_pocl_",
];

/// OpenCL C features that need host-API support this library lacks.
const HIDDEN_FEATURES: &[&str] = &["__opencl_c_pipes", "__opencl_c_device_enqueue"];

/// Parameters answered as zero: pipes and device-side queues are not
/// forwarded.
const ZERO_PARAMS: &[cl_device_info] = &[
    CL_DEVICE_PIPE_SUPPORT,
    CL_DEVICE_MAX_PIPE_ARGS,
    CL_DEVICE_PIPE_MAX_ACTIVE_RESERVATIONS,
    CL_DEVICE_PIPE_MAX_PACKET_SIZE,
    CL_DEVICE_DEVICE_ENQUEUE_CAPABILITIES,
    CL_DEVICE_QUEUE_ON_DEVICE_PROPERTIES,
    CL_DEVICE_QUEUE_ON_DEVICE_PREFERRED_SIZE,
    CL_DEVICE_QUEUE_ON_DEVICE_MAX_SIZE,
    CL_DEVICE_MAX_ON_DEVICE_QUEUES,
    CL_DEVICE_MAX_ON_DEVICE_EVENTS,
];

impl Device {
    /// The root device.
    pub fn new() -> Device {
        Device {
            handle: 0,
            parent: None,
            cache: Mutex::new(HashMap::new()),
            name: OnceLock::new(),
            max_dims: OnceLock::new(),
            max_sizes: OnceLock::new(),
        }
    }

    /// A sub-device the backend created under `handle`.
    pub fn sub(handle: u64, parent: Arc<Cl<Device>>) -> Device {
        Device {
            handle,
            parent: Some(parent),
            cache: Mutex::new(HashMap::new()),
            name: OnceLock::new(),
            max_dims: OnceLock::new(),
            max_sizes: OnceLock::new(),
        }
    }

    /// The backend's name for the device (0: the root device).
    pub fn remote_handle(&self) -> u64 {
        self.handle
    }

    pub fn is_root(&self) -> bool {
        self.parent.is_none()
    }

    /// The backend's answer for `param`, cached.
    fn remote(&self, param: cl_device_info) -> ClResult<Vec<u8>> {
        if let Some(answer) = self.lock().get(&param) {
            return answer.clone();
        }
        let client = platform::client()?;
        let request = GetInfo {
            target: InfoTarget::Device as u32,
            handle: self.handle,
            index: 0,
            param,
        };
        let answer = client.call(request.into()).map_err(|status| status.0);
        self.lock().insert(param, answer.clone());
        answer
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<cl_device_info, ClResult<Vec<u8>>>> {
        // The cache only ever gains complete entries.
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `clGetDeviceInfo` for every parameter that is not a handle.
    pub fn info(&self, param: cl_device_info) -> ClResult<Vec<u8>> {
        if ZERO_PARAMS.contains(&param) {
            // Keep the backing value's width (cl_bool, cl_uint, size_t or
            // bitfield); fall back to a size_t when the backend has none.
            let width = self.remote(param).map_or(8, |v| v.len().clamp(1, 8));
            return Ok(vec![0; width]);
        }
        match param {
            CL_DEVICE_NAME => Ok(info::string(&self.name())),
            // Native kernels (host function pointers) cannot be forwarded.
            CL_DEVICE_EXECUTION_CAPABILITIES => {
                let caps = info::le_number(&self.remote(param)?) & !CL_EXEC_NATIVE_KERNEL;
                Ok(info::u64(caps))
            }
            // Coarse-grained buffer SVM only, where the device has it.
            CL_DEVICE_SVM_CAPABILITIES => {
                let caps = self.remote(param).map_or(0, |v| {
                    info::le_number(&v) & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER
                });
                Ok(info::u64(caps))
            }
            CL_DEVICE_BUILT_IN_KERNELS => Ok(info::string("")),
            CL_DEVICE_BUILT_IN_KERNELS_WITH_VERSION => Ok(Vec::new()),
            CL_DEVICE_EXTENSIONS => {
                let all = c_string(&self.remote(param)?);
                let kept: Vec<&str> = all.split_whitespace().filter(|e| !hidden(e)).collect();
                Ok(info::string(&kept.join(" ")))
            }
            CL_DEVICE_EXTENSIONS_WITH_VERSION => {
                Ok(info::filter_name_versions(&self.remote(param)?, hidden))
            }
            CL_DEVICE_OPENCL_C_FEATURES => {
                Ok(info::filter_name_versions(&self.remote(param)?, |f| {
                    HIDDEN_FEATURES.contains(&f)
                }))
            }
            _ => self.remote(param),
        }
    }

    /// "vgpu: <backing device> (<backing platform>)".
    pub fn name(&self) -> String {
        self.name.get_or_init(|| self.compose_name()).clone()
    }

    fn compose_name(&self) -> String {
        let device = self
            .remote(CL_DEVICE_NAME)
            .map_or_else(|_| "unknown".into(), |v| c_string(&v));
        let platform = platform::client().map_or_else(
            |_| "unknown platform".into(),
            platform::backing_platform_name,
        );
        format!("vgpu: {device} ({platform})")
    }

    /// A `cl_ulong` / `size_t` / `cl_uint` / `cl_bool` parameter as `u64`.
    pub fn number(&self, param: cl_device_info) -> ClResult<u64> {
        self.info(param).map(|bytes| info::le_number(&bytes))
    }

    /// A `size_t[]` parameter.
    /// `CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS` (at most 3), asked of the
    /// backend on first use.
    pub fn max_work_item_dims(&self) -> ClResult<u64> {
        if let Some(dims) = self.max_dims.get() {
            return Ok(*dims);
        }
        let dims = self.number(CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS)?.min(3);
        Ok(*self.max_dims.get_or_init(|| dims))
    }

    /// `CL_DEVICE_MAX_WORK_ITEM_SIZES` (`u64::MAX` where the device gives
    /// no size), asked of the backend on first use.
    pub fn max_work_item_sizes(&self) -> ClResult<[u64; 3]> {
        if let Some(sizes) = self.max_sizes.get() {
            return Ok(*sizes);
        }
        let mut max_sizes = [u64::MAX; 3];
        for (m, s) in max_sizes
            .iter_mut()
            .zip(self.sizes(CL_DEVICE_MAX_WORK_ITEM_SIZES)?)
        {
            *m = s;
        }
        Ok(*self.max_sizes.get_or_init(|| max_sizes))
    }

    pub fn sizes(&self, param: cl_device_info) -> ClResult<Vec<u64>> {
        let bytes = self.info(param)?;
        Ok(bytes.chunks_exact(8).map(info::le_number).collect())
    }
}

impl Default for Device {
    fn default() -> Self {
        Device::new()
    }
}

fn hidden(extension: &str) -> bool {
    HIDDEN_EXTENSIONS.iter().any(|h| extension.starts_with(h))
}
