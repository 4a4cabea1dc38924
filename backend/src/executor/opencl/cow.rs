//! Copy-on-write checkpoints (soft copy-on-write, as PhoenixOS does): a
//! save captures the objects at its pause but reads no contents; each
//! buffer or image is *owed* to the checkpoint until its writer has read
//! it, after the guest resumed.
//!
//! The first guest command that may write an owed object first preserves
//! the contents as of the pause: for a buffer, a device-side copy into a
//! shadow buffer enqueued ahead of the command on the command's own queue
//! (no host round trip: the guest does not wait for it); for an image, or
//! when no shadow fits the budget or can be made, a blocking read to the
//! host. The writer reads the shadow, the host copy, or the untouched
//! object itself; dropping the debt frees the shadow.
//!
//! Ordering: every command that may write an object passes through
//! `OpenClSession::before_write` before it is enqueued, so while a debt is
//! `InPlace` nothing issued after the pause has written the object, and a
//! read of it through the backend's own queue sees the pause's contents.
//! One lock per debt orders the writer's reads against the preservation:
//! a guest write to an object being read waits for one piece's read (the
//! checkpoint writer reads 4 MiB at a time), and the writer waits for a
//! shadow copy without the lock. A read of the untouched object holds the
//! lock, so a driver that ordered it after a guest command waiting on a
//! user event would hold that guest's next write to the object until the
//! event is set (not seen in the tests here; not ruled out either).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use cl3::types::{cl_command_queue, cl_event};
use vgpu_protocol::Status;

use super::objects::{HostEvent, HostKernel, HostMem};
use super::session::OpenClSession;
use super::snapshot::DeviceBufferSource;
use crate::executor::BufferSource;

const CL_MEM_READ_WRITE: u64 = 1;
const CL_MEM_READ_ONLY: u64 = 1 << 2;
const CL_DEVICE_GLOBAL_MEM_SIZE: u32 = 0x101F;
const EXECUTION_STATUS: u32 = 0x11D3; // CL_EVENT_COMMAND_EXECUTION_STATUS

/// Shadow bytes held now, by every debt of the process.
static SHADOW_BYTES: AtomicU64 = AtomicU64::new(0);

/// The most shadow memory a worker holds at once: a quarter of the
/// device's global memory, so shadows never crowd out what guests
/// allocate. Beyond it, preservation reads to the host instead.
fn shadow_limit(device: cl3::types::cl_device_id) -> u64 {
    static LIMIT: OnceLock<u64> = OnceLock::new();
    *LIMIT.get_or_init(|| {
        cl3::device::get_device_info(device, CL_DEVICE_GLOBAL_MEM_SIZE)
            .ok()
            .map(u64::from)
            .map_or(0, |global| global / 4)
    })
}

/// Shadow bytes counted against the limit until dropped.
struct ShadowCharge(u64);

impl ShadowCharge {
    fn take(bytes: u64, limit: u64) -> Option<ShadowCharge> {
        SHADOW_BYTES
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |held| {
                held.checked_add(bytes).filter(|total| *total <= limit)
            })
            .ok()
            .map(|_| ShadowCharge(bytes))
    }
}

impl Drop for ShadowCharge {
    fn drop(&mut self) {
        SHADOW_BYTES.fetch_sub(self.0, Ordering::SeqCst);
    }
}

/// Where an owed object's contents as of the pause are now.
enum Held {
    /// Not written since the pause: the object itself. A buffer's source
    /// is kept apart so a shadow can be copied from it.
    Buffer(DeviceBufferSource),
    Image(Box<dyn BufferSource>),
    /// Copied on the device before the first write; `copied` completes
    /// with the copy.
    Shadow {
        shadow: DeviceBufferSource,
        copied: HostEvent,
        _charge: ShadowCharge,
    },
    /// Read to the host before the first write.
    Host(Vec<u8>),
    /// Preservation failed: the checkpoint fails, the guest goes on.
    Lost(Status),
    /// Read by the checkpoint, or no longer wanted.
    Settled,
}

/// One object's contents owed to one checkpoint.
pub(super) struct Owed {
    size: u64,
    held: Mutex<Held>,
}

impl Owed {
    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether later writes need nothing more of this debt: preserved on
    /// the host, lost, settled, or shadowed with the copy complete.
    fn done_with_writes(&self) -> bool {
        match &*self.lock() {
            Held::Buffer(_) | Held::Image(_) => false,
            Held::Shadow { copied, .. } => is_complete(copied.0),
            Held::Host(_) | Held::Lost(_) | Held::Settled => true,
        }
    }

    fn is_settled(&self) -> bool {
        matches!(&*self.lock(), Held::Settled)
    }

    /// Makes sure a command enqueued next on `queue` cannot change what
    /// the checkpoint reads. Never fails the guest's command: a failure
    /// fails the checkpoint instead.
    fn preserve(&self, queue: cl_command_queue, device: cl3::types::cl_device_id) {
        let mut held = self.lock();
        let next = match &mut *held {
            Held::Buffer(source) => Some(shadow_or_host(source, queue, device)),
            Held::Image(source) => Some(read_to_host(source.as_mut())),
            Held::Shadow { copied, .. } => order_after_copy(queue, copied),
            Held::Host(_) | Held::Lost(_) | Held::Settled => None,
        };
        if let Some(next) = next {
            log::debug!(
                "copy-on-write: {} bytes owed to a checkpoint preserved before a write ({})",
                self.size,
                match &next {
                    Held::Shadow { .. } => "device copy",
                    Held::Host(_) => "host copy",
                    _ => "failed",
                }
            );
            *held = next;
        }
    }
}

/// Makes later writes on `queue` wait for a shadow copy still running
/// (it ran on another queue, maybe); a debt lost if that fails.
fn order_after_copy(queue: cl_command_queue, copied: &HostEvent) -> Option<Held> {
    if is_complete(copied.0) {
        return None;
    }
    let Err(status) = barrier_after(queue, copied.0) else {
        return None;
    };
    log::warn!("copy-on-write: cannot order a write after its shadow copy ({status}): waiting for the copy");
    let waited = cl3::event::wait_for_events(&[copied.0]);
    waited.err().map(|code| Held::Lost(Status(code)))
}

/// Whether an event's command has finished (or failed).
fn is_complete(event: cl_event) -> bool {
    cl3::event::get_event_data(event, EXECUTION_STATUS)
        .ok()
        .and_then(|b| Some(i32::from_le_bytes(b.get(..4)?.try_into().ok()?)))
        .is_some_and(|status| status <= 0)
}

/// Makes commands enqueued on `queue` from now on wait for `event`, on an
/// out-of-order queue too.
fn barrier_after(queue: cl_command_queue, event: cl_event) -> Result<(), Status> {
    // SAFETY: a live queue and a live event of its context; the wait list
    // is one event long and read during the call.
    let barrier = unsafe { cl3::command_queue::enqueue_barrier_with_wait_list(queue, 1, &event) }
        .map_err(Status)?;
    drop(HostEvent(barrier));
    Ok(())
}

/// A device-side copy of the buffer into a new shadow, enqueued on the
/// guest's `queue` ahead of its write; a host read when that fails.
fn shadow_or_host(
    source: &mut DeviceBufferSource,
    queue: cl_command_queue,
    device: cl3::types::cl_device_id,
) -> Held {
    match shadow(source, queue, device) {
        Ok(held) => held,
        Err(status) => {
            log::debug!("copy-on-write: no shadow ({status}): reading the buffer to the host");
            read_to_host(source)
        }
    }
}

fn shadow(
    source: &DeviceBufferSource,
    queue: cl_command_queue,
    device: cl3::types::cl_device_id,
) -> Result<Held, Status> {
    let mem = &source.mem;
    let size = usize::try_from(mem.size).map_err(|_| Status::OUT_OF_HOST_MEMORY)?;
    let charge = ShadowCharge::take(mem.size, shadow_limit(device))
        .ok_or(Status::MEM_OBJECT_ALLOCATION_FAILURE)?;
    // SAFETY: a live context; no host pointer.
    let raw = unsafe {
        cl3::memory::create_buffer(
            mem.context.ctx.0,
            CL_MEM_READ_WRITE,
            size,
            std::ptr::null_mut(),
        )
    }
    .map_err(Status)?;
    let shadow = Arc::new(HostMem {
        raw,
        size: mem.size,
        flags: CL_MEM_READ_WRITE,
        context: mem.context.clone(),
        parent: None,
        charge: Mutex::new(None),
        image: None,
        written: Default::default(),
        storage: None,
    });
    // SAFETY: both buffers are live, of `queue`'s context and `size`
    // bytes long; no wait list.
    let copied = unsafe {
        cl3::command_queue::enqueue_copy_buffer(
            queue,
            mem.raw,
            shadow.raw,
            0,
            0,
            size,
            0,
            std::ptr::null(),
        )
    }
    .map(HostEvent)
    .map_err(Status)?;
    barrier_after(queue, copied.0)?;
    cl3::command_queue::flush(queue).map_err(Status)?;
    Ok(Held::Shadow {
        shadow: DeviceBufferSource {
            mem: shadow,
            queue: source.queue.clone(),
        },
        copied,
        _charge: charge,
    })
}

fn read_to_host(source: &mut dyn BufferSource) -> Held {
    let read = usize::try_from(source.size())
        .map_err(|_| Status::OUT_OF_HOST_MEMORY)
        .and_then(|size| {
            let mut data = vec![0u8; size];
            source.read(0, &mut data).map(|()| data)
        });
    match read {
        Ok(data) => Held::Host(data),
        Err(status) => {
            log::warn!("copy-on-write: cannot preserve an owed object ({status}): the checkpoint will fail");
            Held::Lost(status)
        }
    }
}

/// What a checkpoint reads an owed object through: the contents as of the
/// pause, whenever it reads. Dropping it settles the debt.
pub(super) struct OwedSource {
    owed: Arc<Owed>,
    object: Option<(u64, u64)>,
    /// The object's write mark, for the checkpoint's staging and base.
    mark: Arc<crate::executor::written::WriteMark>,
}

impl BufferSource for OwedSource {
    fn size(&self) -> u64 {
        self.owed.size
    }

    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Status> {
        loop {
            // A shadow copy still running waits without the lock: the
            // guest's next write to the object must not wait on it.
            let running = match &mut *self.owed.lock() {
                Held::Shadow { copied, .. } if !is_complete(copied.0) => retained(copied.0)?,
                held => return read_held(held, offset, buf),
            };
            cl3::event::wait_for_events(&[running.0]).map_err(Status)?;
        }
    }

    fn object(&self) -> Option<(u64, u64)> {
        self.object
    }

    fn written_at(&self) -> u64 {
        self.mark.epoch()
    }

    fn owed(&self) -> bool {
        true
    }
}

impl Drop for OwedSource {
    fn drop(&mut self) {
        *self.owed.lock() = Held::Settled;
    }
}

/// Reads from wherever the contents as of the pause are held.
fn read_held(held: &mut Held, offset: u64, buf: &mut [u8]) -> Result<(), Status> {
    match held {
        Held::Buffer(source) => source.read(offset, buf),
        Held::Image(source) => source.read(offset, buf),
        Held::Shadow { shadow, .. } => shadow.read(offset, buf),
        Held::Host(data) => {
            let from = usize::try_from(offset).map_err(|_| Status::INVALID_VALUE)?;
            let piece = from
                .checked_add(buf.len())
                .and_then(|end| data.get(from..end))
                .ok_or(Status::INVALID_VALUE)?;
            buf.copy_from_slice(piece);
            Ok(())
        }
        Held::Lost(status) => Err(*status),
        Held::Settled => Err(Status::INVALID_OPERATION),
    }
}

/// A reference of our own to `event`.
fn retained(event: cl_event) -> Result<HostEvent, Status> {
    // SAFETY: a live event; the reference taken is given back by the
    // returned wrapper's drop.
    unsafe { cl3::event::retain_event(event) }.map_err(Status)?;
    Ok(HostEvent(event))
}

/// The session's debts, by the write-mark serial of the storage they
/// read (shared by a buffer, its sub-buffers and images on it).
#[derive(Default)]
pub(super) struct Debts(HashMap<u64, Vec<Arc<Owed>>>);

impl Debts {
    /// Whether no checkpoint is owed contents (no launch needs a copy first).
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl OpenClSession {
    /// Turns a buffer's source, taken at a save's pause, into one that
    /// reads the contents as of the pause even after the guest resumed.
    pub(super) fn owe_buffer(&mut self, source: DeviceBufferSource) -> Box<dyn BufferSource> {
        let mark = source.mem.written.clone();
        let size = source.mem.size;
        self.owe(mark, size, Held::Buffer(source))
    }

    /// As `owe_buffer`, for an image with storage of its own.
    pub(super) fn owe_image(
        &mut self,
        mem: &HostMem,
        source: Box<dyn BufferSource>,
    ) -> Box<dyn BufferSource> {
        let size = source.size();
        self.owe(mem.written.clone(), size, Held::Image(source))
    }

    fn owe(
        &mut self,
        mark: Arc<crate::executor::written::WriteMark>,
        size: u64,
        held: Held,
    ) -> Box<dyn BufferSource> {
        let object = Some((mark.serial(), 0));
        let owed = Arc::new(Owed {
            size,
            held: Mutex::new(held),
        });
        self.debts
            .0
            .entry(mark.serial())
            .or_default()
            .push(owed.clone());
        Box::new(OwedSource { owed, object, mark })
    }

    /// Forgets debts already settled (read, or dropped unread).
    pub(super) fn prune_debts(&mut self) {
        self.debts.0.retain(|_, debts| {
            debts.retain(|d| !d.is_settled());
            !debts.is_empty()
        });
    }

    /// Runs before a command that may write `mem` is enqueued on `queue`:
    /// marks the write and preserves what a checkpoint still owes.
    pub(super) fn before_write(&mut self, queue: cl_command_queue, mem: &HostMem) {
        mem.mark_written();
        if self.debts.0.is_empty() {
            return;
        }
        let serial = mem.written.serial();
        let device = self.device;
        if let Some(debts) = self.debts.0.get_mut(&serial) {
            for owed in debts.iter() {
                owed.preserve(queue, device);
            }
            debts.retain(|d| !d.done_with_writes());
            if debts.is_empty() {
                self.debts.0.remove(&serial);
            }
        }
    }

    /// `before_write` for every memory argument a launch of `kernel` may
    /// write (all but `CL_MEM_READ_ONLY` ones).
    pub(super) fn before_launch(&mut self, queue: cl_command_queue, kernel: &HostKernel) {
        let writable: Vec<Arc<HostMem>> = kernel
            .args
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter_map(|arg| match arg {
                super::objects::ArgRecord::Mem(mem) if mem.flags & CL_MEM_READ_ONLY == 0 => {
                    Some(mem.clone())
                }
                _ => None,
            })
            .collect();
        for mem in writable {
            self.before_write(queue, &mem);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shadow_charges_stay_within_the_limit_and_are_given_back() {
        // Other debts of this process may hold shadows: count from there.
        let limit = SHADOW_BYTES.load(Ordering::SeqCst) + 100;
        let first = ShadowCharge::take(60, limit).expect("60 of 100 fit");
        assert!(ShadowCharge::take(60, limit).is_none(), "120 of 100 do not");
        drop(first);
        assert!(
            ShadowCharge::take(60, limit).is_some(),
            "given back on drop"
        );
    }
}
