//! The device the probe computes on once confined: an OpenCL device (its
//! kernel built from source by the driver's compiler) or a CUDA device (a
//! PTX kernel JIT-compiled by the driver).

use super::kernel;
use crate::config::DeviceSpec;
use crate::executor::opencl::OpenClExecutor;
use crate::executor::Executor;
use crate::startup::error_chain;

/// An opened device.
pub enum Device {
    OpenCl(OpenClExecutor),
    #[cfg(feature = "cuda")]
    Cuda(crate::executor::cuda::CudaExecutor),
}

impl Device {
    /// Opens `spec` as a worker opens its device.
    pub fn open(spec: &DeviceSpec) -> Result<Device, String> {
        match spec {
            DeviceSpec::OpenCl(selector) => OpenClExecutor::open(selector)
                .map(Device::OpenCl)
                .map_err(|e| error_chain(&e)),
            #[cfg(feature = "cuda")]
            DeviceSpec::Cuda(index) => crate::executor::cuda::CudaExecutor::open(*index)
                .map(Device::Cuda)
                .map_err(|e| error_chain(&e)),
            #[cfg(not(feature = "cuda"))]
            DeviceSpec::Cuda(_) => Err("built without the cuda feature".to_string()),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Device::OpenCl(executor) => executor.describe(),
            #[cfg(feature = "cuda")]
            Device::Cuda(executor) => executor.describe(),
        }
    }

    /// Builds and runs the probe's kernel; the elements checked.
    pub fn compute(&self) -> Result<usize, String> {
        match self {
            Device::OpenCl(executor) => kernel::run(executor.device),
            #[cfg(feature = "cuda")]
            Device::Cuda(executor) => executor.probe_workload(),
        }
    }
}
