//! Coarse-grained buffer SVM. An SVM pointer is a device address, so the
//! guest sees the backend's own addresses: every pointer and range a guest
//! names is looked up in the session's allocations by address range, and
//! anything outside them is refused before the device sees it. No guest can
//! make the device read or write backend memory that is not its own SVM.
//!
//! Allocations are page-aligned and page-sized here so the guest library can
//! map its copy at exactly the same addresses, one mapping per allocation.
//!
//! SVM addresses cannot be recreated at the same place by another driver
//! instance, so a session that holds SVM refuses snapshots (see `holds_svm`).

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, Weak};

use cl3::types::CL_BLOCKING;
use vgpu_protocol::messages::*;
use vgpu_protocol::Status;

use super::objects::{ArgRecord, ContextEntry, HostEvent, HostMem};
use super::session::OpenClSession;
use crate::chain::{GuestIo, Segment};

/// Granularity of every allocation (the guest maps whole pages).
pub const SVM_PAGE: u64 = 4096;
/// At most this many live allocations per session.
pub const MAX_SVM_ALLOCATIONS: usize = 1 << 16;

const CL_MEM_READ_WRITE: u64 = 1;
const CL_MEM_WRITE_ONLY: u64 = 2;
const CL_MEM_READ_ONLY: u64 = 4;
const CL_MEM_USE_HOST_PTR: u64 = 8;
const CL_MEM_ALLOC_HOST_PTR: u64 = 16;
const CL_MEM_COPY_HOST_PTR: u64 = 32;

/// One `clSVMAlloc` of the session, freed when the last holder lets go
/// (the table, kernel arguments, buffers created over it).
#[derive(Debug)]
pub struct SvmAllocation {
    /// What `clSVMAlloc` returned.
    raw: *mut c_void,
    /// The address the guest sees: the first aligned page inside.
    start: u64,
    /// Bytes the guest asked for: ranges are checked against this.
    pub size: u64,
    pub context: Arc<ContextEntry>,
    _charge: Option<crate::quota::Charge>,
}

// SAFETY: the pointer is an SVM allocation owned by this record; OpenCL SVM
// calls are thread-safe.
unsafe impl Send for SvmAllocation {}
// SAFETY: as above.
unsafe impl Sync for SvmAllocation {}

impl SvmAllocation {
    pub fn start(&self) -> u64 {
        self.start
    }

    /// Whether `[addr, addr + len)` lies inside the allocation.
    pub fn contains(&self, addr: u64, len: u64) -> bool {
        let start = self.start();
        addr >= start
            && addr
                .checked_add(len)
                .is_some_and(|end| end <= start + self.size)
    }
}

impl Drop for SvmAllocation {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from clSVMAlloc on this context and is freed
        // once; every command that could use it completed (see `free`).
        if let Err(code) = unsafe { cl3::memory::svm_free(self.context.ctx.0, self.raw) } {
            log::warn!("SVM free failed: {code}");
        }
    }
}

/// The session's SVM allocations by start address, and the buffers made
/// over them (which keep their allocation alive).
#[derive(Debug, Default)]
pub struct SvmTable {
    allocs: BTreeMap<u64, Arc<SvmAllocation>>,
    /// Freed by the guest while a user event held a queue: kept until the
    /// queues can be finished (a later free, or the session's end).
    retired: Vec<Arc<SvmAllocation>>,
    pins: Mutex<Vec<(Weak<HostMem>, Arc<SvmAllocation>)>>,
}

impl SvmTable {
    /// The allocation that holds all of `[addr, addr + len)`.
    pub fn find(&self, addr: u64, len: u64) -> Option<&Arc<SvmAllocation>> {
        let (_, alloc) = self.allocs.range(..=addr).next_back()?;
        alloc.contains(addr, len).then_some(alloc)
    }

    /// Whether the session holds SVM: allocations, or buffers over freed ones.
    pub fn holds_svm(&self) -> bool {
        let mut pins = self.pins.lock().unwrap_or_else(|e| e.into_inner());
        pins.retain(|(mem, _)| mem.strong_count() > 0);
        !self.allocs.is_empty() || !self.retired.is_empty() || !pins.is_empty()
    }

    pub(super) fn count(&self) -> usize {
        self.allocs.len()
    }
}

fn usize_of(v: u64) -> Result<usize, Status> {
    usize::try_from(v).map_err(|_| Status::INVALID_VALUE)
}

fn round_up(v: u64, to: u64) -> Option<u64> {
    v.checked_add(to - 1).map(|x| x / to * to)
}

impl OpenClSession {
    /// The allocation holding `[addr, addr + len)` (`len > 0`), else `err`.
    pub(super) fn svm_range(
        &self,
        addr: u64,
        len: u64,
        err: Status,
    ) -> Result<Arc<SvmAllocation>, Status> {
        if len == 0 {
            return Err(err);
        }
        self.svm.find(addr, len).cloned().ok_or(err)
    }

    /// Completes everything queued on the session's queues, so freed SVM is
    /// never touched by a command still in flight.
    fn finish_all(&self) {
        for (_, queue, _) in self.queues.entries() {
            let _ = cl3::command_queue::finish(queue.queue.0);
        }
        for queue in &self.internal_queues {
            let _ = cl3::command_queue::finish(queue.queue.0);
        }
    }

    pub(super) fn svm_alloc(&mut self, m: &SvmAlloc) -> Result<Vec<u8>, Status> {
        let context = self.contexts.get(m.context)?.clone();
        let access = m.flags & (CL_MEM_READ_WRITE | CL_MEM_WRITE_ONLY | CL_MEM_READ_ONLY);
        // Only coarse-grained buffers: fine-grain and atomics flags, and
        // anything unknown, are refused.
        if m.flags != access || access.count_ones() > 1 {
            return Err(Status::INVALID_VALUE);
        }
        if m.alignment != 0 && !m.alignment.is_power_of_two() {
            return Err(Status::INVALID_VALUE);
        }
        if m.size == 0 || self.svm.count() >= MAX_SVM_ALLOCATIONS {
            return Err(Status::INVALID_VALUE);
        }
        if m.size > self.largest_allocation()? {
            return Err(Status::INVALID_VALUE);
        }
        // Implementations refuse page alignment: allocate a page more and
        // hand out the first page boundary inside, so the guest's mapping
        // of whole pages covers this allocation only.
        let alignment = (m.alignment as u64).max(SVM_PAGE);
        let padded = round_up(m.size, SVM_PAGE)
            .and_then(|s| s.checked_add(alignment))
            .ok_or(Status::INVALID_VALUE)?;
        let charge = self
            .quota
            .as_ref()
            .map(|q| q.charge_memory(padded))
            .transpose()?;
        let flags = if access == 0 {
            CL_MEM_READ_WRITE
        } else {
            access
        };
        // SAFETY: a live context; flags name a coarse-grained buffer.
        let raw = unsafe { cl3::memory::svm_alloc(context.ctx.0, flags, usize_of(padded)?, 0) }
            .map_err(|_| Status::OUT_OF_RESOURCES)?;
        let start = round_up(raw as u64, alignment).ok_or(Status::OUT_OF_RESOURCES)?;
        let alloc = Arc::new(SvmAllocation {
            raw,
            start,
            size: m.size,
            context,
            _charge: charge,
        });
        let addr = alloc.start();
        self.svm.allocs.insert(addr, alloc);
        Ok(addr.to_le_bytes().to_vec())
    }

    pub(super) fn svm_free(&mut self, m: &SvmFree) -> Result<(), Status> {
        let context = self.contexts.get(m.context)?.clone();
        match self.svm.allocs.get(&m.ptr) {
            Some(alloc) if Arc::ptr_eq(&alloc.context, &context) => {}
            _ => return Err(Status::INVALID_VALUE),
        }
        let alloc = self.svm.allocs.remove(&m.ptr);
        if self.has_unset_user_events() {
            // A queue may wait on a user event the guest has yet to set:
            // finishing now could block this session until it does.
            self.svm.retired.extend(alloc);
        } else {
            self.finish_all();
            drop(alloc);
            self.svm.retired.clear();
        }
        Ok(())
    }

    /// Moves bytes between guest pieces and SVM at `addr`, blocking.
    fn svm_transfer(
        &mut self,
        queue: u64,
        addr: u64,
        pieces: &[Segment],
        wait: &[u64],
        event: u64,
        to_device: bool,
    ) -> Result<(), Status> {
        let len: u64 = pieces.iter().map(|p| p.len as u64).sum();
        let queue = self.queue(queue)?;
        let alloc = self.svm_range(addr, len, Status::INVALID_VALUE)?;
        if !Arc::ptr_eq(&alloc.context, &queue.context) {
            return Err(Status::INVALID_CONTEXT);
        }
        let wait = self.wait_list(wait)?;
        let mut at = addr;
        let mut last: cl3::types::cl_event = std::ptr::null_mut();
        for (i, piece) in pieces.iter().enumerate() {
            let (n, list) = if i == 0 {
                (wait.len(), wait.ptr())
            } else {
                (0, std::ptr::null())
            };
            if !last.is_null() {
                drop(HostEvent(last));
            }
            let svm = at as *mut c_void;
            // SAFETY: `[at, at + piece.len)` lies inside a live SVM
            // allocation of the queue's context (checked above); `piece` is
            // live guest memory; the copy is blocking.
            last = unsafe {
                if to_device {
                    cl3::command_queue::enqueue_svm_mem_cpy(
                        queue.queue.0,
                        CL_BLOCKING,
                        svm,
                        piece.ptr as *const c_void,
                        piece.len,
                        n,
                        list,
                    )
                } else {
                    cl3::command_queue::enqueue_svm_mem_cpy(
                        queue.queue.0,
                        CL_BLOCKING,
                        piece.ptr as *mut c_void,
                        svm,
                        piece.len,
                        n,
                        list,
                    )
                }
            }
            .map_err(Status)?;
            at += piece.len as u64;
        }
        if last.is_null() {
            return Err(Status::INVALID_VALUE);
        }
        self.keep_event(&queue, event, last)
    }

    pub(super) fn svm_write(
        &mut self,
        m: &EnqueueSvmWrite,
        io: &mut GuestIo,
    ) -> Result<(), Status> {
        let pieces = io.out_slices(m.data)?;
        self.svm_transfer(m.queue, m.ptr, &pieces, &m.wait, m.event, true)
    }

    pub(super) fn svm_read(&mut self, m: &EnqueueSvmRead, io: &mut GuestIo) -> Result<(), Status> {
        let pieces = io.in_slices(m.data)?;
        self.svm_transfer(m.queue, m.ptr, &pieces, &m.wait, m.event, false)
    }

    pub(super) fn svm_copy(&mut self, m: &EnqueueSvmCopy) -> Result<(), Status> {
        let queue = self.queue(m.queue)?;
        let dst = self.svm_range(m.dst, m.size, Status::INVALID_VALUE)?;
        let src = self.svm_range(m.src, m.size, Status::INVALID_VALUE)?;
        if !Arc::ptr_eq(&dst.context, &queue.context) || !Arc::ptr_eq(&src.context, &queue.context)
        {
            return Err(Status::INVALID_CONTEXT);
        }
        if m.src < m.dst + m.size && m.dst < m.src + m.size {
            return Err(Status::MEM_COPY_OVERLAP);
        }
        let wait = self.wait_list(&m.wait)?;
        // SAFETY: both ranges lie inside live SVM allocations of the queue's
        // context (checked above) and do not overlap.
        let event = unsafe {
            cl3::command_queue::enqueue_svm_mem_cpy(
                queue.queue.0,
                cl3::types::CL_NON_BLOCKING,
                m.dst as *mut c_void,
                m.src as *const c_void,
                usize_of(m.size)?,
                wait.len(),
                wait.ptr(),
            )
        }
        .map_err(Status)?;
        self.keep_event(&queue, m.event, event)
    }

    pub(super) fn svm_fill(&mut self, m: &EnqueueSvmFill) -> Result<(), Status> {
        let queue = self.queue(m.queue)?;
        let n = m.pattern.len() as u64;
        if !n.is_power_of_two() || n > 128 || !m.ptr.is_multiple_of(n) || !m.size.is_multiple_of(n)
        {
            return Err(Status::INVALID_VALUE);
        }
        let alloc = self.svm_range(m.ptr, m.size, Status::INVALID_VALUE)?;
        if !Arc::ptr_eq(&alloc.context, &queue.context) {
            return Err(Status::INVALID_CONTEXT);
        }
        let wait = self.wait_list(&m.wait)?;
        // SAFETY: the range lies inside a live SVM allocation of the queue's
        // context; the pattern is copied by the call.
        let event = unsafe {
            cl3::command_queue::enqueue_svm_mem_fill(
                queue.queue.0,
                m.ptr as *mut c_void,
                m.pattern.as_ptr() as *const c_void,
                m.pattern.len(),
                usize_of(m.size)?,
                wait.len(),
                wait.ptr(),
            )
        }
        .map_err(Status)?;
        self.keep_event(&queue, m.event, event)
    }

    /// An SVM kernel argument: an address inside an allocation of the
    /// kernel's context (the allocation is held while the argument is set).
    pub(super) fn svm_arg(
        &self,
        kernel: &super::objects::HostKernel,
        value: &[u8],
    ) -> Result<ArgRecord, Status> {
        let addr = u64::from_le_bytes(value.try_into().map_err(|_| Status::INVALID_ARG_VALUE)?);
        let alloc = self.svm_range(addr, 1, Status::INVALID_ARG_VALUE)?;
        if !Arc::ptr_eq(&alloc.context, &kernel.program.context) {
            return Err(Status::INVALID_ARG_VALUE);
        }
        Ok(ArgRecord::Svm(alloc, addr))
    }

    pub(super) fn set_kernel_exec_svm(&mut self, m: &SetKernelExecSvm) -> Result<(), Status> {
        let kernel = self.kernels.get(m.kernel)?.clone();
        let mut held = Vec::with_capacity(m.ptrs.len());
        for &ptr in &m.ptrs {
            let alloc = self.svm_range(ptr, 1, Status::INVALID_VALUE)?;
            if !Arc::ptr_eq(&alloc.context, &kernel.program.context) {
                return Err(Status::INVALID_VALUE);
            }
            held.push(alloc);
        }
        let ptrs: Vec<*mut c_void> = m.ptrs.iter().map(|&p| p as *mut c_void).collect();
        const SVM_PTRS: u32 = 0x11B6; // CL_KERNEL_EXEC_INFO_SVM_PTRS
                                      // SAFETY: `ptrs` is an array of its stated size of addresses inside
                                      // live SVM allocations of the kernel's context.
        unsafe {
            cl3::kernel::set_kernel_exec_info(
                kernel.raw,
                SVM_PTRS,
                std::mem::size_of_val(ptrs.as_slice()),
                ptrs.as_ptr() as *const c_void,
            )
        }
        .map_err(Status)?;
        // Entries of released kernels go (their allocations with them).
        let kernels = &self.kernels;
        self.svm_exec
            .retain(|handle, _| kernels.get(*handle).is_ok());
        self.svm_exec.insert(m.kernel, held);
        Ok(())
    }

    pub(super) fn create_svm_buffer(&mut self, m: &CreateSvmBuffer) -> Result<(), Status> {
        let context = self.contexts.get(m.context)?.clone();
        if m.flags & (CL_MEM_ALLOC_HOST_PTR | CL_MEM_COPY_HOST_PTR) != 0 {
            return Err(Status::INVALID_VALUE);
        }
        let alloc = self.svm_range(m.ptr, m.size, Status::INVALID_HOST_PTR)?;
        if !Arc::ptr_eq(&alloc.context, &context) {
            return Err(Status::INVALID_HOST_PTR);
        }
        // Host-access flags are the guest library's to enforce.
        let flags = m.flags & (CL_MEM_READ_WRITE | CL_MEM_WRITE_ONLY | CL_MEM_READ_ONLY)
            | CL_MEM_USE_HOST_PTR;
        // SAFETY: `[ptr, ptr + size)` lies inside a live SVM allocation of
        // this context, held (pinned below) as long as the buffer lives.
        let raw = unsafe {
            cl3::memory::create_buffer(
                context.ctx.0,
                flags,
                usize_of(m.size)?,
                m.ptr as *mut c_void,
            )
        }
        .map_err(Status)?;
        let entry = self.mems.insert(
            m.mem,
            HostMem {
                raw,
                size: m.size,
                flags: m.flags,
                context,
                parent: None,
                charge: Mutex::new(None),
                image: None,
                written: Default::default(),
                storage: None,
            },
        )?;
        self.svm
            .pins
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((Arc::downgrade(&entry), alloc));
        Ok(())
    }

    /// Whether the session holds SVM (snapshots refuse it): allocations,
    /// buffers over them, or kernel arguments naming SVM (even freed).
    pub(super) fn holds_svm(&self) -> bool {
        self.svm.holds_svm()
            || self.kernels.entries().any(|(_, kernel, _)| {
                kernel
                    .args
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .iter()
                    .any(|arg| matches!(arg, ArgRecord::Svm(..)))
            })
    }
}

impl Drop for OpenClSession {
    /// The launch thread's calls are issued first; every command completes
    /// before the session's SVM goes (the fields holding it are dropped
    /// after the kernels and buffers using it).
    fn drop(&mut self) {
        self.drain_launches();
        if self.svm.holds_svm() || !self.svm_exec.is_empty() {
            // Unset user events are failed first (as a closing session's
            // are), so no queue waits forever.
            (crate::executor::ExecSession::aborter(self))();
            self.finish_all();
        }
    }
}
