//! Modules and functions. The whole image goes to the backend, which keeps
//! it (PTX and fat binaries can be rebuilt on another GPU after a restore);
//! a function's parameter layout comes back with its handle, so launches
//! can pack parameters without asking.

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::Arc;

use vgpu_protocol::cuda::{unpack_param, CuFunctionReply, CuRangeReply, IMAGE_CHUNK};
use vgpu_protocol::messages::{
    CuFuncGetAttribute, CuFuncSetAttribute, CuFuncSetCacheConfig, CuImageChunk,
    CuModuleGetFunction, CuModuleGetGlobal, CuModuleLoad, CuModuleLoadStaged, CuModuleUnload,
};
use vgpu_protocol::Request;

use crate::ffi::{
    c_str, entry, handle, put, put_opt, result, to_ptr, CUdeviceptr, CuResult, Handle,
};
use crate::function_answers::Question;
use crate::image::image_bytes;
use crate::runtime::{decode, lock, require_context, rt, FunctionInfo, Runtime};

/// How `image` travels: whole, or as `(offset, len)` chunks of at most
/// `chunk` bytes.
pub(crate) fn chunks(len: usize, chunk: usize) -> Vec<(usize, usize)> {
    let chunk = chunk.max(1);
    (0..len)
        .step_by(chunk)
        .map(|at| (at, chunk.min(len - at)))
        .collect()
}

/// Loads `image` as module `module` of `ctx` on the backend: in one
/// message when it fits, else in `CuImageChunk`s and `CuModuleLoadStaged`.
pub(crate) fn send_image(rt: &Runtime, module: u64, ctx: u64, image: Vec<u8>) -> CuResult<()> {
    let limit = rt.client.max_request_len().saturating_sub(64 << 10);
    let chunk = IMAGE_CHUNK.min(limit).max(4096);
    if image.len() <= chunk {
        rt.call(Request::CuModuleLoad(CuModuleLoad { module, ctx, image }))?;
        return Ok(());
    }
    let upload = rt.new_handle();
    log::debug!(
        "module image of {} bytes: sent in chunks of {chunk}",
        image.len()
    );
    for (offset, len) in chunks(image.len(), chunk) {
        rt.defer(Request::CuImageChunk(CuImageChunk {
            upload,
            offset: offset as u64,
            data: image[offset..offset + len].to_vec(),
        }))?;
    }
    rt.call(Request::CuModuleLoadStaged(CuModuleLoadStaged {
        module,
        ctx,
        upload,
        len: image.len() as u64,
    }))?;
    Ok(())
}

fn load(pmodule: *mut Handle, image: Vec<u8>) -> CuResult<()> {
    let rt = rt()?;
    let ctx = require_context()?;
    let module = rt.new_handle();
    send_image(rt, module, ctx, image)?;
    put(pmodule, to_ptr(module))
}

entry! {
    fn cuModuleLoadData(pmodule: *mut Handle, image: *const c_void) {
        load(pmodule, image_bytes(image)?)
    }
}

entry! {
    fn cuModuleLoadFatBinary(pmodule: *mut Handle, image: *const c_void) {
        load(pmodule, image_bytes(image)?)
    }
}

/// JIT options whose values are output buffer sizes.
const INFO_LOG_BUFFER: c_int = 3;
const INFO_LOG_BUFFER_SIZE: c_int = 4;
const ERROR_LOG_BUFFER: c_int = 5;
const ERROR_LOG_BUFFER_SIZE: c_int = 6;

entry! {
    /// JIT options are accepted; the logs they ask for come back empty.
    fn cuModuleLoadDataEx(pmodule: *mut Handle, image: *const c_void, count: c_uint, options: *const c_int, values: *mut *mut c_void) {
        let image = image_bytes(image)?;
        let count = count as usize;
        for i in 0..count {
            // SAFETY: the application passes `count` options and values.
            let (option, value) = unsafe {
                if options.is_null() || values.is_null() {
                    return Err(result::ERROR_INVALID_VALUE);
                }
                (*options.add(i), values.add(i))
            };
            match option {
                INFO_LOG_BUFFER_SIZE | ERROR_LOG_BUFFER_SIZE => put(value, std::ptr::null_mut())?,
                INFO_LOG_BUFFER | ERROR_LOG_BUFFER => {
                    // SAFETY: the value is the application's log buffer.
                    let buffer = unsafe { *value }.cast::<u8>();
                    if !buffer.is_null() {
                        put(buffer, 0)?;
                    }
                }
                _ => {}
            }
        }
        load(pmodule, image)
    }
}

entry! {
    fn cuModuleLoad(pmodule: *mut Handle, fname: *const c_char) {
        let path = std::str::from_utf8(c_str(fname)?).map_err(|_| result::ERROR_INVALID_VALUE)?;
        let file = std::fs::read(path).map_err(|_| result::ERROR_FILE_NOT_FOUND)?;
        // The file holds the image itself (PTX, cubin or fat binary).
        load(pmodule, file)
    }
}

/// `CUmoduleLoadingMode`.
const EAGER_LOADING: c_int = 1;
const LAZY_LOADING: c_int = 2;

/// The loading mode as the driver reports it: `CUDA_MODULE_LOADING=EAGER`
/// or `LAZY`, lazy when unset (the default since CUDA 12.2). cudart asks
/// before it loads its kernels; the backend receives whole images either way.
fn loading_mode(setting: Option<&str>) -> c_int {
    match setting {
        Some(value) if value.eq_ignore_ascii_case("eager") => EAGER_LOADING,
        _ => LAZY_LOADING,
    }
}

entry! {
    fn cuModuleGetLoadingMode(mode: *mut c_int) {
        rt()?;
        let setting = std::env::var("CUDA_MODULE_LOADING").ok();
        put(mode, loading_mode(setting.as_deref()))
    }
}

entry! {
    fn cuModuleUnload(module: Handle) {
        let rt = rt()?;
        rt.defer(Request::CuModuleUnload(CuModuleUnload { module: handle(module) }))
    }
}

/// Looks up function `name` of `module` under a new handle; its parameter
/// layout comes back with it and is kept for launches.
pub(crate) fn get_function(rt: &Runtime, module: u64, name: Vec<u8>) -> CuResult<u64> {
    let function = rt.new_handle();
    let reply: CuFunctionReply =
        decode(&rt.call(Request::CuModuleGetFunction(CuModuleGetFunction {
            function,
            module,
            name,
        }))?)?;
    let params: Vec<(u32, u32)> = reply.params.iter().map(|p| unpack_param(*p)).collect();
    let param_len = params
        .iter()
        .map(|&(o, s)| o as usize + s as usize)
        .max()
        .unwrap_or(0);
    rt.functions
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .insert(function, Arc::new(FunctionInfo { params, param_len }));
    Ok(function)
}

/// A global of `module`: its device range, which the program may name.
pub(crate) fn get_global(rt: &Runtime, module: u64, name: Vec<u8>) -> CuResult<(u64, u64)> {
    let reply: CuRangeReply = decode(&rt.call(Request::CuModuleGetGlobal(CuModuleGetGlobal {
        module,
        name,
    }))?)?;
    lock(&rt.ranges).insert(reply.ptr, reply.size);
    Ok((reply.ptr, reply.size))
}

entry! {
    fn cuModuleGetFunction(pfunction: *mut Handle, module: Handle, name: *const c_char) {
        let rt = rt()?;
        let function = get_function(rt, handle(module), c_str(name)?.to_vec())?;
        put(pfunction, to_ptr(function))
    }
}

entry! {
    fn cuModuleGetGlobal_v2(dptr: *mut CUdeviceptr, bytes: *mut usize, module: Handle, name: *const c_char) {
        let (ptr, size) = get_global(rt()?, handle(module), c_str(name)?.to_vec())?;
        put_opt(dptr, ptr);
        put_opt(bytes, size as usize);
        Ok(())
    }
}

entry! {
    fn cuFuncGetAttribute(value: *mut c_int, attribute: c_int, function: Handle) {
        let attribute = u32::try_from(attribute).map_err(|_| result::ERROR_INVALID_VALUE)?;
        let function = super::library::kernel_function(handle(function))?;
        let (answer, _) = rt()?.ask_function(function, Question::Attribute(attribute), || {
            Request::CuFuncGetAttribute(CuFuncGetAttribute { function, attribute })
        })?;
        put(value, answer)
    }
}

entry! {
    fn cuFuncSetAttribute(function: Handle, attribute: c_int, value: c_int) {
        let attribute = u32::try_from(attribute).map_err(|_| result::ERROR_INVALID_VALUE)?;
        let rt = rt()?;
        let function = super::library::kernel_function(handle(function))?;
        lock(&rt.function_answers).forget(function);
        rt.defer(Request::CuFuncSetAttribute(CuFuncSetAttribute {
            function,
            attribute,
            value,
        }))
    }
}

entry! {
    fn cuFuncSetCacheConfig(function: Handle, config: c_int) {
        let config = u32::try_from(config).map_err(|_| result::ERROR_INVALID_VALUE)?;
        let rt = rt()?;
        let function = super::library::kernel_function(handle(function))?;
        lock(&rt.function_answers).forget(function);
        rt.defer(Request::CuFuncSetCacheConfig(CuFuncSetCacheConfig { function, config }))
    }
}

entry! {
    fn cuFuncGetParamInfo(function: Handle, index: usize, offset: *mut usize, size: *mut usize) {
        let info = rt()?.function(super::library::kernel_function(handle(function))?)?;
        let &(o, s) = info.params.get(index).ok_or(result::ERROR_INVALID_VALUE)?;
        put_opt(offset, o as usize);
        put_opt(size, s as usize);
        Ok(())
    }
}

/// Parameter layout of a function, for tests and the launch path.
pub fn function_layout(function: Handle) -> CuResult<Arc<FunctionInfo>> {
    rt()?.function(handle(function))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_images_are_cut_into_ordered_chunks() {
        assert_eq!(chunks(10, 4), vec![(0, 4), (4, 4), (8, 2)]);
        assert_eq!(chunks(8, 4), vec![(0, 4), (4, 4)]);
        assert!(chunks(0, 4).is_empty());
        let big = 3 * IMAGE_CHUNK + 17;
        let parts = chunks(big, IMAGE_CHUNK);
        assert_eq!(parts.len(), 4);
        assert_eq!(parts.iter().map(|p| p.1).sum::<usize>(), big);
        assert!(parts.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0));
    }

    #[test]
    fn loading_mode_follows_cuda_module_loading_and_defaults_to_lazy() {
        assert_eq!(loading_mode(None), LAZY_LOADING);
        assert_eq!(loading_mode(Some("EAGER")), EAGER_LOADING);
        assert_eq!(loading_mode(Some("lazy")), LAZY_LOADING);
        assert_eq!(loading_mode(Some("bogus")), LAZY_LOADING);
    }
}
