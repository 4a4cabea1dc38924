//! `GetInfo`: the `clGet*Info` queries, passed through as raw bytes. Values
//! that are host handles or pointers never leave the backend: the guest
//! library answers those itself; reference counts are the guest's own.

use vgpu_protocol::messages::GetInfo;
use vgpu_protocol::{InfoTarget, Status};

use super::session::OpenClSession;
use crate::handles::HandleTable;

/// Parameters whose values are host handles or host pointers.
const HANDLE_VALUED: &[u32] = &[
    0x1031, // CL_DEVICE_PLATFORM
    0x1042, // CL_DEVICE_PARENT_DEVICE
    0x1081, // CL_CONTEXT_DEVICES
    0x1082, // CL_CONTEXT_PROPERTIES
    0x1090, // CL_QUEUE_CONTEXT
    0x1091, // CL_QUEUE_DEVICE
    0x1095, // CL_QUEUE_DEVICE_DEFAULT
    0x1103, // CL_MEM_HOST_PTR
    0x1106, // CL_MEM_CONTEXT
    0x1107, // CL_MEM_ASSOCIATED_MEMOBJECT
    0x1161, // CL_PROGRAM_CONTEXT
    0x1163, // CL_PROGRAM_DEVICES
    0x1193, // CL_KERNEL_CONTEXT
    0x1194, // CL_KERNEL_PROGRAM
    0x11D0, // CL_EVENT_COMMAND_QUEUE
    0x11D4, // CL_EVENT_CONTEXT
];

const QUEUE_REFERENCE_COUNT: u32 = 0x1092;
const MEM_FLAGS: u32 = 0x1101;
const MEM_REFERENCE_COUNT: u32 = 0x1105;
const PROGRAM_REFERENCE_COUNT: u32 = 0x1160;
const PROGRAM_BINARY_SIZES: u32 = 0x1165;
const PROGRAM_BINARIES: u32 = 0x1166;
const PROGRAM_BUILD_OPTIONS: u32 = 0x1182;
const PROGRAM_BUILD_LOG: u32 = 0x1183;
const CONTEXT_REFERENCE_COUNT: u32 = 0x1080;
const KERNEL_REFERENCE_COUNT: u32 = 0x1192;
const EVENT_REFERENCE_COUNT: u32 = 0x11D2;

fn ref_count<T>(table: &HandleTable<T>, handle: u64) -> Result<Vec<u8>, Status> {
    Ok(table.ref_count(handle)?.to_le_bytes().to_vec())
}

/// A device-info value as an advertised profile gives it, for the
/// parameters the profile holds.
fn advertised_value(profile: &vgpu_migration::Profile, param: u32) -> Option<Vec<u8>> {
    let size = |v: u64| v.to_le_bytes().to_vec();
    let uint = |v: u32| v.to_le_bytes().to_vec();
    Some(match param {
        0x1003 => uint(profile.max_work_item_dimensions),
        0x1004 => size(profile.max_work_group_size),
        0x1005 => profile
            .max_work_item_sizes
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        0x1010 => size(profile.max_mem_alloc_size),
        0x1017 => size(profile.max_parameter_size),
        0x1019 => uint(profile.mem_base_addr_align),
        0x101F => size(profile.global_mem_size),
        0x1020 => size(profile.max_constant_buffer_size),
        0x1023 => size(profile.local_mem_size),
        0x1016 => uint(profile.image_support as u32),
        // Partitioning: the schemes the profile offers; the device's own
        // limits where it offers any.
        0x1044 if profile.partition_properties.is_empty() => size(0),
        0x1044 => profile
            .partition_properties
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        0x1043 if profile.partition_properties.is_empty() => uint(0),
        0x1045 if !profile.partition_properties.contains(&0x1088) => size(0),
        0x1030 => {
            let mut text = profile.extensions.join(" ").into_bytes();
            text.push(0);
            text
        }
        _ => return None,
    })
}

impl OpenClSession {
    pub(super) fn get_info(&self, m: &GetInfo) -> Result<Vec<u8>, Status> {
        if HANDLE_VALUED.contains(&m.param) {
            return Err(Status::INVALID_VALUE);
        }
        let target = InfoTarget::from_u32(m.target).ok_or(Status::INVALID_VALUE)?;
        let (h, p) = (m.handle, m.param);
        let result = match target {
            InfoTarget::Platform => cl3::platform::get_platform_data(self.platform, p),
            InfoTarget::Device => match self
                .advertised
                .as_deref()
                .and_then(|a| advertised_value(a, p))
            {
                Some(value) => return Ok(value),
                None => cl3::device::get_device_data(self.device_ref(h)?.raw.0, p),
            },
            InfoTarget::Context if p == CONTEXT_REFERENCE_COUNT => {
                return ref_count(&self.contexts, h)
            }
            InfoTarget::Context => cl3::context::get_context_data(self.contexts.get(h)?.ctx.0, p),
            InfoTarget::Queue if p == QUEUE_REFERENCE_COUNT => return ref_count(&self.queues, h),
            InfoTarget::Queue => {
                cl3::command_queue::get_command_queue_data(self.queues.get(h)?.queue.0, p)
            }
            InfoTarget::Mem if p == MEM_REFERENCE_COUNT => return ref_count(&self.mems, h),
            InfoTarget::Mem if p == MEM_FLAGS => {
                return Ok(self.mems.get(h)?.flags.to_le_bytes().to_vec())
            }
            InfoTarget::Mem => cl3::memory::get_mem_object_data(self.mems.get(h)?.raw, p),
            InfoTarget::Program if p == PROGRAM_REFERENCE_COUNT => {
                return ref_count(&self.programs, h)
            }
            InfoTarget::Program if p == PROGRAM_BINARIES => return self.program_binary(h),
            InfoTarget::Program if p == PROGRAM_BINARY_SIZES => {
                return self.program_binary_sizes(h)
            }
            InfoTarget::Program => {
                cl3::program::get_program_data(self.programs.get(h)?.program.0, p)
            }
            InfoTarget::ProgramBuild if p == PROGRAM_BUILD_OPTIONS => {
                return Ok(self.programs.get(h)?.guest_build_options());
            }
            InfoTarget::ProgramBuild if p == PROGRAM_BUILD_LOG => {
                let program = self.programs.get(h)?;
                let device = program.context.first_device();
                return cl3::program::get_program_build_data(program.program.0, device, p)
                    .map(|log| super::guard::scrub_host_paths(&log))
                    .map_err(Status);
            }
            InfoTarget::ProgramBuild => {
                let program = self.programs.get(h)?;
                cl3::program::get_program_build_data(
                    program.program.0,
                    program.context.first_device(),
                    p,
                )
            }
            InfoTarget::Kernel if p == KERNEL_REFERENCE_COUNT => {
                return ref_count(&self.kernels, h)
            }
            InfoTarget::Kernel => cl3::kernel::get_kernel_data(self.kernels.get(h)?.raw, p),
            InfoTarget::KernelArg => {
                cl3::kernel::get_kernel_arg_data(self.kernels.get(h)?.raw, m.index, p)
            }
            InfoTarget::KernelWorkGroup => {
                let kernel = self.kernels.get(h)?;
                let device = kernel.program.context.first_device();
                cl3::kernel::get_kernel_work_group_data(kernel.raw, device, p)
            }
            InfoTarget::Event if p == EVENT_REFERENCE_COUNT => return ref_count(&self.events, h),
            InfoTarget::Event => cl3::event::get_event_data(self.events.get(h)?.event.0, p),
            InfoTarget::EventProfiling => {
                cl3::event::get_event_profiling_data(self.events.get(h)?.event.0, p)
            }
        };
        result.map_err(Status)
    }

    /// The program's binary for the one device, raw bytes.
    /// The sizes of the sealed binaries a guest gets (0: none for that
    /// device, as the driver says).
    fn program_binary_sizes(&self, handle: u64) -> Result<Vec<u8>, Status> {
        let program = self.programs.get(handle)?;
        let sizes = cl3::program::get_program_data(program.program.0, PROGRAM_BINARY_SIZES)
            .map_err(Status)?;
        Ok(sizes
            .chunks_exact(8)
            .flat_map(|size| {
                let size = u64::from_le_bytes(size.try_into().expect("chunks of 8"));
                let sealed = if size == 0 {
                    0
                } else {
                    size + super::seal::SEAL_OVERHEAD as u64
                };
                sealed.to_le_bytes()
            })
            .collect())
    }

    fn program_binary(&self, handle: u64) -> Result<Vec<u8>, Status> {
        let program = self.programs.get(handle)?;
        match cl3::program::get_program_info(program.program.0, PROGRAM_BINARIES).map_err(Status)? {
            cl3::info_type::InfoType::VecVecUchar(mut binaries) if !binaries.is_empty() => {
                let device = super::seal::device_context(self.platform, self.device);
                Ok(super::seal::seal(&device, &binaries.swap_remove(0)))
            }
            _ => Err(Status::INVALID_PROGRAM_EXECUTABLE),
        }
    }
}
