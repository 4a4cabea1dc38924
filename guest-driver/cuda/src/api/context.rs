//! Contexts. The context stack is the calling thread's own (kept here);
//! every call that runs in a context names it to the backend, which keeps
//! one host context per guest context.

use std::ffi::{c_int, c_uint, c_void};

use vgpu_protocol::messages::{
    CuCtxCreate, CuCtxDestroy, CuCtxSynchronize, CuPrimaryCtxRelease, CuPrimaryCtxReset,
    CuPrimaryCtxRetain,
};
use vgpu_protocol::Request;

use super::export;
use crate::ffi::{entry, get, handle, put, put_opt, result, to_ptr, CUdevice, CuResult, Handle};
use crate::runtime::{
    current_context, forget_context, lock, pop_context, push_context, require_context, rt,
    set_current, ContextInfo,
};

fn create(pctx: *mut Handle, flags: c_uint, device: CUdevice) -> CuResult<()> {
    let rt = rt()?;
    rt.device(device)?;
    let ctx = rt.new_handle();
    rt.defer(Request::CuCtxCreate(CuCtxCreate {
        ctx,
        device: device as u32,
        flags,
    }))?;
    lock(&rt.contexts).insert(ctx, ContextInfo { flags });
    push_context(ctx);
    put(pctx, to_ptr(ctx))
}

/// A context of this library: a created or retained one, or the primary
/// context before its retain (the driver's primary context exists from the
/// start; cudart names it before retaining it).
fn known(ctx: u64) -> CuResult<ContextInfo> {
    let rt = rt()?;
    if let Some(info) = lock(&rt.contexts).get(&ctx) {
        return Ok(*info);
    }
    let primary = lock(&rt.primary);
    if ctx != 0 && ctx == primary.handle {
        return Ok(ContextInfo {
            flags: primary.flags,
        });
    }
    Err(result::ERROR_INVALID_CONTEXT)
}

entry! {
    fn cuCtxCreate_v2(pctx: *mut Handle, flags: c_uint, device: CUdevice) {
        create(pctx, flags, device)
    }
}

entry! {
    /// CUDA 11.4's form: execution-affinity parameters (none supported).
    fn cuCtxCreate_v3(pctx: *mut Handle, params: *mut c_void, count: c_int, flags: c_uint, device: CUdevice) {
        if count != 0 || !params.is_null() {
            return Err(result::ERROR_NOT_SUPPORTED);
        }
        create(pctx, flags, device)
    }
}

/// `CUctxCreateParams`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct CtxCreateParams {
    pub exec_affinity: *mut c_void,
    pub num_exec_affinity: c_int,
    pub cig: *mut c_void,
}

entry! {
    /// CUDA 12.5's form (what `cuCtxCreate` means in CUDA 13 headers).
    fn cuCtxCreate_v4(pctx: *mut Handle, params: *const CtxCreateParams, flags: c_uint, device: CUdevice) {
        if !params.is_null() {
            let p = get(params)?;
            if p.num_exec_affinity != 0 || !p.cig.is_null() {
                return Err(result::ERROR_NOT_SUPPORTED);
            }
        }
        create(pctx, flags, device)
    }
}

entry! {
    fn cuCtxDestroy_v2(ctx: Handle) | cuCtxDestroy {
        let ctx = handle(ctx);
        let rt = rt()?;
        if lock(&rt.contexts).remove(&ctx).is_none() {
            return Err(result::ERROR_INVALID_CONTEXT);
        }
        forget_context(ctx);
        export::context_gone(ctx);
        // Answered: what the context's kernels printed comes back with it.
        rt.call(Request::CuCtxDestroy(CuCtxDestroy { ctx })).map(drop)
    }
}

entry! {
    fn cuCtxPushCurrent_v2(ctx: Handle) | cuCtxPushCurrent {
        let ctx = handle(ctx);
        known(ctx)?;
        push_context(ctx);
        Ok(())
    }
}

entry! {
    fn cuCtxPopCurrent_v2(pctx: *mut Handle) | cuCtxPopCurrent {
        let ctx = pop_context().ok_or(result::ERROR_INVALID_CONTEXT)?;
        put_opt(pctx, to_ptr(ctx));
        Ok(())
    }
}

entry! {
    fn cuCtxSetCurrent(ctx: Handle) {
        let ctx = handle(ctx);
        if ctx != 0 {
            known(ctx)?;
        }
        set_current(ctx);
        Ok(())
    }
}

entry! {
    fn cuCtxGetCurrent(pctx: *mut Handle) {
        rt()?;
        put(pctx, to_ptr(current_context()))
    }
}

/// The context a `_v2` call names, or the current one for NULL (CUDA 13).
fn named_or_current(ctx: Handle) -> CuResult<u64> {
    match handle(ctx) {
        0 => require_context(),
        ctx => Ok(ctx),
    }
}

entry! {
    fn cuCtxGetDevice(device: *mut CUdevice) {
        known(require_context()?)?;
        put(device, 0)
    }
}

entry! {
    /// CUDA 13's form: the device of `ctx`, or of the current context.
    fn cuCtxGetDevice_v2(device: *mut CUdevice, ctx: Handle) {
        known(named_or_current(ctx)?)?;
        put(device, 0)
    }
}

entry! {
    fn cuCtxGetFlags(flags: *mut c_uint) {
        put(flags, known(require_context()?)?.flags)
    }
}

entry! {
    fn cuCtxGetApiVersion(ctx: Handle, version: *mut c_uint) {
        known(named_or_current(ctx)?)?;
        put(version, 3020)
    }
}

fn synchronize(ctx: u64) -> CuResult<()> {
    known(ctx)?;
    let rt = rt()?;
    let (horizon, done) = {
        let order = lock(&rt.order);
        let horizon = order.context_horizon(ctx);
        let done = order.horizon_done(&horizon);
        (horizon, done)
    };
    let request = Request::CuCtxSynchronize(CuCtxSynchronize { ctx });
    super::readback::synchronize(rt, horizon, done, request)?;
    super::mem_pool::synchronized(ctx, None)
}

entry! {
    fn cuCtxSynchronize() {
        synchronize(require_context()?)
    }
}

entry! {
    /// CUDA 13's form: waits for `ctx`, or for the current context.
    fn cuCtxSynchronize_v2(ctx: Handle) {
        synchronize(named_or_current(ctx)?)
    }
}

entry! {
    /// A preference only: accepted, without effect.
    fn cuCtxSetCacheConfig(config: c_int) {
        let _ = config;
        require_context().map(drop)
    }
}

entry! {
    fn cuCtxGetCacheConfig(config: *mut c_int) {
        require_context()?;
        put(config, 0)
    }
}

/// The primary context's handle, chosen once and kept for the process, as
/// the driver keeps it: cudart asks for it (export table) before retaining.
pub(crate) fn primary_handle(device: CUdevice) -> CuResult<Handle> {
    let rt = rt()?;
    rt.device(device)?;
    let mut primary = lock(&rt.primary);
    if primary.handle == 0 {
        primary.handle = rt.new_handle();
    }
    Ok(to_ptr(primary.handle))
}

entry! {
    fn cuDevicePrimaryCtxRetain(pctx: *mut Handle, device: CUdevice) {
        let ctx = handle(primary_handle(device)?);
        let rt = rt()?;
        let mut primary = lock(&rt.primary);
        if primary.refs == 0 {
            rt.defer(Request::CuPrimaryCtxRetain(CuPrimaryCtxRetain { ctx, device: device as u32 }))?;
            lock(&rt.contexts).insert(ctx, ContextInfo { flags: primary.flags });
        }
        primary.refs += 1;
        put(pctx, to_ptr(ctx))
    }
}

entry! {
    fn cuDevicePrimaryCtxRelease_v2(device: CUdevice) | cuDevicePrimaryCtxRelease {
        let rt = rt()?;
        rt.device(device)?;
        let mut primary = lock(&rt.primary);
        if primary.refs == 0 {
            return Err(result::ERROR_INVALID_CONTEXT);
        }
        primary.refs -= 1;
        if primary.refs == 0 {
            lock(&rt.contexts).remove(&primary.handle);
            forget_context(primary.handle);
            export::context_gone(primary.handle);
            // Answered: what the context's kernels printed comes back with it.
            let release = CuPrimaryCtxRelease { device: device as u32 };
            rt.call(Request::CuPrimaryCtxRelease(release))?;
        }
        Ok(())
    }
}

entry! {
    fn cuDevicePrimaryCtxReset_v2(device: CUdevice) | cuDevicePrimaryCtxReset {
        let rt = rt()?;
        rt.device(device)?;
        let mut primary = lock(&rt.primary);
        if primary.refs > 0 {
            lock(&rt.contexts).remove(&primary.handle);
            forget_context(primary.handle);
            export::context_gone(primary.handle);
            primary.refs = 0;
        }
        let reset = CuPrimaryCtxReset { device: device as u32 };
        rt.call(Request::CuPrimaryCtxReset(reset)).map(drop)
    }
}

entry! {
    fn cuDevicePrimaryCtxGetState(device: CUdevice, flags: *mut c_uint, active: *mut c_int) {
        let rt = rt()?;
        rt.device(device)?;
        let primary = lock(&rt.primary);
        put(flags, primary.flags)?;
        put(active, c_int::from(primary.refs > 0))
    }
}

entry! {
    /// Flags are recorded; the backend's host context keeps its defaults.
    fn cuDevicePrimaryCtxSetFlags_v2(device: CUdevice, flags: c_uint) | cuDevicePrimaryCtxSetFlags {
        let rt = rt()?;
        rt.device(device)?;
        lock(&rt.primary).flags = flags;
        Ok(())
    }
}

entry! {
    /// The host device's stream priorities (numerically lower is higher).
    fn cuCtxGetStreamPriorityRange(least: *mut c_int, greatest: *mut c_int) {
        let rt = rt()?;
        let ctx = require_context()?;
        let reply: vgpu_protocol::cuda::CuIntReply = crate::runtime::decode(&rt.call(
            Request::CuCtxGetStreamPriorityRange(vgpu_protocol::messages::CuCtxGetStreamPriorityRange { ctx }),
        )?)?;
        put_opt(least, reply.value);
        put_opt(greatest, reply.second);
        Ok(())
    }
}

entry! {
    /// Sets a limit of the host context (stack size, printf FIFO, heap,
    /// ...): the backend charges the memory the driver reserves for it to
    /// the VM's quota and carries it through checkpoints.
    fn cuCtxSetLimit(limit: c_int, value: usize) {
        let rt = rt()?;
        let ctx = require_context()?;
        let limit = u32::try_from(limit).map_err(|_| result::ERROR_INVALID_VALUE)?;
        rt.call(Request::CuCtxSetLimit(vgpu_protocol::messages::CuCtxSetLimit {
            ctx,
            limit,
            value: value as u64,
        }))
        .map(drop)
    }
}

entry! {
    /// The host context's limit (stack size, printf FIFO, heap, ...).
    fn cuCtxGetLimit(value: *mut usize, limit: c_int) {
        let rt = rt()?;
        let ctx = require_context()?;
        let limit = u32::try_from(limit).map_err(|_| result::ERROR_INVALID_VALUE)?;
        let reply: vgpu_protocol::cuda::CuValueReply = crate::runtime::decode(&rt.call(
            Request::CuCtxGetLimit(vgpu_protocol::messages::CuCtxGetLimit { ctx, limit }),
        )?)?;
        put(value, usize::try_from(reply.value).map_err(|_| result::ERROR_UNKNOWN)?)
    }
}
