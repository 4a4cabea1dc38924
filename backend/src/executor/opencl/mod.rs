//! The OpenCL executor: runs every call on a real OpenCL device through the
//! ICD loader (PoCL on CPUs, NVIDIA OpenCL on GPUs).

mod adopt;
mod arg_probe;
mod args;
mod bounce;
mod commands;
mod cow;
mod create;
mod guard;
mod image;
mod info;
mod launch_jobs;
mod live;
mod objects;
mod placed;
mod pragma;
mod profile;
pub mod seal;
mod session;
mod snapshot;
mod staging;
mod subdevice;
mod subdevice_state;
mod svm;

use std::sync::Arc;

use cl3::types::{cl_device_id, cl_platform_id};
use vgpu_migration::Profile;

use super::{ExecSession, Executor};

pub use session::OpenClSession;

/// Which OpenCL device to serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceSelector {
    /// The first device of the first platform that has one.
    First,
    /// `opencl:<platform-index>:<device-index>`.
    Index { platform: usize, device: usize },
    /// `opencl:<name-substring>`: the first device whose name contains it.
    Name(String),
}

impl std::fmt::Display for DeviceSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceSelector::First => write!(f, "opencl"),
            DeviceSelector::Index { platform, device } => write!(f, "opencl:{platform}:{device}"),
            DeviceSelector::Name(name) => write!(f, "opencl:{name}"),
        }
    }
}

/// Why no device could be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenClError {
    #[error("cannot load the OpenCL ICD loader (libOpenCL.so.1)")]
    NoLoader,
    #[error("OpenCL call {call} failed with {code}")]
    Call { call: &'static str, code: i32 },
    #[error("no OpenCL device matches {0}; devices found: {1}")]
    NoMatch(DeviceSelector, String),
}

/// One OpenCL device, shared by every VM this daemon serves.
#[derive(Debug)]
pub struct OpenClExecutor {
    pub platform: cl_platform_id,
    pub device: cl_device_id,
    name: String,
    /// Commands a queue may run ahead of completion (0: unbounded).
    pub queue_depth: usize,
    /// The profile new vGPUs on this device see, fixed when it was opened
    /// (or configured): never the device's live values, which may move.
    offered: Arc<Profile>,
    /// The most a vGPU moving here may have seen (`--profile`); without
    /// it, what the device itself offers.
    limit: Option<Arc<Profile>>,
}

// SAFETY: platform and device ids are immutable, thread-safe OpenCL handles.
unsafe impl Send for OpenClExecutor {}
// SAFETY: as above.
unsafe impl Sync for OpenClExecutor {}

fn info_string(bytes: Vec<u8>) -> String {
    String::from_utf8_lossy(&bytes)
        .trim_end_matches('\0')
        .to_string()
}

/// One device as found: (platform index, device index, platform, device, name).
type FoundDevice = (usize, usize, cl_platform_id, cl_device_id, String);

/// Every device of every platform.
fn all_devices() -> Result<Vec<FoundDevice>, OpenClError> {
    if !cl3::is_opencl_runtime_available() {
        return Err(OpenClError::NoLoader);
    }
    let platforms = cl3::platform::get_platform_ids().map_err(|code| OpenClError::Call {
        call: "clGetPlatformIDs",
        code,
    })?;
    let mut out = Vec::new();
    for (pi, platform) in platforms.into_iter().enumerate() {
        // A platform without devices answers CL_DEVICE_NOT_FOUND: skip it.
        let devices = cl3::device::get_device_ids(platform, cl3::device::CL_DEVICE_TYPE_ALL)
            .unwrap_or_default();
        for (di, device) in devices.into_iter().enumerate() {
            let name = cl3::device::get_device_data(device, cl3::device::CL_DEVICE_NAME)
                .map(info_string)
                .unwrap_or_default();
            out.push((pi, di, platform, device, name));
        }
    }
    Ok(out)
}

impl OpenClExecutor {
    pub fn open(selector: &DeviceSelector) -> Result<OpenClExecutor, OpenClError> {
        let devices = all_devices()?;
        let found = devices.iter().find(|(pi, di, _, _, name)| match selector {
            DeviceSelector::First => true,
            DeviceSelector::Index { platform, device } => pi == platform && di == device,
            DeviceSelector::Name(part) => name.contains(part.as_str()),
        });
        match found {
            Some((_, _, platform, device, name)) => {
                let own = profile::device_profile(*device);
                let offered = own.for_new_vgpu(None).unwrap_or(own);
                Ok(OpenClExecutor {
                    platform: *platform,
                    device: *device,
                    name: name.clone(),
                    queue_depth: 0,
                    offered: Arc::new(offered),
                    limit: None,
                })
            }
            None => {
                let list = devices
                    .iter()
                    .map(|(pi, di, _, _, name)| format!("opencl:{pi}:{di} ({name})"))
                    .collect::<Vec<_>>()
                    .join(", ");
                let list = if list.is_empty() {
                    "none".to_string()
                } else {
                    list
                };
                Err(OpenClError::NoMatch(selector.clone(), list))
            }
        }
    }

    /// Human-readable list of every device, for `--list-devices`.
    pub fn list() -> Result<Vec<String>, OpenClError> {
        Ok(all_devices()?
            .into_iter()
            .map(|(pi, di, _, _, name)| format!("opencl:{pi}:{di}\t{name}"))
            .collect())
    }
}

/// Why a profile choice does not fit the device.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("this device cannot honour it")]
    Dishonoured(#[source] vgpu_migration::Incompatible),
    #[error("invalid --memory")]
    Memory(#[source] vgpu_migration::MemorySizeError),
}

impl OpenClExecutor {
    /// Sets what new vGPUs see: `limit` (a `--profile`, which the device
    /// must honour) or the device's own profile, with the memory size
    /// `memory` (`--memory`; by default `limit`'s, or the device's default
    /// vGPU size). Restores and re-homes are then checked against `limit`.
    pub fn configure_profile(
        &mut self,
        limit: Option<Arc<Profile>>,
        memory: Option<u64>,
    ) -> Result<(), ProfileError> {
        let own = profile::device_profile(self.device);
        let offered = match &limit {
            Some(limit) => {
                vgpu_migration::check(limit, &own).map_err(ProfileError::Dishonoured)?;
                match memory {
                    Some(bytes) => limit.with_memory_size(bytes),
                    None => Ok((**limit).clone()),
                }
            }
            None => own.for_new_vgpu(memory),
        };
        self.offered = Arc::new(offered.map_err(ProfileError::Memory)?);
        self.limit = limit;
        Ok(())
    }

    fn new_session(&self) -> OpenClSession {
        let mut session = OpenClSession::new(self.platform, self.device, self.queue_depth);
        session.advertised = Some(self.offered.clone());
        session
    }
}

impl Executor for OpenClExecutor {
    fn describe(&self) -> String {
        format!("OpenCL: {}", self.name)
    }

    fn serves(&self, opcode: u32) -> bool {
        (0x1000..0x2000).contains(&opcode)
    }

    fn kind(&self) -> Option<vgpu_migration::ExecutorKind> {
        Some(vgpu_migration::ExecutorKind::OpenCl)
    }

    fn holds_profile(&self) -> bool {
        true
    }

    fn identity(&self) -> vgpu_migration::DeviceIdentity {
        profile::device_identity(self.platform, self.device)
    }

    fn profile(&self) -> Profile {
        (*self.offered).clone()
    }

    fn capacity(&self) -> Profile {
        match &self.limit {
            Some(limit) => (**limit).clone(),
            None => profile::device_profile(self.device),
        }
    }

    fn restore_session(
        &self,
        state: &vgpu_migration::ExecutorState,
    ) -> Result<super::RestoredSession, super::SnapshotError> {
        let session = self.new_session();
        Ok(session
            .restore_objects(opencl_part(state)?.newest(), &self.identity(), None)?
            .0)
    }

    fn prepare_session(
        &self,
        state: &vgpu_migration::ExecutorState,
    ) -> Result<super::PreparedSession, super::SnapshotError> {
        self.prepare(opencl_part(state)?.newest())
    }

    fn adopt_session(
        &self,
        state: &vgpu_migration::ExecutorState,
        ahead: super::PreparedSession,
    ) -> Result<super::AdoptedSession, super::SnapshotError> {
        self.adopt(opencl_part(state)?.newest(), ahead)
    }

    fn open_session(&self) -> Box<dyn ExecSession> {
        Box::new(self.new_session())
    }
}

/// The OpenCL part of a session, or why it is not one.
fn opencl_part(
    state: &vgpu_migration::ExecutorState,
) -> Result<&vgpu_migration::OpenClState, super::SnapshotError> {
    match state {
        vgpu_migration::ExecutorState::OpenCl(state) => Ok(state),
        other => Err(super::SnapshotError::WrongKind {
            given: other.kind(),
            here: vgpu_migration::ExecutorKind::OpenCl,
        }),
    }
}
