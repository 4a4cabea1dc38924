//! Coarse-grained buffer SVM entry points. `clSVMAlloc` asks the backend for
//! an allocation and maps this process's memory at the very address the
//! device uses (`MAP_FIXED_NOREPLACE`: NULL when the range is taken here),
//! so pointers stored in SVM stay valid on the device. Maps read the device
//! copy into that memory, unmaps of writable maps send it back, and
//! memcpy/fill go to the device directly. Fine-grained and system SVM are
//! refused.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use opencl_sys::*;
use vgpu_protocol::messages::{
    CreateSvmBuffer, EnqueueMarker, EnqueueSvmCopy, EnqueueSvmFill, EnqueueSvmRead,
    EnqueueSvmWrite, SetKernelArg, SetKernelExecSvm, SvmAlloc, SvmFree,
};
use vgpu_protocol::{ArgKind, DataRef, Request};

use crate::api::entry::status_entry;
use crate::api::transfer::finish_blocking;
use crate::api::util::{array, bytes, bytes_mut, read, wait_list, NewEvent};
use crate::core::context::Context;
use crate::core::kernel::Kernel;
use crate::core::memory::Mem;
use crate::core::object::{Cl, ClResult, RawPtr};
use crate::core::pixels::Host;
use crate::core::platform;
use crate::core::queue::Queue;
use crate::core::svm::{self, Lookup, Region, PAGE};
use crate::core::sync;

type SvmFreeFn =
    Option<unsafe extern "C" fn(cl_command_queue, cl_uint, *mut *mut c_void, *mut c_void)>;

status_entry! {
    fn clEnqueueSVMFree(command_queue: cl_command_queue, num_svm_pointers: cl_uint, svm_pointers: *mut *mut c_void, pfn_free_func: SvmFreeFn, user_data: *mut c_void, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => enqueue_svm_free;
    fn clEnqueueSVMMemcpy(command_queue: cl_command_queue, blocking_copy: cl_bool, dst_ptr: *mut c_void, src_ptr: *const c_void, size: usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => enqueue_svm_memcpy;
    fn clEnqueueSVMMemFill(command_queue: cl_command_queue, svm_ptr: *mut c_void, pattern: *const c_void, pattern_size: usize, size: usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => enqueue_svm_mem_fill;
    fn clEnqueueSVMMap(command_queue: cl_command_queue, blocking_map: cl_bool, flags: cl_map_flags, svm_ptr: *mut c_void, size: usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => enqueue_svm_map;
    fn clEnqueueSVMUnmap(command_queue: cl_command_queue, svm_ptr: *mut c_void, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => enqueue_svm_unmap;
    fn clEnqueueSVMMigrateMem(command_queue: cl_command_queue, num_svm_pointers: cl_uint, svm_pointers: *mut *const c_void, sizes: *const usize, flags: cl_mem_migration_flags, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => enqueue_svm_migrate_mem;
    fn clSetKernelArgSVMPointer(kernel: cl_kernel, arg_index: cl_uint, arg_value: *const c_void) => set_kernel_arg_svm_pointer;
    fn clSetKernelExecInfo(kernel: cl_kernel, param_name: cl_kernel_exec_info, param_value_size: usize, param_value: *const c_void) => set_kernel_exec_info;
}

/// `clSVMAlloc`: NULL on any failure, as the specification says.
///
/// # Safety
///
/// `context` is whatever the application passed; it is only looked up.
#[no_mangle]
pub unsafe extern "C" fn clSVMAlloc(
    context: cl_context,
    flags: cl_svm_mem_flags,
    size: usize,
    alignment: cl_uint,
) -> *mut c_void {
    match catch_unwind(AssertUnwindSafe(|| {
        svm_alloc(context, flags, size, alignment)
    })) {
        Ok(Ok(ptr)) => ptr,
        Ok(Err(code)) => {
            log::debug!("clSVMAlloc: {code}");
            std::ptr::null_mut()
        }
        Err(_) => {
            log::error!("clSVMAlloc: internal error (panic)");
            std::ptr::null_mut()
        }
    }
}

/// `clSVMFree`.
///
/// # Safety
///
/// `svm_pointer` is only compared with this library's allocations.
#[no_mangle]
pub unsafe extern "C" fn clSVMFree(context: cl_context, svm_pointer: *mut c_void) {
    if catch_unwind(AssertUnwindSafe(|| svm_free(context, svm_pointer))).is_err() {
        log::error!("clSVMFree: internal error (panic)");
    }
}

const ACCESS: cl_svm_mem_flags = CL_MEM_READ_WRITE | CL_MEM_WRITE_ONLY | CL_MEM_READ_ONLY;

fn svm_alloc(
    context: cl_context,
    flags: cl_svm_mem_flags,
    size: usize,
    alignment: cl_uint,
) -> ClResult<*mut c_void> {
    let context = Cl::<Context>::get(context)?;
    // Only coarse-grained buffers: fine-grained and atomics flags fail, as
    // on a device without them.
    if flags & !ACCESS != 0 || (flags & ACCESS).count_ones() > 1 {
        return Err(CL_INVALID_VALUE);
    }
    if alignment != 0 && !alignment.is_power_of_two() {
        return Err(CL_INVALID_VALUE);
    }
    if size == 0 || size as u64 > context.device.number(CL_DEVICE_MAX_MEM_ALLOC_SIZE)? {
        return Err(CL_INVALID_VALUE);
    }
    let client = platform::client()?;
    let request = SvmAlloc {
        context: context.handle(),
        flags,
        size: size as u64,
        alignment,
    };
    let reply = client.call(request.into()).map_err(|s| s.0)?;
    let addr = reply
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or(CL_OUT_OF_RESOURCES)? as usize;
    let mapped = size.div_ceil(PAGE) * PAGE;
    let give_back = || {
        let free = SvmFree {
            context: context.handle(),
            ptr: addr as u64,
        };
        let _ = client.defer(free.into());
    };
    if addr == 0 || !addr.is_multiple_of(PAGE) {
        give_back();
        return Err(CL_OUT_OF_RESOURCES);
    }
    // SAFETY: a fresh anonymous mapping at a fixed address that must not
    // replace anything already mapped (MAP_FIXED_NOREPLACE); checked below.
    let got = unsafe {
        libc::mmap(
            addr as *mut libc::c_void,
            mapped,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    };
    if got != addr as *mut libc::c_void {
        // Taken here (or a kernel that ignores the flag placed it
        // elsewhere): the device's address cannot be ours.
        if got != libc::MAP_FAILED {
            svm::unmap(got as usize, mapped);
        }
        give_back();
        return Err(CL_OUT_OF_RESOURCES);
    }
    svm::regions().insert(
        addr,
        Region {
            start: addr,
            size,
            mapped,
            context,
            maps: Vec::new(),
        },
    );
    Ok(addr as *mut c_void)
}

fn svm_free(context: cl_context, ptr: *mut c_void) -> ClResult<()> {
    if ptr.is_null() {
        return Ok(());
    }
    let context = Cl::<Context>::get(context)?;
    let region = {
        let mut regions = svm::regions();
        match regions.get(&(ptr as usize)) {
            Some(r) if Arc::ptr_eq(&r.context, &context) => regions.remove(&(ptr as usize)),
            _ => None,
        }
    };
    let Some(region) = region else {
        return Err(CL_INVALID_VALUE);
    };
    svm::unmap(region.start, region.mapped);
    let free = SvmFree {
        context: context.handle(),
        ptr: region.start as u64,
    };
    platform::client()?.defer(free.into()).map_err(|s| s.0)
}

/// The allocation holding `[ptr, ptr + len)`, of the queue's context.
fn inside(queue: &Cl<Queue>, ptr: usize, len: usize) -> ClResult<Option<usize>> {
    match svm::lookup(ptr, len) {
        Lookup::Inside(start, context) if context == queue.context.as_ptr() as usize => {
            Ok(Some(start))
        }
        Lookup::Inside(..) => Err(CL_INVALID_CONTEXT),
        Lookup::Straddles => Err(CL_INVALID_VALUE),
        Lookup::Outside => Ok(None),
    }
}

/// A marker standing for a command that needs no device work.
fn marker(queue: &Arc<Cl<Queue>>, wait: Vec<u64>, new_event: NewEvent) -> ClResult<()> {
    let marker = EnqueueMarker {
        queue: queue.handle(),
        wait,
        event: new_event.handle(),
    };
    new_event.submit(queue, marker.into())
}

/// Moves bytes between `host` and device SVM at `ptr` (a read `Into`
/// `host`, a write `From` it); complete on return.
fn move_svm(queue: &Cl<Queue>, ptr: usize, host: Host, wait: Vec<u64>, event: u64) -> ClResult<()> {
    let total = match &host {
        Host::Into(buf) => buf.len(),
        Host::From(bytes) => bytes.len(),
    } as u64;
    let queue = queue.handle();
    // A chunk's device address, and the event on the last chunk only.
    let at = |data: DataRef, start: u64| {
        let last = start + data.len >= total;
        (ptr as u64 + start, if last { event } else { 0 })
    };
    let client = platform::client()?;
    match host {
        Host::Into(buf) => client.call_with_in(buf, |data, start| -> Request {
            let (ptr, event) = at(data, start);
            let wait = wait.clone();
            EnqueueSvmRead {
                queue,
                ptr,
                data,
                wait,
                event,
            }
            .into()
        }),
        Host::From(bytes) => client.call_with_out(bytes, |data, start| -> Request {
            let (ptr, event) = at(data, start);
            let wait = wait.clone();
            EnqueueSvmWrite {
                queue,
                ptr,
                data,
                wait,
                event,
            }
            .into()
        }),
    }
    .map(drop)
    .map_err(|s| s.0)
}

fn enqueue_svm_free(
    queue: cl_command_queue,
    num: cl_uint,
    ptrs: *mut *mut c_void,
    free_fn: SvmFreeFn,
    user_data: *mut c_void,
    num_events: cl_uint,
    events: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let queue = Cl::<Queue>::get(queue)?;
    // CL_INVALID_VALUE if num_svm_pointers is 0 and svm_pointers is not
    // NULL, or svm_pointers is NULL and num_svm_pointers is not 0.
    if (num == 0) != ptrs.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    let list: Vec<*mut c_void> = array(ptrs as *const *mut c_void, num as usize)?.to_vec();
    let wait = wait_list(&queue, num_events, events)?;
    let new_event = NewEvent::new(event, CL_COMMAND_SVM_FREE)?;
    // In order: everything before it completes, then the pointers go.
    marker(&queue, wait, new_event)?;
    sync::finish(&queue)?;
    match free_fn {
        // SAFETY: the application's callback with the arguments it gave.
        Some(f) => unsafe { f(queue.as_ptr() as cl_command_queue, num, ptrs, user_data) },
        None => {
            let context = queue.context.as_ptr() as cl_context;
            for ptr in list {
                svm_free(context, ptr)?;
            }
        }
    }
    Ok(())
}

fn enqueue_svm_memcpy(
    queue: cl_command_queue,
    blocking: cl_bool,
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
    num_events: cl_uint,
    events: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let queue = Cl::<Queue>::get(queue)?;
    // CL_INVALID_VALUE if dst_ptr or src_ptr is NULL.
    if dst.is_null() || src.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    let (d, s) = (dst as usize, src as usize);
    // CL_MEM_COPY_OVERLAP if the values specified for dst_ptr, src_ptr and
    // size result in an overlapping copy.
    if size > 0 && s < d.saturating_add(size) && d < s.saturating_add(size) {
        return Err(CL_MEM_COPY_OVERLAP);
    }
    let wait = wait_list(&queue, num_events, events)?;
    let new_event = NewEvent::new(event, CL_COMMAND_SVM_MEMCPY)?;
    if size == 0 {
        return marker(&queue, wait, new_event);
    }
    match (inside(&queue, d, size)?, inside(&queue, s, size)?) {
        (Some(_), Some(_)) => {
            let copy = EnqueueSvmCopy {
                queue: queue.handle(),
                dst: d as u64,
                src: s as u64,
                size: size as u64,
                wait,
                event: new_event.handle(),
            };
            let client = platform::client()?;
            if blocking != CL_FALSE {
                client.call(copy.into()).map_err(|s| s.0)?;
            } else {
                client.defer(copy.into()).map_err(|s| s.0)?;
            }
        }
        (Some(_), None) => {
            let host = Host::From(bytes(src, size)?);
            move_svm(&queue, d, host, wait, new_event.handle())?
        }
        (None, Some(_)) => {
            let host = Host::Into(bytes_mut(dst, size)?);
            move_svm(&queue, s, host, wait, new_event.handle())?
        }
        (None, None) => {
            // Host to host, in queue order.
            marker(&queue, wait, new_event)?;
            sync::finish(&queue)?;
            // SAFETY: the application's two ranges of `size` bytes, which
            // do not overlap (checked above).
            unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, size) };
            return finish_blocking(blocking);
        }
    }
    new_event.publish(&queue);
    finish_blocking(blocking)
}

fn enqueue_svm_mem_fill(
    queue: cl_command_queue,
    ptr: *mut c_void,
    pattern: *const c_void,
    pattern_size: usize,
    size: usize,
    num_events: cl_uint,
    events: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let queue = Cl::<Queue>::get(queue)?;
    // CL_INVALID_VALUE if svm_ptr is NULL or not aligned to pattern_size,
    // if pattern is NULL, pattern_size is 0 or not a power of two up to
    // 128, or size is not a multiple of pattern_size.
    if ptr.is_null() || pattern.is_null() || !pattern_size.is_power_of_two() || pattern_size > 128 {
        return Err(CL_INVALID_VALUE);
    }
    if !(ptr as usize).is_multiple_of(pattern_size) || !size.is_multiple_of(pattern_size) {
        return Err(CL_INVALID_VALUE);
    }
    let wait = wait_list(&queue, num_events, events)?;
    let new_event = NewEvent::new(event, CL_COMMAND_SVM_MEMFILL)?;
    if size == 0 {
        return marker(&queue, wait, new_event);
    }
    if inside(&queue, ptr as usize, size)?.is_none() {
        return Err(CL_INVALID_VALUE);
    }
    let fill = EnqueueSvmFill {
        queue: queue.handle(),
        ptr: ptr as u64,
        pattern: bytes(pattern, pattern_size)?.to_vec(),
        size: size as u64,
        wait,
        event: new_event.handle(),
    };
    new_event.submit(&queue, fill.into())
}

fn enqueue_svm_map(
    queue: cl_command_queue,
    blocking: cl_bool,
    flags: cl_map_flags,
    ptr: *mut c_void,
    size: usize,
    num_events: cl_uint,
    events: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let queue = Cl::<Queue>::get(queue)?;
    // CL_INVALID_VALUE if svm_ptr is NULL, size is 0, or flags are not
    // valid.
    let all = CL_MAP_READ | CL_MAP_WRITE | CL_MAP_WRITE_INVALIDATE_REGION;
    if ptr.is_null()
        || size == 0
        || flags & !all != 0
        || flags & CL_MAP_WRITE_INVALIDATE_REGION != 0 && flags & (CL_MAP_READ | CL_MAP_WRITE) != 0
    {
        return Err(CL_INVALID_VALUE);
    }
    let Some(start) = inside(&queue, ptr as usize, size)? else {
        return Err(CL_INVALID_VALUE);
    };
    let wait = wait_list(&queue, num_events, events)?;
    let new_event = NewEvent::new(event, CL_COMMAND_SVM_MAP)?;
    // Maps complete at once (allowed for non-blocking ones too): the
    // device copy is read into our copy at the same address.
    let host = Host::Into(bytes_mut(ptr, size)?);
    move_svm(&queue, ptr as usize, host, wait, new_event.handle())?;
    let writes = flags & (CL_MAP_WRITE | CL_MAP_WRITE_INVALIDATE_REGION) != 0;
    if let Some(region) = svm::regions().get_mut(&start) {
        region.maps.push((ptr as usize, size, writes));
    }
    new_event.publish(&queue);
    finish_blocking(blocking)
}

fn enqueue_svm_unmap(
    queue: cl_command_queue,
    ptr: *mut c_void,
    num_events: cl_uint,
    events: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let queue = Cl::<Queue>::get(queue)?;
    // CL_INVALID_VALUE if svm_ptr is NULL.
    if ptr.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    let Some(start) = inside(&queue, ptr as usize, 1)? else {
        return Err(CL_INVALID_VALUE);
    };
    let wait = wait_list(&queue, num_events, events)?;
    let new_event = NewEvent::new(event, CL_COMMAND_SVM_UNMAP)?;
    let map = svm::regions().get_mut(&start).and_then(|region| {
        let at = region.maps.iter().rposition(|m| m.0 == ptr as usize)?;
        Some(region.maps.remove(at))
    });
    match map {
        Some((_, size, true)) => {
            let host = Host::From(bytes(ptr, size)?);
            move_svm(&queue, ptr as usize, host, wait, new_event.handle())?;
            new_event.publish(&queue);
            Ok(())
        }
        // Read-only maps (and pointers never mapped) change nothing.
        _ => marker(&queue, wait, new_event),
    }
}

fn enqueue_svm_migrate_mem(
    queue: cl_command_queue,
    num: cl_uint,
    ptrs: *mut *const c_void,
    sizes: *const usize,
    flags: cl_mem_migration_flags,
    num_events: cl_uint,
    events: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let queue = Cl::<Queue>::get(queue)?;
    // CL_INVALID_VALUE if num_svm_pointers is zero or svm_pointers is
    // NULL, if flags are not valid, or if a pointer (with its size) is
    // not inside an SVM allocation.
    if num == 0 || ptrs.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    if flags & !(CL_MIGRATE_MEM_OBJECT_HOST | CL_MIGRATE_MEM_OBJECT_CONTENT_UNDEFINED) != 0 {
        return Err(CL_INVALID_VALUE);
    }
    let list = array(ptrs as *const *const c_void, num as usize)?;
    for (i, &ptr) in list.iter().enumerate() {
        let size = if sizes.is_null() {
            0
        } else {
            read(sizes.wrapping_add(i))?
        };
        if ptr.is_null() || inside(&queue, ptr as usize, size)?.is_none() {
            return Err(CL_INVALID_VALUE);
        }
    }
    let wait = wait_list(&queue, num_events, events)?;
    // Coarse-grained data lives on the device between maps: nothing moves.
    marker(
        &queue,
        wait,
        NewEvent::new(event, CL_COMMAND_SVM_MIGRATE_MEM)?,
    )
}

fn set_kernel_arg_svm_pointer(
    kernel: cl_kernel,
    index: cl_uint,
    value: *const c_void,
) -> ClResult<()> {
    let kernel = Cl::<Kernel>::get(kernel)?;
    // CL_INVALID_ARG_INDEX if arg_index is not a valid argument index.
    if index >= kernel.num_args()? {
        return Err(CL_INVALID_ARG_INDEX);
    }
    let context = kernel.program.context.as_ptr() as usize;
    let (kind, bytes) = if value.is_null() {
        (ArgKind::NullMem, Vec::new())
    } else {
        // CL_INVALID_ARG_VALUE if arg_value is not a valid value: here,
        // an address inside an SVM allocation of the kernel's context.
        match svm::lookup(value as usize, 1) {
            Lookup::Inside(_, c) if c == context => {
                (ArgKind::Svm, (value as u64).to_le_bytes().to_vec())
            }
            _ => return Err(CL_INVALID_ARG_VALUE),
        }
    };
    let set = SetKernelArg {
        kernel: kernel.handle(),
        index,
        arg_kind: kind as u32,
        size: std::mem::size_of::<*const c_void>() as u64,
        value: bytes,
        handle: 0,
    };
    let client = platform::client()?;
    let size = set.size;
    if kernel.accepted_before(index, kind, size) {
        client.defer(set.into()).map_err(|s| s.0)?;
    } else {
        client.call(set.into()).map_err(|s| s.0)?;
    }
    kernel.record_arg(index, kind, size);
    Ok(())
}

fn set_kernel_exec_info(
    kernel: cl_kernel,
    param: cl_kernel_exec_info,
    size: usize,
    value: *const c_void,
) -> ClResult<()> {
    let kernel = Cl::<Kernel>::get(kernel)?;
    match param {
        CL_KERNEL_EXEC_INFO_SVM_PTRS => {
            let pointer = std::mem::size_of::<*const c_void>();
            if !size.is_multiple_of(pointer) || (value.is_null() && size > 0) {
                return Err(CL_INVALID_VALUE);
            }
            let context = kernel.program.context.as_ptr() as usize;
            let list = array(value as *const usize, size / pointer)?;
            for &ptr in list {
                match svm::lookup(ptr, 1) {
                    Lookup::Inside(_, c) if c == context => {}
                    _ => return Err(CL_INVALID_VALUE),
                }
            }
            let set = SetKernelExecSvm {
                kernel: kernel.handle(),
                ptrs: list.iter().map(|&p| p as u64).collect(),
            };
            platform::client()?.defer(set.into()).map_err(|s| s.0)
        }
        CL_KERNEL_EXEC_INFO_SVM_FINE_GRAIN_SYSTEM => {
            if size != std::mem::size_of::<cl_bool>() || value.is_null() {
                return Err(CL_INVALID_VALUE);
            }
            // CL_INVALID_OPERATION if fine-grained system SVM is asked of a
            // device that does not support it.
            match read(value as *const cl_bool)? {
                CL_FALSE => Ok(()),
                _ => Err(CL_INVALID_OPERATION),
            }
        }
        _ => Err(CL_INVALID_VALUE),
    }
}

/// `clCreateBuffer(CL_MEM_USE_HOST_PTR)` on an SVM pointer: a buffer over
/// the device's SVM itself (`None` when `host_ptr` is no SVM).
pub(crate) fn buffer_over_svm(
    context: &Arc<Cl<Context>>,
    flags: cl_mem_flags,
    size: usize,
    host_ptr: *mut c_void,
) -> ClResult<Option<cl_mem>> {
    match svm::lookup(host_ptr as usize, size) {
        Lookup::Outside => return Ok(None),
        Lookup::Inside(_, c) if c == context.as_ptr() as usize => {}
        // CL_INVALID_HOST_PTR: SVM of another context, or past its end.
        _ => return Err(CL_INVALID_HOST_PTR),
    }
    let client = platform::client()?;
    let mem = client.new_handle();
    let create = CreateSvmBuffer {
        mem,
        context: context.handle(),
        flags: flags & (CL_MEM_READ_WRITE | CL_MEM_WRITE_ONLY | CL_MEM_READ_ONLY),
        ptr: host_ptr as u64,
        size: size as u64,
    };
    client.defer(create.into()).map_err(|s| s.0)?;
    let object = Mem::new(
        context.clone(),
        flags,
        size as u64,
        RawPtr::new(host_ptr),
        None,
    );
    object.uses_svm.store(true, Ordering::Relaxed);
    Ok(Some(Cl::publish(mem, object).as_ptr()))
}
