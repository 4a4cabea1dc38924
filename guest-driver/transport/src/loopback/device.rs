//! [`LoopbackDevice`]: this process as the vhost-user front-end of a
//! `vgpu-backend` socket, playing the part QEMU and the guest kernel driver
//! play in a VM: it owns guest memory (a memfd), the two split rings, and
//! the kick and call eventfds.
//!
//! This is the low-level API. [`super::Loopback`] builds batches on top of
//! it; tests that must misbehave (malformed chains, addresses outside guest
//! memory, bogus heads) use it directly:
//!
//! ```no_run
//! use std::time::Duration;
//! use vgpu_transport::loopback::{LoopbackConfig, LoopbackDevice};
//! use vgpu_transport::vring::{Descriptor, VRING_DESC_F_NEXT};
//!
//! # fn main() -> std::io::Result<()> {
//! let mut dev = LoopbackDevice::connect("/tmp/vgpu.sock".as_ref(), &LoopbackConfig::default())?;
//! let scratch = dev.data_area().start;
//! dev.write_guest(scratch, &[0u8; 64])?;
//! // Two descriptors that point at each other: a loop.
//! let ring = dev.submit_ring();
//! let d = ring.alloc_descriptors(2).expect("free descriptors");
//! let looping = |next| Descriptor { addr: scratch, len: 64, flags: VRING_DESC_F_NEXT, next };
//! ring.write_descriptor(d[0], looping(d[1])).expect("in the table");
//! ring.write_descriptor(d[1], looping(d[0])).expect("in the table");
//! ring.publish(d[0]);
//! dev.kick()?;
//! let used = dev.wait_used(Some(Duration::from_secs(5)))?;
//! assert_eq!(used.map(|u| (u.id, u.len)), Some((u32::from(d[0]), 0)));
//! dev.submit_ring().release_descriptors(&d);
//! # Ok(()) }
//! ```

use std::io;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vgpu_protocol::{EVENT_QUEUE, EVENT_QUEUE_SIZE, NUM_QUEUES, SUBMIT_QUEUE, SUBMIT_QUEUE_SIZE};
use vhost::vhost_user::message::VhostUserHeaderFlag;
use vhost::vhost_user::{Frontend, VhostUserFrontend, VhostUserProtocolFeatures};
use vhost::{VhostBackend, VringConfigData};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

use super::memory::{GuestRam, MemoryLayout, EVENT_BUFFER_LEN};
use super::LoopbackConfig;
use crate::vring::{DescSpec, SplitRing, UsedElem};

/// `VIRTIO_F_VERSION_1`.
pub const VIRTIO_F_VERSION_1: u64 = 1 << 32;
/// `VIRTIO_RING_F_INDIRECT_DESC`.
pub const VIRTIO_RING_F_INDIRECT_DESC: u64 = 1 << 28;
/// `VIRTIO_RING_F_EVENT_IDX`.
pub const VIRTIO_RING_F_EVENT_IDX: u64 = 1 << 29;
/// `VHOST_USER_F_PROTOCOL_FEATURES`.
pub const VHOST_USER_F_PROTOCOL_FEATURES: u64 = 1 << 30;

/// Virtio features the loopback acks by default when the backend offers them.
pub const DEFAULT_FEATURES: u64 = VIRTIO_F_VERSION_1
    | VHOST_USER_F_PROTOCOL_FEATURES
    | VIRTIO_RING_F_EVENT_IDX
    | VIRTIO_RING_F_INDIRECT_DESC;
/// Virtio features the backend must offer.
const REQUIRED_FEATURES: u64 = VIRTIO_F_VERSION_1 | VHOST_USER_F_PROTOCOL_FEATURES;

/// One virtqueue: its ring and its two eventfds.
struct Queue {
    ring: SplitRing,
    /// Written by us: "new buffers are available".
    kick: EventFd,
    /// Written by the backend: "buffers were used".
    call: EventFd,
}

impl Queue {
    fn new(ram: &GuestRam, offset: usize, size: u16) -> io::Result<Queue> {
        let gpa = ram.base() + offset as u64;
        let len = crate::vring::RingLayout::new(size)
            .map_err(io::Error::other)?
            .total;
        let base = ram.host_ptr(gpa, len)?;
        // SAFETY: `host_ptr` checked that `len` bytes at `gpa` are guest memory,
        // which stays mapped while the device (owner of `ram` and of this
        // queue) lives; the layout gives each ring its own page-aligned range.
        let ring = unsafe { SplitRing::new(base, gpa, size) }.map_err(io::Error::other)?;
        Ok(Queue {
            ring,
            kick: EventFd::new(EFD_NONBLOCK)?,
            call: EventFd::new(EFD_NONBLOCK)?,
        })
    }

    fn kick(&self) -> io::Result<()> {
        WAIT_COUNTS.kicks.fetch_add(1, Ordering::Relaxed);
        match self.kick.write(1) {
            // The counter is saturated: the backend has a kick pending anyway.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(()),
            other => other,
        }
    }
}

/// A vhost-user front-end connection to `vgpu-backend` with its own guest
/// memory and virtqueues. See the module documentation for an example.
///
/// Guest memory is one region at [`LoopbackConfig::guest_base`] (default
/// `0x1_0000_0000`, so guest-physical address 0 is out of range). It holds
/// the submit ring, the event ring, the event buffers and the data area.
/// The data area ([`LoopbackDevice::data_area`]) is scratch space for
/// whoever submits: [`super::Loopback`] overwrites it on every batch.
pub struct LoopbackDevice {
    frontend: Frontend,
    submit: Queue,
    event: Queue,
    layout: MemoryLayout,
    acked_features: u64,
    acked_protocol_features: VhostUserProtocolFeatures,
    /// A second region of guest memory for page-locked allocations, which
    /// descriptors name in place; kept across reconnects (the program holds
    /// pointers into it).
    heap: Option<Arc<GuestRam>>,
    // Last: the rings above point into it.
    ram: GuestRam,
}

impl std::fmt::Debug for LoopbackDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopbackDevice")
            .field("ram", &self.ram)
            .field(
                "acked_features",
                &format_args!("{:#x}", self.acked_features),
            )
            .finish()
    }
}

/// How this process's waits for the backend went, for profiles
/// (`VGPU_CUDA_TRACE`): kicks sent, answers found while looking, and
/// sleeps on the call eventfd. A few relaxed atomic adds per batch.
#[derive(Debug, Default)]
pub struct WaitCounts {
    pub kicks: AtomicU64,
    pub found_looking: AtomicU64,
    pub slept: AtomicU64,
}

/// The process's [`WaitCounts`], all loopback devices together.
pub static WAIT_COUNTS: WaitCounts = WaitCounts {
    kicks: AtomicU64::new(0),
    found_looking: AtomicU64::new(0),
    slept: AtomicU64::new(0),
};

/// How long `wait_used` polls the used ring before it sleeps. Long enough
/// for a synchronous copy of a few MiB (1 MiB of page-locked memory takes
/// about 27 µs on an H100): an answer that lands just after the poll gave
/// up costs a sleep and a wake-up, which on the GPU machine's VM took tens
/// of microseconds and halved 1 MiB copies. The look is paced to the host
/// (`vgpu_protocol::pacing`), so a backend sharing the core gets it; the
/// CUDA driver itself spins before it sleeps by default.
const SPIN: Duration = Duration::from_micros(200);

impl LoopbackDevice {
    /// Connects to the backend's socket, sets up guest memory and both
    /// queues (the full vhost-user handshake), and posts the event buffers.
    pub fn connect(socket: &Path, config: &LoopbackConfig) -> io::Result<LoopbackDevice> {
        LoopbackDevice::connect_with_heap(socket, config, None)
    }

    /// As [`Self::connect`], with `heap` as a second region of guest memory.
    pub fn connect_with_heap(
        socket: &Path,
        config: &LoopbackConfig,
        heap: Option<Arc<GuestRam>>,
    ) -> io::Result<LoopbackDevice> {
        let layout = MemoryLayout::new(config.data_len, config.event_buffers)?;
        let ram = GuestRam::new(config.guest_base, layout.total)?;
        let submit = Queue::new(&ram, layout.submit_ring, SUBMIT_QUEUE_SIZE)?;
        let event = Queue::new(&ram, layout.event_ring, EVENT_QUEUE_SIZE)?;
        let mut frontend = Frontend::connect(socket, NUM_QUEUES as u64)
            .map_err(step_failed("connecting to the backend socket"))?;
        let (acked_features, acked_protocol_features) =
            negotiate(&mut frontend, config.features | REQUIRED_FEATURES)?;
        let mut device = LoopbackDevice {
            frontend,
            submit,
            event,
            layout,
            acked_features,
            acked_protocol_features,
            heap,
            ram,
        };
        device.set_up_memory_and_queues()?;
        device.post_event_buffers()?;
        Ok(device)
    }

    fn set_up_memory_and_queues(&mut self) -> io::Result<()> {
        let mut regions = vec![self.ram.region_info()?];
        if let Some(heap) = &self.heap {
            regions.push(heap.region_info()?);
        }
        self.frontend
            .set_mem_table(&regions)
            .map_err(step_failed("SET_MEM_TABLE"))?;
        for (index, queue) in [(SUBMIT_QUEUE, &self.submit), (EVENT_QUEUE, &self.event)] {
            let index = usize::from(index);
            let ring = &queue.ring;
            let host = |gpa: u64| -> io::Result<u64> { Ok(self.ram.host_ptr(gpa, 0)? as u64) };
            // Vring addresses are front-end virtual addresses (no GPA_ADDRESSES).
            let addresses = VringConfigData {
                queue_max_size: ring.size(),
                queue_size: ring.size(),
                flags: 0,
                desc_table_addr: host(ring.desc_table_gpa())?,
                used_ring_addr: host(ring.used_ring_gpa())?,
                avail_ring_addr: host(ring.avail_ring_gpa())?,
                log_addr: None,
            };
            let f = &mut self.frontend;
            f.set_vring_num(index, ring.size())
                .map_err(step_failed("SET_VRING_NUM"))?;
            f.set_vring_base(index, 0)
                .map_err(step_failed("SET_VRING_BASE"))?;
            f.set_vring_addr(index, &addresses)
                .map_err(step_failed("SET_VRING_ADDR"))?;
            f.set_vring_call(index, &queue.call)
                .map_err(step_failed("SET_VRING_CALL"))?;
            f.set_vring_kick(index, &queue.kick)
                .map_err(step_failed("SET_VRING_KICK"))?;
            f.set_vring_enable(index, true)
                .map_err(step_failed("SET_VRING_ENABLE"))?;
        }
        Ok(())
    }

    /// Posts every event buffer that is not on the event queue yet
    /// (at connect time, and again after the backend returned some).
    pub(crate) fn post_event_buffers(&mut self) -> io::Result<()> {
        while self.event.ring.pop_used().is_some() {}
        let posted = usize::from(EVENT_QUEUE_SIZE) - self.event.ring.num_free();
        let count = usize::from(self.layout.event_buffer_count);
        if posted >= count {
            return Ok(());
        }
        for i in posted..count {
            let gpa = self.ram.base() + (self.layout.event_buffers + i * EVENT_BUFFER_LEN) as u64;
            let spec = DescSpec {
                addr: gpa,
                len: EVENT_BUFFER_LEN as u32,
                writable: true,
            };
            let head = self
                .event
                .ring
                .add_chain(&[spec])
                .map_err(io::Error::other)?;
            self.event.ring.publish(head);
        }
        self.event.kick()
    }

    // ---- what hostile tests use ---------------------------------------------

    /// The submit queue's ring (queue 0): build chains with `add_chain`, or
    /// write raw descriptors; `publish` a head, then [`Self::kick`].
    pub fn submit_ring(&mut self) -> &mut SplitRing {
        &mut self.submit.ring
    }

    /// The event queue's ring (queue 1). [`super::Loopback`] keeps its
    /// buffers posted; tests may look but should not publish on it.
    pub fn event_ring(&mut self) -> &mut SplitRing {
        &mut self.event.ring
    }

    /// Guest-physical range of all guest memory (rings included). Anything
    /// outside it is out of range for the backend.
    pub fn guest_memory(&self) -> Range<u64> {
        self.ram.range()
    }

    /// Guest-physical range of the data area: scratch space for requests,
    /// replies and bulk data.
    pub fn data_area(&self) -> Range<u64> {
        let start = self.ram.base() + self.layout.data as u64;
        start..start + self.layout.data_len as u64
    }

    /// Writes bytes into guest memory at a guest-physical address; fails
    /// when any byte is outside guest memory.
    pub fn write_guest(&self, gpa: u64, bytes: &[u8]) -> io::Result<()> {
        self.ram.write(gpa, bytes)
    }

    /// Reads bytes from guest memory at a guest-physical address; fails
    /// when any byte is outside guest memory.
    pub fn read_guest(&self, gpa: u64, buf: &mut [u8]) -> io::Result<()> {
        self.ram.read(gpa, buf)
    }

    /// Notifies the backend that the submit queue has new buffers.
    pub fn kick(&self) -> io::Result<()> {
        self.submit.kick()
    }

    /// Writes a well-formed chain, publishes it and kicks; returns its head.
    pub fn send_chain(&mut self, chain: &[DescSpec]) -> io::Result<u16> {
        let head = self
            .submit
            .ring
            .add_chain(chain)
            .map_err(io::Error::other)?;
        // used_event is armed only before sleeping (`wait_used`): while we
        // look for the answer, the backend need not signal it.
        let old_avail = self.submit.ring.avail_idx();
        self.submit.ring.publish(head);
        let event_idx = self.acked_features & VIRTIO_RING_F_EVENT_IDX != 0;
        if self.submit.ring.device_wants_kick(old_avail, event_idx) {
            self.kick()?;
        }
        Ok(head)
    }

    /// Whether the submit queue has a used element waiting (never blocks).
    pub fn has_used(&self) -> bool {
        self.submit.ring.has_used()
    }

    /// Waits for the next used element of the submit queue, whatever its
    /// head. `None` timeout waits forever; returns `Ok(None)` on timeout.
    /// Fails with `ConnectionAborted` when the backend closes the socket.
    pub fn wait_used(&mut self, timeout: Option<Duration>) -> io::Result<Option<UsedElem>> {
        let deadline = timeout.map(|t| Instant::now() + t);
        // Most answers come within microseconds: look for a while before
        // paying for a sleep and a wake-up.
        let mut pacer = vgpu_protocol::pacing::LookPacer::new(SPIN);
        loop {
            if let Some(used) = self.submit.ring.pop_used() {
                WAIT_COUNTS.found_looking.fetch_add(1, Ordering::Relaxed);
                return Ok(Some(used));
            }
            // Paced to the host: where the backend's thread has to share
            // this core, it gets it at once.
            if !pacer.pause() {
                break;
            }
        }
        loop {
            // Arm first, then look: a used element that lands between the
            // look and the sleep then still rings the call eventfd.
            self.submit.ring.arm_used_event();
            if let Some(used) = self.submit.ring.pop_used() {
                return Ok(Some(used));
            }
            let left = match deadline {
                None => None,
                Some(deadline) => match deadline.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return Ok(None),
                },
            };
            WAIT_COUNTS.slept.fetch_add(1, Ordering::Relaxed);
            self.sleep_on_call(left)?;
        }
    }

    /// Sleeps until the submit queue's call eventfd fires (and drains it),
    /// the timeout passes, or the socket reports a hang-up.
    fn sleep_on_call(&self, timeout: Option<Duration>) -> io::Result<()> {
        let mut fds = [
            libc::pollfd {
                fd: self.submit.call.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.frontend.as_raw_fd(),
                events: libc::POLLIN | libc::POLLRDHUP,
                revents: 0,
            },
        ];
        let timeout_ms = match timeout {
            None => -1,
            // Round up so a sub-millisecond remainder does not spin.
            Some(t) => i32::try_from(t.as_nanos().div_ceil(1_000_000)).unwrap_or(i32::MAX),
        };
        // SAFETY: `fds` is a valid array of two pollfd for the whole call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
        if n < 0 {
            let err = io::Error::last_os_error();
            return if err.kind() == io::ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(err)
            };
        }
        if fds[1].revents != 0 {
            // The backend only ever writes to the socket to answer a request;
            // anything readable now is end-of-file or a protocol breach.
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "the backend closed the vhost-user connection",
            ));
        }
        if fds[0].revents != 0 {
            match self.submit.call.read() {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The raw vhost-user connection, to send messages out of order (e.g.
    /// `GET_VRING_BASE`, a second `SET_MEM_TABLE`).
    pub fn frontend(&mut self) -> &mut Frontend {
        &mut self.frontend
    }

    /// Virtio feature bits acked with `SET_FEATURES`.
    pub fn acked_features(&self) -> u64 {
        self.acked_features
    }

    /// vhost-user protocol features acked with `SET_PROTOCOL_FEATURES`.
    pub fn acked_protocol_features(&self) -> VhostUserProtocolFeatures {
        self.acked_protocol_features
    }
}

/// Feature and protocol-feature negotiation, in QEMU's order.
fn negotiate(frontend: &mut Frontend, wanted: u64) -> io::Result<(u64, VhostUserProtocolFeatures)> {
    frontend.set_owner().map_err(step_failed("SET_OWNER"))?;
    let offered = frontend
        .get_features()
        .map_err(step_failed("GET_FEATURES"))?;
    if offered & REQUIRED_FEATURES != REQUIRED_FEATURES {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "the backend offers virtio features {offered:#x}, without VERSION_1 or PROTOCOL_FEATURES"
            ),
        ));
    }
    let protocol_offered = frontend
        .get_protocol_features()
        .map_err(step_failed("GET_PROTOCOL_FEATURES"))?;
    // DEVICE_STATE: a test may move the vGPU's state as QEMU's migration
    // does (`frontend().set_device_state_fd`).
    let protocol = protocol_offered
        & (VhostUserProtocolFeatures::MQ
            | VhostUserProtocolFeatures::REPLY_ACK
            | VhostUserProtocolFeatures::DEVICE_STATE);
    frontend
        .set_protocol_features(protocol)
        .map_err(step_failed("SET_PROTOCOL_FEATURES"))?;
    if protocol.contains(VhostUserProtocolFeatures::MQ) {
        let queues = frontend
            .get_queue_num()
            .map_err(step_failed("GET_QUEUE_NUM"))?;
        if queues < NUM_QUEUES as u64 {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("the backend has {queues} queues, the vgpu device needs {NUM_QUEUES}"),
            ));
        }
    }
    if protocol.contains(VhostUserProtocolFeatures::REPLY_ACK) {
        // Every later request waits for the backend's verdict, so a refused
        // step fails here rather than as a silent hang at the first kick.
        frontend.set_hdr_flags(VhostUserHeaderFlag::NEED_REPLY);
    }
    let acked = offered & wanted;
    frontend
        .set_features(acked)
        .map_err(step_failed("SET_FEATURES"))?;
    Ok((acked, protocol))
}

/// Maps a vhost error to an `io::Error` naming the handshake step.
fn step_failed(step: &'static str) -> impl FnOnce(vhost::Error) -> io::Error {
    move |source| {
        let kind = match &source {
            vhost::Error::VhostUserProtocol(vhost::vhost_user::Error::SocketConnect(e)) => e.kind(),
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, HandshakeError { step, source })
    }
}

/// A vhost-user handshake step the backend refused or could not answer.
#[derive(Debug, thiserror::Error)]
#[error("vhost-user {step} failed")]
pub struct HandshakeError {
    pub step: &'static str,
    #[source]
    pub source: vhost::Error,
}
