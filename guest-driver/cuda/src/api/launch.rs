//! Kernel launches and occupancy queries. Both launch forms (a pointer per
//! parameter, or the `extra` buffer) become one packed buffer laid out as
//! the function's parameter layout says; the launch itself is batched.

use std::ffi::{c_int, c_uint, c_void};

use vgpu_protocol::cuda::MAX_PARAM_BUFFER;
use vgpu_protocol::messages::{
    CuLaunchCooperativeKernel, CuLaunchKernel, CuOccupancyMaxActiveBlocks,
    CuOccupancyMaxPotentialBlockSize,
};
use vgpu_protocol::Request;

use crate::ffi::{bytes, entry, get, handle, put, result, CuResult, Handle};
use crate::function_answers::Question;
use crate::runtime::{decode, require_context, rt, stream_handle, FunctionInfo};

const PARAM_END: usize = 0;
const PARAM_BUFFER_POINTER: usize = 1;
const PARAM_BUFFER_SIZE: usize = 2;

/// Packs `kernelParams` (one pointer per parameter) into a buffer.
pub(crate) fn pack_params(info: &FunctionInfo, params: *mut *mut c_void) -> CuResult<Vec<u8>> {
    let mut buffer = vec![0u8; info.param_len];
    for (i, &(offset, size)) in info.params.iter().enumerate() {
        // SAFETY: the application passes one pointer per kernel parameter.
        let value = get(unsafe { params.add(i) }.cast_const())?;
        let src = bytes(value, size as usize)?;
        let at = offset as usize;
        buffer[at..at + size as usize].copy_from_slice(src);
    }
    Ok(buffer)
}

/// Packs the `extra` form: `CU_LAUNCH_PARAM_BUFFER_POINTER`, `_SIZE`, `_END`.
pub(crate) fn pack_extra(info: &FunctionInfo, extra: *mut *mut c_void) -> CuResult<Vec<u8>> {
    let (mut pointer, mut size) = (std::ptr::null::<c_void>(), None);
    for i in (0..64).step_by(2) {
        // SAFETY: the application passes an END-terminated key/value list.
        let key = get(unsafe { extra.add(i) }.cast_const())? as usize;
        if key == PARAM_END {
            break;
        }
        // SAFETY: as above: every key but END has a value.
        let value = get(unsafe { extra.add(i + 1) }.cast_const())?;
        match key {
            PARAM_BUFFER_POINTER => pointer = value,
            PARAM_BUFFER_SIZE => size = Some(get(value.cast::<usize>())?),
            _ => return Err(result::ERROR_INVALID_VALUE),
        }
    }
    let size = size.ok_or(result::ERROR_INVALID_VALUE)?;
    let mut buffer = vec![0u8; info.param_len];
    let n = size.min(info.param_len);
    buffer[..n].copy_from_slice(bytes(pointer, n)?);
    Ok(buffer)
}

#[allow(clippy::too_many_arguments)]
fn launch(
    f: Handle,
    grid: [c_uint; 3],
    block: [c_uint; 3],
    shared_mem: c_uint,
    stream: Handle,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
    cooperative: bool,
) -> CuResult<()> {
    let rt = rt()?;
    let ctx = require_context()?;
    // A `CUkernel` stands for its function in the current context.
    let function = super::library::kernel_function(handle(f))?;
    let info = rt.function(function)?;
    let params = if !params.is_null() {
        pack_params(&info, params)?
    } else if !extra.is_null() {
        pack_extra(&info, extra)?
    } else if info.param_len == 0 {
        Vec::new()
    } else {
        return Err(result::ERROR_INVALID_VALUE);
    };
    if params.len() > MAX_PARAM_BUFFER {
        return Err(result::ERROR_INVALID_VALUE);
    }
    let stream = stream_handle(handle(stream));
    let request = if cooperative {
        Request::CuLaunchCooperativeKernel(CuLaunchCooperativeKernel {
            function,
            ctx,
            stream,
            grid,
            block,
            shared_mem,
            params,
        })
    } else {
        Request::CuLaunchKernel(CuLaunchKernel {
            function,
            ctx,
            stream,
            grid,
            block,
            shared_mem,
            params,
        })
    };
    if cooperative {
        // Answered: the driver refuses a grid too large to be resident at
        // the launch itself, and cooperative launches are rare.
        return rt.on_stream(ctx, stream, |_, _| rt.call(request).map(drop));
    }
    rt.on_stream(ctx, stream, |_, _| rt.defer(request))
}

entry! {
    fn cuLaunchKernel(
        f: Handle,
        gx: c_uint, gy: c_uint, gz: c_uint,
        bx: c_uint, by: c_uint, bz: c_uint,
        shared_mem: c_uint,
        stream: Handle,
        params: *mut *mut c_void,
        extra: *mut *mut c_void,
    ) | cuLaunchKernel_ptsz {
        launch(f, [gx, gy, gz], [bx, by, bz], shared_mem, stream, params, extra, false)
    }
}

entry! {
    /// A launch whose blocks all run at once, so that the grid can
    /// synchronize (cooperative groups' `grid.sync()`); the driver refuses
    /// a grid larger than the device holds.
    fn cuLaunchCooperativeKernel(
        f: Handle,
        gx: c_uint, gy: c_uint, gz: c_uint,
        bx: c_uint, by: c_uint, bz: c_uint,
        shared_mem: c_uint,
        stream: Handle,
        params: *mut *mut c_void,
    ) | cuLaunchCooperativeKernel_ptsz {
        if params.is_null() {
            return Err(result::ERROR_INVALID_VALUE);
        }
        let null = std::ptr::null_mut();
        launch(f, [gx, gy, gz], [bx, by, bz], shared_mem, stream, params, null, true)
    }
}

/// `CUlaunchConfig`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct LaunchConfig {
    pub grid: [c_uint; 3],
    pub block: [c_uint; 3],
    pub shared_mem: c_uint,
    pub stream: Handle,
    pub attrs: *const LaunchAttribute,
    pub num_attrs: c_uint,
}

/// `CUlaunchAttribute`: an id and a 64-byte value union.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct LaunchAttribute {
    pub id: c_uint,
    pub pad: [u8; 4],
    pub value: [u32; 16],
}

/// `CUlaunchAttributeID` values.
mod attr {
    pub const ACCESS_POLICY_WINDOW: u32 = 1;
    pub const COOPERATIVE: u32 = 2;
    pub const SYNCHRONIZATION_POLICY: u32 = 3;
    pub const CLUSTER_DIMENSION: u32 = 4;
    pub const CLUSTER_SCHEDULING_POLICY_PREFERENCE: u32 = 5;
    pub const PROGRAMMATIC_STREAM_SERIALIZATION: u32 = 6;
    pub const PRIORITY: u32 = 8;
    pub const MEM_SYNC_DOMAIN_MAP: u32 = 9;
    pub const MEM_SYNC_DOMAIN: u32 = 10;
}

/// Whether a launch with this attribute may run as a plain launch: the
/// attribute is a hint whose absence keeps the program's results (cache
/// policy, scheduling, priority, memory sync domains, programmatic
/// dependent launch, which only lets kernels overlap), or has its default
/// value (no cooperation, a 1×1×1 cluster). Anything else is refused.
pub(crate) fn plain_launch_keeps(attribute: &LaunchAttribute) -> bool {
    match attribute.id {
        attr::ACCESS_POLICY_WINDOW
        | attr::SYNCHRONIZATION_POLICY
        | attr::CLUSTER_SCHEDULING_POLICY_PREFERENCE
        | attr::PROGRAMMATIC_STREAM_SERIALIZATION
        | attr::PRIORITY
        | attr::MEM_SYNC_DOMAIN_MAP
        | attr::MEM_SYNC_DOMAIN => true,
        attr::COOPERATIVE => attribute.value[0] == 0,
        attr::CLUSTER_DIMENSION => attribute.value[..3].iter().all(|&d| d <= 1),
        _ => false,
    }
}

entry! {
    fn cuLaunchKernelEx(
        config: *const LaunchConfig,
        f: Handle,
        params: *mut *mut c_void,
        extra: *mut *mut c_void,
    ) | cuLaunchKernelEx_ptsz {
        let config = get(config)?;
        let mut cooperative = false;
        if config.num_attrs > 0 {
            if config.attrs.is_null() || config.num_attrs > 64 {
                return Err(result::ERROR_INVALID_VALUE);
            }
            for i in 0..config.num_attrs as usize {
                // SAFETY: the application passes `num_attrs` attributes.
                let attribute = get(unsafe { config.attrs.add(i) })?;
                if attribute.id == attr::COOPERATIVE && attribute.value[0] != 0 {
                    cooperative = true;
                } else if !plain_launch_keeps(&attribute) {
                    log::debug!("cuLaunchKernelEx: attribute {} not supported", attribute.id);
                    return Err(result::ERROR_NOT_SUPPORTED);
                }
            }
        }
        let (grid, block) = (config.grid, config.block);
        launch(f, grid, block, config.shared_mem, config.stream, params, extra, cooperative)
    }
}

entry! {
    fn cuOccupancyAvailableDynamicSMemPerBlock(size: *mut usize, f: Handle, blocks: c_int, block_size: c_int) {
        let rt = rt()?;
        let reply: vgpu_protocol::cuda::CuValueReply = decode(&rt.call(
            Request::CuOccupancyAvailableDynamicSMem(vgpu_protocol::messages::CuOccupancyAvailableDynamicSMem {
                function: super::library::kernel_function(handle(f))?,
                blocks: u32::try_from(blocks).map_err(|_| result::ERROR_INVALID_VALUE)?,
                block_size: u32::try_from(block_size).map_err(|_| result::ERROR_INVALID_VALUE)?,
            }),
        )?)?;
        put(size, usize::try_from(reply.value).map_err(|_| result::ERROR_UNKNOWN)?)
    }
}

entry! {
    fn cuOccupancyMaxActiveClusters(clusters: *mut c_int, f: Handle, config: *const LaunchConfig) {
        let rt = rt()?;
        let config = get(config)?;
        let mut cluster = [0u32; 3];
        if config.num_attrs > 0 && !config.attrs.is_null() {
            for i in 0..config.num_attrs.min(64) as usize {
                // SAFETY: the application passes `num_attrs` attributes.
                let attribute = get(unsafe { config.attrs.add(i) })?;
                if attribute.id == attr::CLUSTER_DIMENSION {
                    cluster.copy_from_slice(&attribute.value[..3]);
                }
            }
        }
        let function = super::library::kernel_function(handle(f))?;
        let question = Question::ActiveClusters(config.grid, config.block, config.shared_mem, cluster);
        let (value, _) = rt.ask_function(function, question, || {
            Request::CuOccupancyMaxActiveClusters(vgpu_protocol::messages::CuOccupancyMaxActiveClusters {
                function,
                grid: config.grid,
                block: config.block,
                shared_mem: config.shared_mem,
                cluster,
            })
        })?;
        put(clusters, value)
    }
}

fn blocks_per_sm(
    blocks: *mut c_int,
    f: Handle,
    block_size: c_int,
    smem: usize,
    flags: c_uint,
) -> CuResult<()> {
    let function = super::library::kernel_function(handle(f))?;
    let block_size = u32::try_from(block_size).map_err(|_| result::ERROR_INVALID_VALUE)?;
    let question = Question::BlocksPerSm(block_size, smem as u64, flags);
    let (value, _) = rt()?.ask_function(function, question, || {
        Request::CuOccupancyMaxActiveBlocks(CuOccupancyMaxActiveBlocks {
            function,
            block_size,
            dynamic_smem: smem as u64,
            flags,
        })
    })?;
    put(blocks, value)
}

entry! {
    fn cuOccupancyMaxActiveBlocksPerMultiprocessor(blocks: *mut c_int, f: Handle, block_size: c_int, smem: usize) {
        blocks_per_sm(blocks, f, block_size, smem, 0)
    }
}

entry! {
    fn cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(blocks: *mut c_int, f: Handle, block_size: c_int, smem: usize, flags: c_uint) {
        blocks_per_sm(blocks, f, block_size, smem, flags)?;
        log::trace!("blocks per SM: {:?} (block {block_size}, smem {smem}, flags {flags})", crate::ffi::get(blocks));
        Ok(())
    }
}

#[allow(clippy::too_many_arguments)]
fn potential_block_size(
    min_grid: *mut c_int,
    block: *mut c_int,
    f: Handle,
    smem_of_block: *const c_void,
    smem: usize,
    limit: c_int,
    flags: c_uint,
) -> CuResult<()> {
    if !smem_of_block.is_null() {
        // A host callback cannot run on the backend.
        return Err(result::ERROR_NOT_SUPPORTED);
    }
    let function = super::library::kernel_function(handle(f))?;
    let limit = u32::try_from(limit).map_err(|_| result::ERROR_INVALID_VALUE)?;
    let question = Question::PotentialBlockSize(smem as u64, limit, flags);
    let (grid, block_size) = rt()?.ask_function(function, question, || {
        Request::CuOccupancyMaxPotentialBlockSize(CuOccupancyMaxPotentialBlockSize {
            function,
            dynamic_smem: smem as u64,
            block_size_limit: limit,
            flags,
        })
    })?;
    put(min_grid, grid)?;
    put(block, block_size)
}

entry! {
    fn cuOccupancyMaxPotentialBlockSize(min_grid: *mut c_int, block: *mut c_int, f: Handle, smem_of_block: *const c_void, smem: usize, limit: c_int) {
        potential_block_size(min_grid, block, f, smem_of_block, smem, limit, 0)
    }
}

entry! {
    fn cuOccupancyMaxPotentialBlockSizeWithFlags(min_grid: *mut c_int, block: *mut c_int, f: Handle, smem_of_block: *const c_void, smem: usize, limit: c_int, flags: c_uint) {
        potential_block_size(min_grid, block, f, smem_of_block, smem, limit, flags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> FunctionInfo {
        FunctionInfo {
            params: vec![(0, 8), (8, 4), (16, 8)],
            param_len: 24,
        }
    }

    #[test]
    fn launch_config_has_the_c_layout() {
        assert_eq!(std::mem::size_of::<LaunchConfig>(), 56);
        assert_eq!(std::mem::offset_of!(LaunchConfig, stream), 32);
        assert_eq!(std::mem::offset_of!(LaunchConfig, num_attrs), 48);
        assert_eq!(std::mem::size_of::<LaunchAttribute>(), 72);
    }

    #[test]
    fn only_launch_hints_and_default_attributes_run_as_plain_launches() {
        let with = |id: u32, v: [u32; 3]| {
            let mut value = [0u32; 16];
            value[..3].copy_from_slice(&v);
            LaunchAttribute {
                id,
                pad: [0; 4],
                value,
            }
        };
        assert!(plain_launch_keeps(&with(
            attr::PROGRAMMATIC_STREAM_SERIALIZATION,
            [1, 0, 0]
        )));
        assert!(plain_launch_keeps(&with(
            attr::CLUSTER_DIMENSION,
            [1, 1, 1]
        )));
        assert!(!plain_launch_keeps(&with(
            attr::CLUSTER_DIMENSION,
            [2, 1, 1]
        )));
        assert!(plain_launch_keeps(&with(attr::COOPERATIVE, [0, 0, 0])));
        assert!(!plain_launch_keeps(&with(attr::COOPERATIVE, [1, 0, 0])));
        assert!(
            !plain_launch_keeps(&with(7, [0, 0, 0])),
            "programmatic event"
        );
    }

    #[test]
    fn kernel_params_are_packed_at_their_offsets() {
        let (mut a, mut b, mut c) = (0x1122u64, 7u32, 0x3344u64);
        let mut ptrs: [*mut c_void; 3] = [
            (&mut a as *mut u64).cast(),
            (&mut b as *mut u32).cast(),
            (&mut c as *mut u64).cast(),
        ];
        let buffer = pack_params(&layout(), ptrs.as_mut_ptr()).unwrap();
        assert_eq!(&buffer[..8], &0x1122u64.to_le_bytes());
        assert_eq!(&buffer[8..12], &7u32.to_le_bytes());
        assert_eq!(&buffer[16..], &0x3344u64.to_le_bytes());
    }

    #[test]
    fn extra_buffer_is_copied_and_null_params_refused() {
        let mut packed = [9u8; 24];
        let mut size = 24usize;
        let mut extra: [*mut c_void; 5] = [
            PARAM_BUFFER_POINTER as *mut c_void,
            packed.as_mut_ptr().cast(),
            PARAM_BUFFER_SIZE as *mut c_void,
            (&mut size as *mut usize).cast(),
            std::ptr::null_mut(),
        ];
        assert_eq!(
            pack_extra(&layout(), extra.as_mut_ptr()).unwrap(),
            vec![9u8; 24]
        );
        let mut nulls: [*mut c_void; 3] = [std::ptr::null_mut(); 3];
        assert_eq!(
            pack_params(&layout(), nulls.as_mut_ptr()),
            Err(result::ERROR_INVALID_VALUE)
        );
    }
}
