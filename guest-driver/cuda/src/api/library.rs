//! The library/kernel API (`cuLibrary*`, `cuKernel*`), through which CUDA
//! 12+ runtimes load their kernels. A library is context-independent; on
//! the backend each context that uses it holds it as a module (the image
//! travels once per context, in chunks when large, and is kept there for
//! snapshots like any module's). A `CUkernel` is the function handle of
//! the context where it was first looked up, so it is accepted wherever a
//! `CUfunction` is (launches, attributes, occupancy) in that context;
//! `cuKernelGetFunction` gives the function of the current context.
//!
//! The image stays in the library only while no context holds it (loaded
//! with no context current) or as a pointer when the caller promised to
//! keep it (`CU_LIBRARY_BINARY_IS_PRESERVED`): otherwise a second context
//! cannot load it and gets `CUDA_ERROR_NOT_SUPPORTED`.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CString};
use std::sync::{Arc, Mutex};

use vgpu_protocol::messages::CuModuleUnload;
use vgpu_protocol::Request;

use crate::ffi::{c_str, entry, handle, put, put_opt, result, to_ptr, CuResult, Handle};
use crate::image::image_bytes;
use crate::runtime::{current_context, lock, rt, Runtime};

use super::module::{get_function, get_global, send_image};

/// `CUlibraryOption` `CU_LIBRARY_BINARY_IS_PRESERVED`.
const BINARY_IS_PRESERVED: c_int = 1;

/// Where a library's image can be read again.
#[derive(Debug)]
enum Source {
    /// Not kept: only the contexts holding it already can use the library.
    None,
    /// A copy (the library was loaded with no context current).
    Bytes(Arc<Vec<u8>>),
    /// The caller's own image, preserved until `cuLibraryUnload`.
    Preserved(usize),
}

#[derive(Debug)]
struct Library {
    source: Source,
    /// Context → the module holding the library there.
    modules: HashMap<u64, u64>,
    /// (context, kernel name) → function handle.
    functions: HashMap<(u64, Vec<u8>), u64>,
}

/// What a `CUkernel` names.
#[derive(Debug)]
struct Kernel {
    library: u64,
    name: CString,
    ctx: u64,
}

#[derive(Default)]
struct Libraries {
    libraries: HashMap<u64, Library>,
    kernels: HashMap<u64, Kernel>,
}

fn libraries() -> &'static Mutex<Libraries> {
    static LIBRARIES: std::sync::OnceLock<Mutex<Libraries>> = std::sync::OnceLock::new();
    LIBRARIES.get_or_init(Mutex::default)
}

/// Whether the library options say the image outlives the library.
///
/// # Safety
///
/// `options` and `values` hold `count` entries (or are NULL with 0).
unsafe fn preserved(options: *const c_int, values: *const *mut c_void, count: c_uint) -> bool {
    if options.is_null() || values.is_null() {
        return false;
    }
    (0..count as usize).any(|i| {
        // SAFETY: the caller passes `count` options and values.
        let (option, value) = unsafe { (*options.add(i), *values.add(i)) };
        option == BINARY_IS_PRESERVED && !value.is_null()
    })
}

impl Library {
    /// The module holding this library in `ctx`, loading it there first.
    fn module_in(&mut self, rt: &Runtime, ctx: u64) -> CuResult<u64> {
        if let Some(&module) = self.modules.get(&ctx) {
            return Ok(module);
        }
        if ctx == 0 {
            return Err(result::ERROR_INVALID_CONTEXT);
        }
        let image = match &self.source {
            Source::None => return Err(result::ERROR_NOT_SUPPORTED),
            Source::Bytes(bytes) => bytes.as_ref().clone(),
            Source::Preserved(at) => image_bytes(*at as *const c_void)?,
        };
        let module = rt.new_handle();
        send_image(rt, module, ctx, image)?;
        self.modules.insert(ctx, module);
        if matches!(self.source, Source::Bytes(_)) {
            self.source = Source::None;
        }
        Ok(module)
    }

    /// The context to use for a call: the current one, else one holding
    /// the library already.
    fn context(&self) -> u64 {
        match current_context() {
            0 => self.modules.keys().copied().min().unwrap_or(0),
            ctx => ctx,
        }
    }
}

fn load(plibrary: *mut Handle, image: Vec<u8>, preserved_at: Option<usize>) -> CuResult<()> {
    let rt = rt()?;
    let library = rt.new_handle();
    let ctx = current_context();
    let mut entry = Library {
        source: Source::None,
        modules: HashMap::new(),
        functions: HashMap::new(),
    };
    if ctx == 0 {
        entry.source = Source::Bytes(Arc::new(image));
    } else {
        let module = rt.new_handle();
        send_image(rt, module, ctx, image)?;
        entry.modules.insert(ctx, module);
    }
    if let Some(at) = preserved_at {
        entry.source = Source::Preserved(at);
    }
    lock(libraries()).libraries.insert(library, entry);
    put(plibrary, to_ptr(library))
}

entry! {
    fn cuLibraryLoadData(
        plibrary: *mut Handle,
        code: *const c_void,
        _jit_options: *mut c_int,
        _jit_values: *mut *mut c_void,
        _jit_count: c_uint,
        library_options: *mut c_int,
        library_values: *mut *mut c_void,
        library_count: c_uint,
    ) {
        let image = image_bytes(code)?;
        // SAFETY: the application passes `library_count` options and values.
        let keep = unsafe { preserved(library_options, library_values, library_count) };
        load(plibrary, image, keep.then_some(code as usize))
    }
}

entry! {
    fn cuLibraryLoadFromFile(
        plibrary: *mut Handle,
        file_name: *const c_char,
        _jit_options: *mut c_int,
        _jit_values: *mut *mut c_void,
        _jit_count: c_uint,
        _library_options: *mut c_int,
        _library_values: *mut *mut c_void,
        _library_count: c_uint,
    ) {
        let path = std::str::from_utf8(c_str(file_name)?).map_err(|_| result::ERROR_INVALID_VALUE)?;
        let file = std::fs::read(path).map_err(|_| result::ERROR_FILE_NOT_FOUND)?;
        if file.len() as u64 > vgpu_protocol::cuda::MAX_IMAGE_LEN {
            return Err(result::ERROR_INVALID_IMAGE);
        }
        load(plibrary, file, None)
    }
}

entry! {
    fn cuLibraryUnload(library: Handle) {
        let rt = rt()?;
        let library = handle(library);
        let mut all = lock(libraries());
        let entry = all.libraries.remove(&library).ok_or(result::ERROR_INVALID_HANDLE)?;
        all.kernels.retain(|_, k| k.library != library);
        drop(all);
        {
            let mut functions = rt.functions.write().unwrap_or_else(|e| e.into_inner());
            for function in entry.functions.values() {
                functions.remove(function);
            }
        }
        for module in entry.modules.values() {
            rt.defer(Request::CuModuleUnload(CuModuleUnload { module: *module }))?;
        }
        Ok(())
    }
}

/// The function of kernel `name` of `library` in `ctx` (looked up once).
fn function_in(
    rt: &Runtime,
    all: &mut Libraries,
    library: u64,
    name: &[u8],
    ctx: u64,
) -> CuResult<u64> {
    let entry = all
        .libraries
        .get_mut(&library)
        .ok_or(result::ERROR_INVALID_HANDLE)?;
    let key = (ctx, name.to_vec());
    if let Some(&function) = entry.functions.get(&key) {
        return Ok(function);
    }
    let module = entry.module_in(rt, ctx)?;
    let function = get_function(rt, module, name.to_vec())?;
    entry.functions.insert(key, function);
    Ok(function)
}

entry! {
    fn cuLibraryGetKernel(pkernel: *mut Handle, library: Handle, name: *const c_char) {
        let rt = rt()?;
        let library = handle(library);
        let name = c_str(name)?;
        let mut all = lock(libraries());
        let ctx = all.libraries.get(&library).ok_or(result::ERROR_INVALID_HANDLE)?.context();
        let cname = CString::new(name.to_vec()).map_err(|_| result::ERROR_INVALID_VALUE)?;
        if ctx == 0 {
            // No context yet (cudart asks before its first launch made
            // one): a kernel is context-independent, so it is found in the
            // context current at its first use (`kernel_function`).
            let known = all
                .kernels
                .iter()
                .find(|(_, k)| k.ctx == 0 && k.library == library && k.name == cname)
                .map(|(&h, _)| h);
            let kernel = known.unwrap_or_else(|| rt.new_handle());
            all.kernels.entry(kernel).or_insert(Kernel { library, name: cname, ctx });
            return put(pkernel, to_ptr(kernel));
        }
        let function = function_in(rt, &mut all, library, name, ctx)?;
        all.kernels.entry(function).or_insert(Kernel { library, name: cname, ctx });
        put(pkernel, to_ptr(function))
    }
}

entry! {
    fn cuLibraryGetModule(pmodule: *mut Handle, library: Handle) {
        let rt = rt()?;
        let mut all = lock(libraries());
        let entry = all.libraries.get_mut(&handle(library)).ok_or(result::ERROR_INVALID_HANDLE)?;
        let ctx = entry.context();
        let module = entry.module_in(rt, ctx)?;
        put(pmodule, to_ptr(module))
    }
}

entry! {
    fn cuLibraryGetGlobal(dptr: *mut u64, bytes: *mut usize, library: Handle, name: *const c_char) {
        let rt = rt()?;
        let name = c_str(name)?.to_vec();
        let module = {
            let mut all = lock(libraries());
            let entry = all.libraries.get_mut(&handle(library)).ok_or(result::ERROR_INVALID_HANDLE)?;
            let ctx = entry.context();
            entry.module_in(rt, ctx)?
        };
        log::trace!("cuLibraryGetGlobal {}", String::from_utf8_lossy(&name));
        let (ptr, size) = get_global(rt, module, name)?;
        log::trace!("cuLibraryGetGlobal: {ptr:#x}, {size} bytes");
        put_opt(dptr, ptr);
        put_opt(bytes, size as usize);
        Ok(())
    }
}

/// The function a `CUkernel` stands for in the current context (the
/// kernel's own handle in the context it was looked up in).
pub(crate) fn kernel_function(kernel: u64) -> CuResult<u64> {
    let rt = rt()?;
    let mut all = lock(libraries());
    let (library, name, home) = match all.kernels.get(&kernel) {
        Some(k) => (k.library, k.name.as_bytes().to_vec(), k.ctx),
        // A plain function handle is accepted too.
        None => return rt.function(kernel).map(|_| kernel),
    };
    let ctx = current_context();
    if home != 0 && (ctx == 0 || ctx == home) {
        return Ok(kernel);
    }
    if ctx == 0 {
        return Err(result::ERROR_INVALID_CONTEXT);
    }
    function_in(rt, &mut all, library, &name, ctx)
}

entry! {
    fn cuKernelGetFunction(pfunction: *mut Handle, kernel: Handle) {
        put(pfunction, to_ptr(kernel_function(handle(kernel))?))
    }
}

fn code(r: crate::ffi::CUresult) -> CuResult<()> {
    match r {
        0 => Ok(()),
        c => Err(c),
    }
}

entry! {
    fn cuKernelGetAttribute(value: *mut c_int, attribute: c_int, kernel: Handle, _device: c_int) {
        let function = to_ptr(kernel_function(handle(kernel))?);
        // SAFETY: the application's output pointer, passed on.
        code(unsafe { super::module::cuFuncGetAttribute(value, attribute, function) })
    }
}

entry! {
    fn cuKernelSetAttribute(attribute: c_int, value: c_int, kernel: Handle, _device: c_int) {
        let function = to_ptr(kernel_function(handle(kernel))?);
        // SAFETY: no pointers are involved.
        code(unsafe { super::module::cuFuncSetAttribute(function, attribute, value) })
    }
}

entry! {
    fn cuKernelSetCacheConfig(kernel: Handle, config: c_int, _device: c_int) {
        let function = to_ptr(kernel_function(handle(kernel))?);
        // SAFETY: no pointers are involved.
        code(unsafe { super::module::cuFuncSetCacheConfig(function, config) })
    }
}

entry! {
    fn cuKernelGetParamInfo(kernel: Handle, index: usize, offset: *mut usize, size: *mut usize) {
        let function = to_ptr(kernel_function(handle(kernel))?);
        // SAFETY: the application's output pointers, passed on.
        code(unsafe { super::module::cuFuncGetParamInfo(function, index, offset, size) })
    }
}

entry! {
    fn cuKernelGetName(name: *mut *const c_char, kernel: Handle) {
        rt()?;
        let all = lock(libraries());
        let kernel = all.kernels.get(&handle(kernel)).ok_or(result::ERROR_INVALID_HANDLE)?;
        // The string lives as long as the kernel's library.
        put(name, kernel.name.as_ptr())
    }
}

impl Libraries {
    /// The library a `CUkernel` was looked up in.
    fn library_of(&self, kernel: u64) -> CuResult<u64> {
        self.kernels
            .get(&kernel)
            .map(|k| k.library)
            .ok_or(result::ERROR_INVALID_HANDLE)
    }
}

entry! {
    fn cuKernelGetLibrary(plibrary: *mut Handle, kernel: Handle) {
        rt()?;
        let library = lock(libraries()).library_of(handle(kernel))?;
        put(plibrary, to_ptr(library))
    }
}

/// For tests: whether `options` mark the image preserved.
#[cfg(test)]
fn is_preserved(options: &[c_int], values: &[*mut c_void]) -> bool {
    // SAFETY: both slices hold `options.len()` entries.
    unsafe { preserved(options.as_ptr(), values.as_ptr(), options.len() as c_uint) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_is_preserved_only_when_asked_with_a_true_value() {
        assert!(!is_preserved(&[], &[]));
        assert!(is_preserved(
            &[BINARY_IS_PRESERVED],
            &[std::ptr::dangling_mut::<c_void>()]
        ));
        assert!(!is_preserved(
            &[BINARY_IS_PRESERVED],
            &[std::ptr::null_mut()]
        ));
        assert!(!is_preserved(&[0], &[std::ptr::dangling_mut::<c_void>()]));
    }

    #[test]
    fn a_kernel_names_its_library_and_an_unknown_handle_is_invalid() {
        let mut all = Libraries::default();
        all.kernels.insert(
            7,
            Kernel {
                library: 3,
                name: CString::from(c"k"),
                ctx: 1,
            },
        );
        assert_eq!(all.library_of(7), Ok(3));
        assert_eq!(all.library_of(8), Err(result::ERROR_INVALID_HANDLE));
    }
}
