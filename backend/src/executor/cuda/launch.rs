//! Modules, functions and kernel launches. A function's parameter layout is
//! read from the driver (`cuFuncGetParamInfo`) when the guest looks it up;
//! at launch every 8-byte parameter that points into the device arena must
//! point into one of the session's own ranges, so a guest cannot hand a
//! kernel another VM's memory.

use std::ffi::{c_int, CString};
use std::sync::{Arc, Mutex};

use cudarc::driver::sys;
use vgpu_protocol::cuda::{
    check_image, pack_param, result, CuFunctionReply, CuIntReply, CuNamesReply, CuRangeReply,
    ImageKind, MAX_PARAM_BUFFER,
};
use vgpu_protocol::messages::*;
use vgpu_protocol::{Status, Wire};

use super::driver::{self, check};
use super::launcher::{self, PreparedLaunch};
use super::memory::Ranges;
use super::objects::{FunctionSettings, Global, HostFunction, HostModule};
use super::session::{cuda, CudaSession};

/// Most parameters a kernel may have (the 32 KiB buffer holds at most this
/// many 1-byte parameters; the loop asking for them stops there).
const MAX_PARAMS: usize = MAX_PARAM_BUFFER;

fn invalid() -> Status {
    cuda(result::ERROR_INVALID_VALUE)
}

fn name(bytes: &[u8]) -> Result<CString, Status> {
    CString::new(bytes.to_vec()).map_err(|_| invalid())
}

/// Checks the pointer-sized parameters of a packed buffer: a value inside
/// the arena must lie in one of the session's ranges' own memory, or just
/// past it (an end pointer, which cuSPARSE's and CUB's kernels take).
/// (Values outside the arena may be plain integers; the arena holds only
/// guests' memory.)
pub(super) fn check_pointers(
    params: &[(u32, u32)],
    buffer: &[u8],
    in_arena: impl Fn(u64) -> bool,
    ranges: &Ranges,
) -> Result<(), Status> {
    for &(offset, size) in params {
        if size != 8 || offset % 8 != 0 {
            continue;
        }
        let at = offset as usize;
        let Some(bytes) = buffer.get(at..at + 8) else {
            return Err(invalid());
        };
        let value = u64::from_le_bytes(bytes.try_into().map_err(|_| invalid())?);
        if in_arena(value) && !ranges.bounds(value) {
            log::debug!(
                "launch parameter at offset {offset} ({value:#x}) names no memory of the session \
                 (range below it: {:x?})",
                ranges.below(value)
            );
            return Err(invalid());
        }
    }
    Ok(())
}

/// The driver's parameter layout of `function`.
pub(super) fn param_layout(function: sys::CUfunction) -> Result<Vec<(u32, u32)>, Status> {
    let mut params = Vec::new();
    for index in 0..MAX_PARAMS {
        let (mut offset, mut size) = (0usize, 0usize);
        // SAFETY: `function` is live; both outputs are valid for writes.
        let code = unsafe { sys::cuFuncGetParamInfo(function, index, &mut offset, &mut size) };
        if code as i32 != 0 {
            break;
        }
        let offset = u32::try_from(offset).map_err(|_| invalid())?;
        let size = u32::try_from(size).map_err(|_| invalid())?;
        params.push((offset, size));
    }
    Ok(params)
}

impl CudaSession {
    /// The parameter buffer with every pointer-sized parameter that names a
    /// relocated global pointed at where the global now is.
    fn translate_params<'a>(
        &self,
        layout: &[(u32, u32)],
        buffer: &'a [u8],
    ) -> std::borrow::Cow<'a, [u8]> {
        if self.relocations.is_empty() {
            return std::borrow::Cow::Borrowed(buffer);
        }
        let mut out = buffer.to_vec();
        for &(offset, size) in layout {
            let at = offset as usize;
            if size != 8 || offset % 8 != 0 {
                continue;
            }
            let Some(bytes) = out.get_mut(at..at + 8) else {
                continue;
            };
            let value = u64::from_le_bytes(bytes.try_into().unwrap_or([0; 8]));
            let host = self.host_ptr(value);
            if host != value {
                bytes.copy_from_slice(&host.to_le_bytes());
            }
        }
        std::borrow::Cow::Owned(out)
    }

    pub(super) fn load_module(&mut self, m: &CuModuleLoad) -> Result<(), Status> {
        self.load_image(m.module, m.ctx, m.image.clone())
    }

    /// Loads `image` as module `handle` of context `ctx`.
    pub(super) fn load_image(
        &mut self,
        handle: u64,
        ctx: u64,
        mut image: Vec<u8>,
    ) -> Result<(), Status> {
        let ctx = self.enter(ctx)?;
        let kind = ImageKind::detect(&image).ok_or(cuda(result::ERROR_INVALID_IMAGE))?;
        if !check_image(kind, &image) {
            return Err(cuda(result::ERROR_INVALID_IMAGE));
        }
        if kind == ImageKind::Ptx && image.last() != Some(&0) {
            image.push(0);
        }
        let mut raw = std::ptr::null_mut();
        // SAFETY: `image` is a PTX string with its terminating NUL, or a
        // cubin / fat binary whose headers stay inside it (checked above).
        check(unsafe { sys::cuModuleLoadData(&mut raw, image.as_ptr().cast()) })?;
        let module = HostModule {
            raw,
            kind,
            archs: super::image::archs(kind, &image),
            image: image.into(),
            globals: Mutex::new(Vec::new()),
            functions: Mutex::new(Vec::new()),
            ctx,
        };
        self.modules.insert(handle, module)?;
        Ok(())
    }

    /// `cuModuleUnload`: the module's functions and globals go with it.
    pub(super) fn unload_module(&mut self, handle: u64) -> Result<(), Status> {
        let module = self.modules.get(handle)?.clone();
        for global in module
            .globals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            self.ranges.remove(global.guest);
            self.relocations.remove(&global.guest);
        }
        for function in module
            .functions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            let _ = self.functions.release(function);
        }
        drop(module);
        self.image_charges.remove(&handle);
        self.modules.release(handle)
    }

    pub(super) fn get_function(&mut self, m: &CuModuleGetFunction) -> Result<Vec<u8>, Status> {
        let module = self.modules.get(m.module)?.clone();
        self.make_current(module.ctx.raw)?;
        let cname = name(&m.name)?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: the module is live; `cname` is NUL-terminated.
        check(unsafe { sys::cuModuleGetFunction(&mut raw, module.raw, cname.as_ptr()) })?;
        let params = param_layout(raw)?;
        let param_len = params
            .iter()
            .map(|&(offset, size)| offset as usize + size as usize)
            .max()
            .unwrap_or(0);
        if param_len > MAX_PARAM_BUFFER {
            return Err(cuda(result::ERROR_NOT_SUPPORTED));
        }
        let reply = CuFunctionReply {
            params: params.iter().map(|&(o, s)| pack_param(o, s)).collect(),
        };
        self.functions.insert(
            m.function,
            HostFunction {
                raw,
                name: m.name.clone(),
                params,
                param_len,
                module: module.clone(),
                settings: Mutex::new(FunctionSettings::default()),
            },
        )?;
        module
            .functions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(m.function);
        Ok(reply.to_bytes())
    }

    /// The names of the module's kernels, each followed by a NUL.
    pub(super) fn function_names(&mut self, m: &CuModuleFunctionNames) -> Result<Vec<u8>, Status> {
        /// More kernels than any library seen has in one module; the reply
        /// stays well inside one message.
        const MAX_FUNCTIONS: u32 = 1 << 16;
        let module = self.modules.get(m.module)?.clone();
        self.make_current(module.ctx.raw)?;
        let mut count: std::ffi::c_uint = 0;
        // SAFETY: the module is live; the output is valid.
        check(unsafe { sys::cuModuleGetFunctionCount(&mut count, module.raw) })?;
        if count > MAX_FUNCTIONS {
            return Err(cuda(result::ERROR_NOT_SUPPORTED));
        }
        let mut raw = vec![std::ptr::null_mut(); count as usize];
        // SAFETY: `raw` holds `count` entries; the module is live.
        check(unsafe { sys::cuModuleEnumerateFunctions(raw.as_mut_ptr(), count, module.raw) })?;
        let mut names = Vec::new();
        for function in raw {
            let mut name: *const std::ffi::c_char = std::ptr::null();
            // SAFETY: `function` came from the driver for this module.
            check(unsafe { sys::cuFuncGetName(&mut name, function) })?;
            if name.is_null() {
                return Err(cuda(result::ERROR_UNKNOWN));
            }
            // SAFETY: the driver returns a NUL-terminated name that lives
            // as long as the module.
            names.extend_from_slice(unsafe { std::ffi::CStr::from_ptr(name) }.to_bytes_with_nul());
        }
        Ok(CuNamesReply { names }.to_bytes())
    }

    pub(super) fn get_global(&mut self, m: &CuModuleGetGlobal) -> Result<Vec<u8>, Status> {
        let module = self.modules.get(m.module)?.clone();
        // A global the guest was given already keeps its address (which a
        // restore may have kept while the variable moved).
        if let Some(g) = module
            .globals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|g| g.name == m.name)
        {
            return Ok(CuRangeReply {
                ptr: g.guest,
                size: g.size,
            }
            .to_bytes());
        }
        self.make_current(module.ctx.raw)?;
        let cname = name(&m.name)?;
        let (mut ptr, mut size) = (0u64, 0usize);
        // SAFETY: the module is live; outputs are valid; `cname` is
        // NUL-terminated.
        check(unsafe {
            sys::cuModuleGetGlobal_v2(&mut ptr, &mut size, module.raw, cname.as_ptr())
        })?;
        let size = size as u64;
        // The address must not fall in a range the guest knows as another
        // (a relocated global's old address): it would be translated.
        let end = ptr.saturating_add(size.max(1));
        if self
            .relocations
            .range(..end)
            .next_back()
            .is_some_and(|(&start, &(len, _))| start.saturating_add(len.max(1)) > ptr)
        {
            return Err(cuda(result::ERROR_OUT_OF_MEMORY));
        }
        let mut globals = module.globals.lock().unwrap_or_else(|e| e.into_inner());
        if !globals.iter().any(|g| g.guest == ptr) {
            globals.push(Global {
                name: m.name.clone(),
                guest: ptr,
                host: ptr,
                size,
            });
            self.ranges.insert(ptr, size);
        }
        Ok(CuRangeReply { ptr, size }.to_bytes())
    }

    fn function(&self, handle: u64) -> Result<Arc<HostFunction>, Status> {
        self.functions.get(handle).cloned()
    }

    pub(super) fn function_attribute(&mut self, m: &CuFuncGetAttribute) -> Result<Vec<u8>, Status> {
        let function = self.function(m.function)?;
        self.make_current(function.module.ctx.raw)?;
        let value = driver::function_attribute(function.raw, m.attribute)?;
        Ok(CuIntReply { value, second: 0 }.to_bytes())
    }

    pub(super) fn set_function_attribute(&mut self, m: &CuFuncSetAttribute) -> Result<(), Status> {
        let function = self.function(m.function)?;
        self.make_current(function.module.ctx.raw)?;
        driver::set_function_attribute(function.raw, m.attribute, m.value)?;
        let mut settings = function.settings.lock().unwrap_or_else(|e| e.into_inner());
        settings.attributes.retain(|(a, _)| *a != m.attribute);
        settings.attributes.push((m.attribute, m.value));
        Ok(())
    }

    pub(super) fn set_cache_config(&mut self, m: &CuFuncSetCacheConfig) -> Result<(), Status> {
        let function = self.function(m.function)?;
        self.make_current(function.module.ctx.raw)?;
        driver::set_cache_config(function.raw, m.config)?;
        function
            .settings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .cache_config = Some(m.config);
        Ok(())
    }

    pub(super) fn occupancy_blocks(
        &mut self,
        m: &CuOccupancyMaxActiveBlocks,
    ) -> Result<Vec<u8>, Status> {
        let function = self.function(m.function)?;
        self.make_current(function.module.ctx.raw)?;
        let block = c_int::try_from(m.block_size).map_err(|_| invalid())?;
        let smem = usize::try_from(m.dynamic_smem).map_err(|_| invalid())?;
        let mut blocks = 0;
        // SAFETY: the function is live; `blocks` is valid for writes.
        check(unsafe {
            sys::cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
                &mut blocks,
                function.raw,
                block,
                smem,
                m.flags,
            )
        })?;
        Ok(CuIntReply {
            value: blocks,
            second: 0,
        }
        .to_bytes())
    }

    pub(super) fn occupancy_block_size(
        &mut self,
        m: &CuOccupancyMaxPotentialBlockSize,
    ) -> Result<Vec<u8>, Status> {
        let function = self.function(m.function)?;
        self.make_current(function.module.ctx.raw)?;
        let limit = c_int::try_from(m.block_size_limit).map_err(|_| invalid())?;
        let smem = usize::try_from(m.dynamic_smem).map_err(|_| invalid())?;
        let (mut grid, mut block) = (0, 0);
        // SAFETY: the function is live; outputs are valid; no callback.
        check(unsafe {
            sys::cuOccupancyMaxPotentialBlockSizeWithFlags(
                &mut grid,
                &mut block,
                function.raw,
                None,
                smem,
                limit,
                m.flags,
            )
        })?;
        Ok(CuIntReply {
            value: grid,
            second: block,
        }
        .to_bytes())
    }

    /// `cuLaunchKernel`, call `call` of the batch: issued here, or, in a
    /// run of launches, handed to the session's launch thread
    /// (`launcher.rs`) once checked.
    pub(super) fn launch(&mut self, m: &CuLaunchKernel, call: usize) -> Result<(), Status> {
        self.launch_as(m, call, false)
    }

    /// `cuLaunchCooperativeKernel`: checked as any launch, issued on this
    /// thread (the batch drained the launch thread first).
    pub(super) fn launch_cooperative(
        &mut self,
        m: &CuLaunchCooperativeKernel,
        call: usize,
    ) -> Result<(), Status> {
        let plain = CuLaunchKernel {
            function: m.function,
            ctx: m.ctx,
            stream: m.stream,
            grid: m.grid,
            block: m.block,
            shared_mem: m.shared_mem,
            params: m.params.clone(),
        };
        self.launch_as(&plain, call, true)
    }

    fn launch_as(
        &mut self,
        m: &CuLaunchKernel,
        call: usize,
        cooperative: bool,
    ) -> Result<(), Status> {
        let function = self.function(m.function)?;
        if m.params.len() != function.param_len {
            return Err(invalid());
        }
        let arena = self.shared.arena.clone();
        check_pointers(
            &function.params,
            &m.params,
            |v| arena.contains(v),
            &self.ranges,
        )?;
        let to_thread = !cooperative && self.launches.takes_launch(launcher::enabled());
        let mut launch = self.prepare(m, call, function)?;
        launch.cooperative = cooperative;
        if to_thread {
            self.launches.hand_over(launch, "cuda");
            return Ok(());
        }
        launch.issue_here()
    }

    /// The launch, checked and translated, for this thread or the launch
    /// thread.
    fn prepare(
        &mut self,
        m: &CuLaunchKernel,
        call: usize,
        function: Arc<HostFunction>,
    ) -> Result<PreparedLaunch, Status> {
        let (ctx, stream) = if m.stream == 0 {
            (self.contexts.get(m.ctx)?.clone(), None)
        } else {
            let stream = self.streams.get(m.stream)?.clone();
            (stream.ctx.clone(), Some(stream))
        };
        self.written.mark();
        let params = self
            .translate_params(&function.params, &m.params)
            .into_owned();
        let (batch, call) = self.launches.origin(call);
        Ok(PreparedLaunch {
            batch,
            call,
            function,
            ctx,
            stream,
            grid: m.grid,
            block: m.block,
            shared_mem: m.shared_mem,
            params,
            cooperative: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointer_parameters_outside_the_session_are_refused() {
        let mut ranges = Ranges::default();
        ranges.insert(0x1000, 0x100);
        let in_arena = |v: u64| (0x1000..0x10_0000).contains(&v);
        let layout = [(0, 8), (8, 4), (16, 8)];
        let mut buffer = vec![0u8; 24];
        buffer[..8].copy_from_slice(&0x1010u64.to_le_bytes());
        buffer[16..].copy_from_slice(&7u64.to_le_bytes());
        assert!(check_pointers(&layout, &buffer, in_arena, &ranges).is_ok());
        // One past an allocation's end, as an end iterator is.
        buffer[16..].copy_from_slice(&0x1100u64.to_le_bytes());
        assert!(check_pointers(&layout, &buffer, in_arena, &ranges).is_ok());
        buffer[16..].copy_from_slice(&0x1101u64.to_le_bytes());
        assert_eq!(
            check_pointers(&layout, &buffer, in_arena, &ranges),
            Err(invalid())
        );
        buffer[16..].copy_from_slice(&0x5000u64.to_le_bytes());
        assert_eq!(
            check_pointers(&layout, &buffer, in_arena, &ranges),
            Err(invalid())
        );
        assert_eq!(
            check_pointers(&layout, &buffer[..20], in_arena, &ranges),
            Err(invalid())
        );
    }
}
