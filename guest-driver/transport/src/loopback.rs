//! Loopback transport: this process is the vhost-user front-end of
//! `vgpu-backend`'s unix socket, with memfd guest memory, so host programs
//! and tests reach the backend exactly as a VM does, without one.
//!
//! - [`Loopback`] implements [`Transport`]: each batch is copied into the
//!   data area of guest memory, sent as one descriptor chain on the submit
//!   queue, and its reply and in-data copied back. Where the backend
//!   reads and writes this process's memory itself (`--peer-memory`),
//!   large bulk data of a synchronous batch is not copied: its descriptors
//!   name it where it lies, in the peer window.
//! - [`LoopbackDevice`] is the layer below (guest memory, raw rings, kick,
//!   wait) for tests that send hand-made or malformed chains.
//!
//! The data area is `VGPU_LOOPBACK_MEM_MB` MiB (default 64); see
//! [`LoopbackConfig`]. A second region of guest memory, the page-locked
//! heap (`VGPU_LOOPBACK_PINNED_MB`, default 4096, sparse), holds what the
//! guest libraries allocate there (the CUDA library's page-locked memory,
//! the OpenCL library's placed buffers): a segment of a batch that lies in
//! it is named by its descriptor in place, never copied, as the guest
//! kernel driver names pinned user pages in a VM.

mod device;
mod memory;

pub use device::{
    HandshakeError, LoopbackDevice, WaitCounts, DEFAULT_FEATURES, VHOST_USER_F_PROTOCOL_FEATURES,
    VIRTIO_F_VERSION_1, VIRTIO_RING_F_EVENT_IDX, VIRTIO_RING_F_INDIRECT_DESC, WAIT_COUNTS,
};
pub use memory::{GuestRam, MemoryLayout, EVENT_BUFFER_LEN};

use std::io;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use vgpu_protocol::limits::{MAX_REQUEST_LEN, PEER_WINDOW_BASE};

use crate::vring::DescSpec;
use crate::{Submission, Transport};

/// Environment variable: size of the data area in MiB.
pub const MEM_MB_ENV: &str = "VGPU_LOOPBACK_MEM_MB";
/// Default size of the data area.
pub const DEFAULT_DATA_LEN: usize = 64 << 20;
/// Environment variable: size of the page-locked heap in MiB (0: none).
pub const PINNED_MB_ENV: &str = "VGPU_LOOPBACK_PINNED_MB";
/// Size of the page-locked heap of [`LoopbackConfig::from_env`] unless
/// `VGPU_LOOPBACK_PINNED_MB` says otherwise (sparse until used).
/// Large enough for a program's OpenCL buffers (placed there on a CPU
/// device); pages cost memory only once written.
pub const DEFAULT_HEAP_LEN: usize = 4 << 30;
/// Alignment of the heap's guest-physical start.
const HEAP_ALIGN: u64 = 2 << 20;
/// Smallest and largest data area `VGPU_LOOPBACK_MEM_MB` may ask for, in MiB.
pub const DATA_MB_RANGE: std::ops::RangeInclusive<u64> = 1..=65536;
/// Default guest-physical address of guest memory: nonzero, so a descriptor
/// at address 0 is outside guest memory.
pub const DEFAULT_GUEST_BASE: u64 = 0x1_0000_0000;
/// Default number of writable buffers kept posted on the event queue.
pub const DEFAULT_EVENT_BUFFERS: u16 = 16;
/// Longest single descriptor a batch uses; longer spans are split.
const MAX_DESCRIPTOR_LEN: usize = 1 << 30;
/// Alignment of each stream inside the data area.
const STREAM_ALIGN: usize = 64;
/// Bulk data segments at least this long go by peer memory, where the
/// backend offers it; shorter ones cost less to copy than to attach.
const PEER_MIN_LEN: usize = 64 << 10;

/// How to build the loopback's guest memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopbackConfig {
    /// Bytes of the data area (requests, replies and bulk data of a batch).
    pub data_len: usize,
    /// Guest-physical address where guest memory starts.
    pub guest_base: u64,
    /// Writable buffers kept posted on the event queue.
    pub event_buffers: u16,
    /// Virtio features to ack where the backend offers them (default
    /// [`DEFAULT_FEATURES`]). `VIRTIO_F_VERSION_1` and
    /// `VHOST_USER_F_PROTOCOL_FEATURES` are acked whatever this says; clear
    /// `VIRTIO_RING_F_EVENT_IDX` to exercise the backend without it.
    pub features: u64,
    /// How long to wait for a backend that went away to come back (zero:
    /// fail at once). [`RECONNECT_ENV`] sets it; default 60 s.
    pub reconnect_for: std::time::Duration,
    /// Bytes of the page-locked heap (0: none, the default here;
    /// [`LoopbackConfig::from_env`] gives [`DEFAULT_HEAP_LEN`]).
    pub heap_len: usize,
}

impl Default for LoopbackConfig {
    fn default() -> Self {
        LoopbackConfig {
            reconnect_for: std::time::Duration::from_secs(60),
            data_len: DEFAULT_DATA_LEN,
            guest_base: DEFAULT_GUEST_BASE,
            event_buffers: DEFAULT_EVENT_BUFFERS,
            features: DEFAULT_FEATURES,
            heap_len: 0,
        }
    }
}

impl LoopbackConfig {
    /// The default, with the data area from `VGPU_LOOPBACK_MEM_MB` when set.
    pub fn from_env() -> io::Result<LoopbackConfig> {
        let mut config = LoopbackConfig::default();
        if let Some(value) = std::env::var_os(MEM_MB_ENV) {
            config.data_len = parse_mem_mb(MEM_MB_ENV, &value.to_string_lossy())?;
        }
        config.heap_len = match std::env::var_os(PINNED_MB_ENV) {
            Some(value) if value == "0" => 0,
            Some(value) => parse_mem_mb(PINNED_MB_ENV, &value.to_string_lossy())?,
            None => DEFAULT_HEAP_LEN,
        };
        config.reconnect_for = reconnect_window();
        Ok(config)
    }
}

fn parse_mem_mb(variable: &str, value: &str) -> io::Result<usize> {
    let mb = value
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|mb| DATA_MB_RANGE.contains(mb))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{variable}={value:?} is not a size in MiB between {} and {}",
                    DATA_MB_RANGE.start(),
                    DATA_MB_RANGE.end()
                ),
            )
        })?;
    usize::try_from(mb << 20)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "data area too large"))
}

/// Where the four streams of one batch go in the data area (offsets).
#[derive(Debug, Clone, PartialEq, Eq)]
struct BatchPlan {
    request: Range<usize>,
    out: Range<usize>,
    reply: Range<usize>,
    in_: Range<usize>,
}

impl BatchPlan {
    /// Lays the streams out back to back; fails when they do not fit.
    fn new(lens: [usize; 4], data_len: usize) -> io::Result<BatchPlan> {
        let mut at = 0usize;
        let mut spans = [0..0, 0..0, 0..0, 0..0];
        for (span, len) in spans.iter_mut().zip(lens) {
            let end = at
                .checked_add(len)
                .filter(|&end| end <= data_len)
                .ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!(
                            "batch of {} bytes does not fit the {data_len}-byte loopback data area",
                            lens.iter().fold(0usize, |a, &b| a.saturating_add(b))
                        ),
                    )
                })?;
            *span = at..end;
            at = end.next_multiple_of(STREAM_ALIGN);
        }
        let [request, out, reply, in_] = spans;
        Ok(BatchPlan {
            request,
            out,
            reply,
            in_,
        })
    }

    /// The descriptor chain: readable request and out-data, then writable
    /// reply and in-data; empty streams are left out.
    #[cfg(test)]
    fn chain(&self, data_gpa: u64) -> Vec<DescSpec> {
        self.chain_placed(
            data_gpa,
            &[Place::Area(self.out.len())],
            &[Place::Area(self.in_.len())],
        )
    }

    /// As `chain`, where the out- and in-data are made of `out` and `in_`
    /// in order: pieces of the plan's spans, or segments named in place.
    #[cfg(test)]
    fn chain_placed(&self, data_gpa: u64, out: &[Place], in_: &[Place]) -> Vec<DescSpec> {
        let mut chain = Vec::new();
        self.chain_placed_into(data_gpa, out, in_, &mut chain);
        chain
    }

    /// [`Self::chain_placed`] into `chain` (emptied first), reusing its room.
    fn chain_placed_into(
        &self,
        data_gpa: u64,
        out: &[Place],
        in_: &[Place],
        chain: &mut Vec<DescSpec>,
    ) {
        chain.clear();
        let area = |span: &Range<usize>| [Place::Area(span.len())];
        let streams: [(&Range<usize>, &[Place], bool); 4] = [
            (&self.request, &area(&self.request), false),
            (&self.out, out, false),
            (&self.reply, &area(&self.reply), true),
            (&self.in_, in_, true),
        ];
        for (span, places, writable) in streams {
            let mut area_at = span.start;
            for place in places {
                let (addr, len) = match *place {
                    Place::Area(len) => {
                        area_at += len;
                        (data_gpa + (area_at - len) as u64, len)
                    }
                    Place::InPlace { gpa, len } => (gpa, len),
                };
                push_span(chain, addr, len, writable);
            }
        }
    }
}

/// Where one segment of the out- or in-data travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Copied through the data area (this many bytes, next in its span).
    Area(usize),
    /// Named in place: it lies in the page-locked heap.
    InPlace { gpa: u64, len: usize },
}

/// Descriptors for `len` bytes at `addr`, none longer than a descriptor
/// may be; nothing for an empty span.
fn push_span(chain: &mut Vec<DescSpec>, addr: u64, len: usize, writable: bool) {
    let mut at = 0usize;
    while at < len {
        let piece = (len - at).min(MAX_DESCRIPTOR_LEN);
        chain.push(DescSpec {
            addr: addr + at as u64,
            len: piece as u32,
            writable,
        });
        at += piece;
    }
}

/// The largest request stream a data area of `data_len` bytes takes: a
/// quarter of it (at most the protocol's limit).
fn max_request_len_for(data_len: usize) -> usize {
    (MAX_REQUEST_LEN as usize).min(data_len / 4)
}

/// The largest out-data (or in-data) stream a data area of `data_len` bytes
/// takes: a quarter of it, so a batch at every limit still leaves a quarter
/// for the reply stream.
fn max_data_len_for(data_len: usize) -> usize {
    data_len / 4
}

/// The loopback [`Transport`]. One batch at a time: `submit` waits for the
/// backend's answer before it returns.
#[derive(Debug)]
pub struct Loopback {
    device: LoopbackDevice,
    data_len: usize,
    /// Where to reconnect when the backend goes away.
    path: std::path::PathBuf,
    config: LoopbackConfig,
    /// How long to keep trying to reach a restarted backend.
    reconnect_for: std::time::Duration,
    /// The batch `post` left running, if any.
    posted: Option<Started>,
    /// The page-locked heap, if any (kept across reconnects).
    heap: Option<Arc<GuestRam>>,
    /// The backend reads and writes this process's memory itself.
    peer_memory: bool,
    /// Reconnects so far (see [`Transport::connection`]).
    reconnects: u64,
    /// Where the last batch's out- and in-data went, and its descriptor
    /// chain: kept for their room, so a batch allocates nothing here.
    places: Vec<Place>,
    chain: Vec<DescSpec>,
}

/// A batch on the ring whose answer is not read yet: where its reply lies.
#[derive(Debug)]
struct Started {
    head: u16,
    reply_at: u64,
    reply_len: usize,
    in_at: u64,
    in_len: usize,
    /// Whether large in-data went by peer memory (not copied back).
    peer: bool,
    /// The batch's bytes, kept while it is posted: a backend that goes away
    /// meanwhile gets it again after the reconnect (the data area it was
    /// written to went with the old connection).
    resend: Option<(Vec<u8>, Vec<u8>)>,
}

/// Environment variable: seconds to wait for a restarted backend (0: never
/// reconnect). Default 60.
pub const RECONNECT_ENV: &str = "VGPU_RECONNECT_SECS";

fn reconnect_window() -> std::time::Duration {
    let secs = std::env::var(RECONNECT_ENV)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(60u64);
    std::time::Duration::from_secs(secs)
}

/// Whether an error means the backend went away (rather than refused us).
fn backend_gone(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::NotConnected
            | io::ErrorKind::UnexpectedEof
    )
}

impl Loopback {
    /// Connects to the backend socket at `path` with the configuration from
    /// the environment ([`LoopbackConfig::from_env`]).
    pub fn connect(path: &Path) -> io::Result<Loopback> {
        Loopback::connect_with(path, &LoopbackConfig::from_env()?)
    }

    /// Connects with an explicit configuration.
    pub fn connect_with(path: &Path, config: &LoopbackConfig) -> io::Result<Loopback> {
        let heap = if config.heap_len == 0 {
            None
        } else {
            let ram_end = config.guest_base
                + MemoryLayout::new(config.data_len, config.event_buffers)?.total as u64;
            Some(Arc::new(GuestRam::new(
                ram_end.next_multiple_of(HEAP_ALIGN),
                config.heap_len,
            )?))
        };
        let device = LoopbackDevice::connect_with_heap(path, config, heap.clone())?;
        Ok(Loopback {
            heap,
            device,
            data_len: config.data_len,
            path: path.to_path_buf(),
            config: config.clone(),
            reconnect_for: config.reconnect_for,
            posted: None,
            peer_memory: false,
            reconnects: 0,
            places: Vec::new(),
            chain: Vec::new(),
        })
    }

    /// Connects again to a backend that went away, retrying until the
    /// reconnect window closes. A backend restarted with `--restore` from a
    /// checkpoint taken while this process waited resumes its session.
    fn reconnect(&mut self) -> io::Result<()> {
        let deadline = std::time::Instant::now() + self.reconnect_for;
        log::warn!(
            "vgpu backend at {} went away; reconnecting",
            self.path.display()
        );
        loop {
            match LoopbackDevice::connect_with_heap(&self.path, &self.config, self.heap.clone()) {
                Ok(device) => {
                    self.device = device;
                    // The new backend announced nothing to this session.
                    self.peer_memory = false;
                    self.reconnects += 1;
                    log::warn!("reconnected to the vgpu backend");
                    return Ok(());
                }
                Err(e) if std::time::Instant::now() >= deadline => return Err(e),
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(100)),
            }
        }
    }

    /// The device underneath, for tests that mix hand-made chains with
    /// ordinary batches. Batches overwrite the data area.
    pub fn device(&mut self) -> &mut LoopbackDevice {
        &mut self.device
    }

    pub fn into_device(self) -> LoopbackDevice {
        self.device
    }
}

impl Transport for Loopback {
    /// Submits a batch; if the backend goes away before answering, waits for
    /// it to come back (see `RECONNECT_ENV`) and submits the batch again.
    fn submit(&mut self, mut submission: Submission<'_>) -> io::Result<usize> {
        match self.submit_once(&mut submission) {
            Err(e) if backend_gone(&e) && !self.reconnect_for.is_zero() => {
                self.reconnect()?;
                self.submit_once(&mut submission)
            }
            other => other,
        }
    }

    /// Starts the batch and returns at once; on a backend that went away it
    /// falls back to `submit` (which reconnects and runs it to completion).
    fn post(&mut self, mut submission: Submission<'_>) -> io::Result<Option<usize>> {
        if !submission.in_.is_empty() || self.posted.is_some() {
            return self.submit(submission).map(Some);
        }
        // Never by peer memory: the caller's buffers end with this call,
        // before the backend has read them.
        match self.start(&submission, false) {
            Ok(mut started) => {
                if !self.reconnect_for.is_zero() {
                    started.resend = Some((submission.request.to_vec(), submission.out.concat()));
                }
                self.posted = Some(started);
                Ok(None)
            }
            Err(e) if backend_gone(&e) && !self.reconnect_for.is_zero() => {
                self.reconnect()?;
                self.submit_once(&mut submission).map(Some)
            }
            Err(e) => Err(e),
        }
    }

    fn finish_posted(&mut self, reply: &mut [u8]) -> io::Result<usize> {
        let mut started = self
            .posted
            .take()
            .ok_or_else(|| io::Error::other("no batch was posted"))?;
        let reply_len = started.reply_len.min(reply.len());
        let resend = started.resend.take();
        match (
            self.finish(started, &mut reply[..reply_len], &mut []),
            resend,
        ) {
            (Err(e), Some((request, out))) if backend_gone(&e) => {
                self.reconnect()?;
                self.submit_once(&mut Submission {
                    request: &request,
                    out: &[&out],
                    reply: &mut reply[..reply_len],
                    in_: &mut [],
                })
            }
            (result, _) => result,
        }
    }

    fn posted_finished(&mut self) -> bool {
        // The posted batch is the only chain in flight: any used element
        // is its answer.
        self.posted.is_none() || self.device.has_used()
    }

    fn enable_peer_memory(&mut self) {
        self.peer_memory = true;
    }

    fn max_data_len(&self) -> usize {
        max_data_len_for(self.data_len)
    }

    fn connection(&self) -> u64 {
        self.reconnects
    }

    fn shared_heap(&self) -> Option<Range<usize>> {
        let heap = self.heap.as_ref()?;
        let start = heap.host_ptr(heap.base(), 0).ok()? as usize;
        Some(start..start + heap.range().end.saturating_sub(heap.base()) as usize)
    }

    fn max_request_len(&self) -> usize {
        max_request_len_for(self.data_len)
    }
}

impl Loopback {
    fn submit_once(&mut self, submission: &mut Submission<'_>) -> io::Result<usize> {
        if let Some(posted) = self.posted.take() {
            // Its reply is no longer wanted, but it goes first on the ring.
            self.finish(posted, &mut [], &mut [])?;
        }
        let started = self.start(submission, self.peer_memory)?;
        self.finish(started, submission.reply, submission.in_)
    }

    /// Where a segment travels: in place when it lies in the heap, or
    /// (with `peer`) when it is large enough to go by peer memory, named
    /// in the peer window; the caller then keeps it alive and unchanged
    /// until the batch is finished.
    fn place(&self, segment: &[u8], peer: bool) -> Place {
        if let (Some(heap), Some(range)) = (&self.heap, self.shared_heap()) {
            let start = segment.as_ptr() as usize;
            if !segment.is_empty() && range.start <= start && start + segment.len() <= range.end {
                return Place::InPlace {
                    gpa: heap.base() + (start - range.start) as u64,
                    len: segment.len(),
                };
            }
        }
        if peer && segment.len() >= PEER_MIN_LEN {
            return Place::InPlace {
                gpa: PEER_WINDOW_BASE + segment.as_ptr() as u64,
                len: segment.len(),
            };
        }
        Place::Area(segment.len())
    }

    /// Lays the batch out in the data area and publishes it.
    fn start(&mut self, submission: &Submission<'_>, peer: bool) -> io::Result<Started> {
        let mut places = std::mem::take(&mut self.places);
        places.clear();
        places.extend(submission.out.iter().map(|s| self.place(s, peer)));
        let outs = places.len();
        places.extend(submission.in_.iter().map(|s| self.place(s, peer)));
        let started = self.start_placed(submission, peer, &places[..outs], &places[outs..]);
        self.places = places;
        started
    }

    /// [`Self::start`] once each segment's place is known.
    fn start_placed(
        &mut self,
        submission: &Submission<'_>,
        peer: bool,
        out_places: &[Place],
        in_places: &[Place],
    ) -> io::Result<Started> {
        let copied = |places: &[Place]| -> usize {
            places
                .iter()
                .map(|p| match p {
                    Place::Area(len) => *len,
                    Place::InPlace { .. } => 0,
                })
                .sum()
        };
        let (out_len, in_len) = (copied(out_places), copied(in_places));
        if submission.request.is_empty() || submission.request.len() > self.max_request_len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("request stream of {} bytes", submission.request.len()),
            ));
        }
        if out_len.max(in_len) > self.max_data_len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("data streams of {out_len} and {in_len} bytes exceed max_data_len"),
            ));
        }
        let reply_len = submission.reply.len();
        let plan = BatchPlan::new(
            [submission.request.len(), out_len, reply_len, in_len],
            self.data_len,
        )?;
        let data = self.device.data_area().start;
        let gpa = |offset: usize| data + offset as u64;

        self.device
            .write_guest(gpa(plan.request.start), submission.request)?;
        let mut at = plan.out.start;
        for (segment, place) in submission.out.iter().zip(out_places) {
            if let Place::Area(len) = place {
                self.device.write_guest(gpa(at), segment)?;
                at += len;
            }
        }
        let mut chain = std::mem::take(&mut self.chain);
        plan.chain_placed_into(data, out_places, in_places, &mut chain);
        let head = self.device.send_chain(&chain);
        self.chain = chain;
        let head = head?;
        Ok(Started {
            head,
            reply_at: gpa(plan.reply.start),
            reply_len,
            in_at: gpa(plan.in_.start),
            in_len: submission.in_.iter().map(|s| s.len()).sum(),
            peer,
            resend: None,
        })
    }

    /// Waits for a started batch and copies its reply and in-data back.
    fn finish(
        &mut self,
        started: Started,
        reply: &mut [u8],
        in_: &mut [&mut [u8]],
    ) -> io::Result<usize> {
        let used = loop {
            match self.device.wait_used(None)? {
                Some(used) if used.id == u32::from(started.head) => break used,
                Some(other) => log::debug!("loopback: ignoring used element {other:?}"),
                None => {}
            }
        };
        self.device.post_event_buffers()?;

        let used_len = used.len as usize;
        if used_len > started.reply_len + started.in_len {
            log::warn!(
                "loopback: the backend reports {used_len} bytes written into {} writable bytes",
                started.reply_len + started.in_len
            );
        }
        if used_len == 0 {
            // As the kernel driver's VGPU_IOC_WAIT answers EIO.
            return Err(io::Error::other(
                "the backend refused the batch (used length 0)",
            ));
        }
        let mut written = used_len.min(started.reply_len);
        if used_len > started.reply_len {
            // In-data came back too, so the used length counts the whole
            // reply area: the reply's header says how much of it is the
            // reply (copying the whole area cost a 1 MiB device-to-host
            // copy a third of its time).
            let mut header = [0u8; vgpu_protocol::frame::REPLY_HEADER_LEN];
            if header.len() <= written {
                self.device.read_guest(started.reply_at, &mut header)?;
                if let Some(len) = vgpu_protocol::frame::reply_len(&header) {
                    written = len.clamp(header.len(), written);
                }
            }
        }
        let copied = written.min(reply.len());
        self.device
            .read_guest(started.reply_at, &mut reply[..copied])?;
        // In the VM path the device writes the caller's pages directly; here
        // the in-data stream is copied back, except segments in the heap or
        // gone by peer memory, which the device wrote in place.
        let mut at = started.in_at;
        for segment in in_.iter_mut() {
            if let Place::Area(len) = self.place(segment, started.peer) {
                self.device.read_guest(at, segment)?;
                at += len as u64;
            }
        }
        Ok(written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_mem_mb_accepts_sizes_in_range() {
        assert_eq!(parse_mem_mb(MEM_MB_ENV, "64").expect("valid"), 64 << 20);
        assert_eq!(parse_mem_mb(MEM_MB_ENV, " 1 ").expect("valid"), 1 << 20);
    }

    #[test]
    fn parse_mem_mb_rejects_garbage_zero_and_huge() {
        for bad in ["", "0", "-1", "abc", "65537", "99999999999999999999"] {
            let err = parse_mem_mb(MEM_MB_ENV, bad).expect_err(bad);
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{bad}");
        }
    }

    #[test]
    fn limits_of_the_default_data_area() {
        assert_eq!(max_request_len_for(DEFAULT_DATA_LEN), 16 << 20);
        assert_eq!(max_data_len_for(DEFAULT_DATA_LEN), 16 << 20);
        assert_eq!(max_request_len_for(1 << 30), MAX_REQUEST_LEN as usize);
    }

    #[test]
    fn a_batch_at_every_limit_leaves_a_quarter_for_the_reply() {
        for mb in [1usize, 3, 64, 1000] {
            let data_len = mb << 20;
            let max = max_data_len_for(data_len);
            let request = max_request_len_for(data_len);
            BatchPlan::new([request, max, data_len / 4, max], data_len).expect("fits");
        }
    }

    #[test]
    fn plan_lays_streams_out_in_order_and_aligned() {
        let plan = BatchPlan::new([100, 0, 24, 5000], 1 << 20).expect("fits");
        assert_eq!(plan.request, 0..100);
        assert_eq!(plan.out, 128..128);
        assert_eq!(plan.reply, 128..152);
        assert_eq!(plan.in_, 192..5192);
    }

    #[test]
    fn plan_rejects_a_batch_larger_than_the_area() {
        let err = BatchPlan::new([100, 1 << 20, 24, 0], 1 << 20).expect_err("too big");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(BatchPlan::new([usize::MAX, 1, 0, 0], 1 << 20).is_err());
    }

    #[test]
    fn chain_is_readable_then_writable_and_skips_empty_streams() {
        let plan = BatchPlan::new([100, 0, 24, 5000], 1 << 20).expect("fits");
        let chain = plan.chain(0x1000);
        assert_eq!(
            chain,
            vec![
                DescSpec {
                    addr: 0x1000,
                    len: 100,
                    writable: false
                },
                DescSpec {
                    addr: 0x1000 + 128,
                    len: 24,
                    writable: true
                },
                DescSpec {
                    addr: 0x1000 + 192,
                    len: 5000,
                    writable: true
                },
            ]
        );
    }

    #[test]
    fn in_place_segments_keep_their_order_among_copied_ones() {
        // Out: 10 copied bytes, 4096 in place, 6 copied; in: 8 in place.
        let plan = BatchPlan::new([64, 16, 24, 0], 1 << 20).expect("fits");
        let out = [
            Place::Area(10),
            Place::InPlace {
                gpa: 0x9000,
                len: 4096,
            },
            Place::Area(6),
        ];
        let in_ = [Place::InPlace {
            gpa: 0xa000,
            len: 8,
        }];
        let spec = |addr, len, writable| DescSpec {
            addr,
            len,
            writable,
        };
        assert_eq!(
            plan.chain_placed(0x1000, &out, &in_),
            vec![
                spec(0x1000, 64, false),
                spec(0x1000 + 64, 10, false),
                spec(0x9000, 4096, false),
                spec(0x1000 + 74, 6, false),
                spec(0x1000 + 128, 24, true),
                spec(0xa000, 8, true),
            ]
        );
    }

    #[test]
    fn chain_splits_spans_longer_than_a_descriptor() {
        let plan = BatchPlan {
            request: 0..64,
            out: 64..64 + MAX_DESCRIPTOR_LEN + 10,
            reply: 0..0,
            in_: 0..0,
        };
        let chain = plan.chain(0);
        assert_eq!(chain.len(), 3);
        assert_eq!(chain[1].len as usize, MAX_DESCRIPTOR_LEN);
        assert_eq!(
            chain[2],
            DescSpec {
                addr: 64 + MAX_DESCRIPTOR_LEN as u64,
                len: 10,
                writable: false
            }
        );
    }

    #[test]
    fn connect_to_a_missing_socket_fails() {
        let err = Loopback::connect_with(
            Path::new("/nonexistent/vgpu.sock"),
            &LoopbackConfig {
                data_len: 1 << 20,
                ..LoopbackConfig::default()
            },
        )
        .expect_err("no socket");
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }
}
