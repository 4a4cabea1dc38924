//! `backend_chains`: the vring's own path under a hostile driver. Batches
//! (the operations of `backend_dispatch`, and CUDA messages) are written
//! into a real `GuestRam` behind descriptor chains laid out by the input
//! (`layout`), popped from a split queue, resolved by the backend's
//! `chain::resolve` and handed to a quota-bound `Vgpu::accept`, as
//! `vhost/device.rs` does. Then a checkpoint of what the input built is
//! taken, damaged (`restore`) and restored into the live vGPU.
//!
//! Checked besides "no crash, no hang, no leak":
//! - a used length never exceeds the chain's writable bytes, and a reply
//!   the backend wrote is a well-formed reply stream;
//! - device memory and objects in use never exceed the VM's quota;
//! - without a CUDA device, no CUDA call succeeds;
//! - the unchanged checkpoint restores, to the same object counts;
//! - a refused restore changes nothing (object counts, quota usage);
//! - after any restore the vGPU still serves calls, and refuses a handle
//!   it never issued.

mod layout;
mod restore;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};

use arbitrary::{Result, Unstructured};
use vgpu_backend::chain::{resolve, ChainStart, GuestRam};
use vgpu_backend::executor::Executor;
use vgpu_backend::persist::{self, Continuity};
use vgpu_backend::quota::Limits;
use vgpu_backend::vgpu::Vgpu;
use vgpu_protocol::frame::{BatchBuilder, BATCH_HEADER_LEN, REPLY_HEADER_LEN};
use vgpu_protocol::messages::*;
use vgpu_protocol::{decode_reply, opcode, InfoTarget, Reply, Request};
use virtio_queue::desc::{split::Descriptor as SplitDescriptor, RawDescriptor};
use virtio_queue::mock::MockSplitQueue;
use virtio_queue::{Queue, QueueT};
use vm_memory::{ByteValued, Bytes, GuestAddress};

use crate::dispatch::{self, Model, UNKNOWN_OBJECT};
use layout::{Desc, Layout, OUT_AT, QUEUE_SIZE, RAM, REGION, REPLY_AT, REPLY_SLOT, REQUEST_AT};
use restore::Mutation;

const VRING_DESC_F_NEXT: u16 = 1;
const VRING_DESC_F_WRITE: u16 = 2;

/// What the runs of this process reached, for the sweeps' report: chains
/// handed to the vGPU, chains `resolve` dropped, calls answered with
/// success, restores that succeeded, restores refused.
static REACHED: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];
const ACCEPTED: usize = 0;
const DROPPED: usize = 1;
const SUCCEEDED: usize = 2;
const RESTORED: usize = 3;
const REFUSED: usize = 4;

fn note(what: usize) {
    REACHED[what].fetch_add(1, Ordering::Relaxed);
}

/// See [`REACHED`]: accepted, dropped, succeeded, restored, refused.
pub fn reached() -> [u64; 5] {
    REACHED.each_ref().map(|n| n.load(Ordering::Relaxed))
}

/// The session every batch of the input runs in.
const SESSION: u64 = 1;

/// Every CUDA request opcode.
const CUDA_OPCODES: &[u32] = &[
    opcode::CuInit,
    opcode::CuDeviceInfo,
    opcode::CuMemGetInfo,
    opcode::CuCtxCreate,
    opcode::CuCtxDestroy,
    opcode::CuPrimaryCtxRetain,
    opcode::CuPrimaryCtxRelease,
    opcode::CuPrimaryCtxReset,
    opcode::CuCtxSynchronize,
    opcode::CuCtxGetStreamPriorityRange,
    opcode::CuCtxGetLimit,
    opcode::CuCtxSetLimit,
    opcode::CuTakeDeviceOutput,
    opcode::CuMemAlloc,
    opcode::CuMemFree,
    opcode::CuMemcpyHtoD,
    opcode::CuMemcpyDtoH,
    opcode::CuMemcpyDtoD,
    opcode::CuMemcpyDtoHStart,
    opcode::CuMemcpyDtoHSignalled,
    opcode::CuMemcpyHtoDSignalled,
    opcode::CuMemcpyCollect,
    opcode::CuHostRegister,
    opcode::CuHostUnregister,
    opcode::CuMemset,
    opcode::CuMemsetD2D,
    opcode::CuModuleLoad,
    opcode::CuModuleUnload,
    opcode::CuModuleGetFunction,
    opcode::CuModuleGetGlobal,
    opcode::CuFuncGetAttribute,
    opcode::CuFuncSetAttribute,
    opcode::CuFuncSetCacheConfig,
    opcode::CuOccupancyMaxActiveBlocks,
    opcode::CuOccupancyMaxPotentialBlockSize,
    opcode::CuImageChunk,
    opcode::CuModuleLoadStaged,
    opcode::CuOccupancyAvailableDynamicSMem,
    opcode::CuOccupancyMaxActiveClusters,
    opcode::CuModuleFunctionNames,
    opcode::CuLaunchKernel,
    opcode::CuLaunchCooperativeKernel,
    opcode::CuStreamCreate,
    opcode::CuStreamDestroy,
    opcode::CuStreamSynchronize,
    opcode::CuStreamQuery,
    opcode::CuStreamWaitEvent,
    opcode::CuEventCreate,
    opcode::CuEventDestroy,
    opcode::CuEventRecord,
    opcode::CuEventSynchronize,
    opcode::CuEventQuery,
    opcode::CuEventElapsedTime,
];

/// A CUDA request whose fields are the input's bytes: the shortest
/// prefix of them that decodes as the chosen opcode's payload.
fn cuda_request(u: &mut Unstructured<'_>) -> Result<Option<Request>> {
    let op = *u.choose(CUDA_OPCODES)?;
    let len = u.int_in_range(0..=96usize)?.min(u.len());
    let raw = u.bytes(len)?;
    Ok((0..=raw.len()).find_map(|n| Request::decode(op, &raw[..n]).ok()))
}

/// Small per-VM limits, so that the input runs into them.
fn limits(u: &mut Unstructured<'_>) -> Result<Limits> {
    Ok(Limits {
        memory_bytes: *u.choose(&[0, 1, 256, 4096, 65536, 1 << 20])?,
        objects: *u.choose(&[0, 1, 2, 4, 8, 16])?,
        in_flight: *u.choose(&[0, 1, 2, 3])?,
        batch_messages: *u.choose(&[0, 0, 1, 4, 16])?,
    })
}

/// The requests of one batch: OpenCL operations (user events left out:
/// nothing here would set them, and a wait on one is the guest's own
/// deadlock) and CUDA messages.
fn requests(u: &mut Unstructured<'_>, model: &Model) -> Result<Vec<Request>> {
    let mut requests = Vec::new();
    for _ in 0..u.int_in_range(1u8..=16)? {
        if u.ratio(1u8, 5)? {
            requests.extend(cuda_request(u)?);
            continue;
        }
        let request = dispatch::operation(u, model)?;
        if !matches!(request, Request::CreateUserEvent(_)) {
            requests.push(request);
        }
    }
    Ok(requests)
}

/// One run: guest memory, its queue, and the vGPU the chains go to.
struct Run<'a> {
    mem: Arc<GuestRam>,
    queue: Queue,
    mock: MockSplitQueue<'a, GuestRam>,
    /// Next free slot of the descriptor table.
    next_desc: u16,
    vgpu: Arc<Vgpu>,
    limits: Limits,
    seq: u64,
    /// Whether the out-data region may no longer hold `out_data()`: at
    /// the start, and once a chain had a writable descriptor over it.
    out_stale: bool,
}

/// A chain handed to the vGPU, and what its answer is checked against.
struct Sent {
    head: u16,
    layout: Layout,
    cuda: Vec<bool>,
}

impl Run<'_> {
    fn check_quota(&self) {
        let quota = self.vgpu.quota();
        if self.limits.memory_bytes != 0 {
            assert!(
                quota.memory_used() <= self.limits.memory_bytes,
                "memory quota exceeded: {} of {}",
                quota.memory_used(),
                self.limits.memory_bytes
            );
        }
        if self.limits.objects != 0 {
            assert!(
                quota.objects_used() <= self.limits.objects,
                "object quota exceeded: {} of {}",
                quota.objects_used(),
                self.limits.objects
            );
        }
    }

    /// Encodes `requests` for `session` with a reply capacity the layout
    /// honours.
    fn encode(&mut self, session: u64, requests: &[Request], reply_len: u32) -> Vec<u8> {
        let mut builder = BatchBuilder::new(0);
        for request in requests {
            self.seq += 1;
            builder.push(self.seq, request);
        }
        builder.finish(session, reply_len)
    }

    /// Writes the chain's descriptors and data, publishes it and hands
    /// every chain the driver published to the vGPU; `None` where
    /// `resolve` dropped it (returned unused, as the device does).
    /// What `MockSplitQueue::add_desc_chains` does, with the descriptors
    /// written in one copy instead of one guest-memory access each (a
    /// chain has up to 4,097): each descriptor that does not follow a
    /// NEXT flag is a head in the available ring.
    fn add_desc_chains(&self, raw: &[RawDescriptor], first: u16) {
        let mem = &*self.mem;
        let table: Vec<u8> = raw.iter().flat_map(|d| d.as_slice()).copied().collect();
        let at = self.mock.desc_table_addr().0 + u64::from(first) * 16;
        mem.write_slice(&table, GuestAddress(at))
            .expect("the descriptor table has room");
        let avail = self.mock.avail_addr().0;
        let idx = u16::from_le(
            mem.read_obj(GuestAddress(avail + 2))
                .expect("the available ring is in memory"),
        );
        let mut added: u16 = 0;
        for i in 0..raw.len() {
            let follows_next =
                i > 0 && SplitDescriptor::from(raw[i - 1]).flags() & VRING_DESC_F_NEXT != 0;
            if !follows_next {
                let slot = u64::from(idx.wrapping_add(added) % QUEUE_SIZE);
                let head = first + i as u16;
                mem.write_obj(head.to_le(), GuestAddress(avail + 4 + slot * 2))
                    .expect("the available ring is in memory");
                added += 1;
            }
        }
        mem.write_obj(idx.wrapping_add(added).to_le(), GuestAddress(avail + 2))
            .expect("the available ring is in memory");
    }

    fn send(
        &mut self,
        layout: Layout,
        request: &[u8],
        cuda: Vec<bool>,
        done: &mpsc::Sender<(u16, u32)>,
    ) -> Vec<Sent> {
        let mem = &*self.mem;
        mem.write_slice(request, GuestAddress(REQUEST_AT))
            .expect("the request region holds a batch");
        // Rewritten only when something may have changed it: a 64 KiB
        // volatile copy into guest memory for every chain cost about 4%.
        if self.out_stale {
            mem.write_slice(out_data(), GuestAddress(OUT_AT))
                .expect("the out-data region is in memory");
            self.out_stale = false;
        }
        let out_region = OUT_AT..OUT_AT + REGION;
        self.out_stale = layout.descs.iter().any(|d| {
            let end = d.addr.saturating_add(u64::from(d.len));
            d.writable && d.addr < out_region.end && end > out_region.start
        });
        let count = layout.descs.len() as u16;
        if u32::from(self.next_desc) + u32::from(count) > u32::from(QUEUE_SIZE) {
            // The table is full of chains in flight: each needs its own
            // head, which tells their completions apart.
            return Vec::new();
        }
        let first = self.next_desc;
        let raw: Vec<RawDescriptor> = layout
            .descs
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let last = i + 1 == layout.descs.len();
                let mut flags = if d.writable { VRING_DESC_F_WRITE } else { 0 };
                let next = if last && layout.looped {
                    flags |= VRING_DESC_F_NEXT;
                    first
                } else if last {
                    0
                } else {
                    flags |= VRING_DESC_F_NEXT;
                    first + i as u16 + 1
                };
                RawDescriptor::from(SplitDescriptor::new(d.addr, d.len, flags, next))
            })
            .collect();
        self.next_desc = first + count;
        self.add_desc_chains(&raw, first);
        let mut sent = Vec::new();
        loop {
            // Counted before the pop, as the vring thread does.
            let ticket = self.vgpu.chain_ticket();
            let Some(chain) = self.queue.pop_descriptor_chain(&*self.mem) else {
                break;
            };
            let head = chain.head_index();
            let start = ChainStart::of(&self.queue, head);
            let Ok(resolved) = resolve(start, self.mem.clone()) else {
                note(DROPPED);
                continue;
            };
            note(ACCEPTED);
            let done = done.clone();
            self.vgpu.accept(
                resolved,
                Box::new(move |head, used| {
                    let _ = done.send((head, used));
                }),
                ticket,
            );
            sent.push(head);
        }
        // Only the chain laid out here starts at `first`; a second head
        // (a descriptor without NEXT in the middle) is someone else's.
        sent.into_iter()
            .map(|head| Sent {
                head,
                layout: if head == first {
                    Layout {
                        descs: layout.descs.clone(),
                        reply: layout.reply.clone(),
                        looped: layout.looped,
                    }
                } else {
                    Layout {
                        descs: Vec::new(),
                        reply: Vec::new(),
                        looped: false,
                    }
                },
                cuda: if head == first {
                    cuda.clone()
                } else {
                    Vec::new()
                },
            })
            .collect()
    }

    /// Waits for every sent chain and checks its answer; the descriptor
    /// table is free again after.
    fn collect(
        &mut self,
        sent: Vec<Sent>,
        done: &mpsc::Receiver<(u16, u32)>,
    ) -> Vec<Option<Reply>> {
        self.next_desc = 0;
        let mut used = std::collections::HashMap::new();
        for _ in 0..sent.len() {
            let (head, len) = done.recv().expect("the vGPU returns every chain");
            used.insert(head, len);
        }
        // The in-flight count drops just after a chain is returned: wait
        // for it, or the next chain may be refused as over the limit.
        assert!(
            self.vgpu.wait_idle(std::time::Duration::from_secs(60)),
            "a returned chain stayed counted in flight"
        );
        self.check_quota();
        sent.iter()
            .map(|s| {
                let len = used[&s.head];
                if s.layout.descs.is_empty() {
                    return None;
                }
                assert!(
                    u64::from(len) <= s.layout.writable_len(),
                    "used length {len} exceeds the {} writable bytes",
                    s.layout.writable_len()
                );
                if s.layout.reply.is_empty() {
                    return None;
                }
                let mut reply = Vec::new();
                for d in &s.layout.reply {
                    let mut piece = vec![0u8; d.len as usize];
                    self.mem
                        .read_slice(&mut piece, GuestAddress(d.addr))
                        .expect("reply descriptors are in memory");
                    reply.extend_from_slice(&piece);
                }
                let reply = decode_reply(&reply).unwrap_or_else(|e| {
                    panic!(
                        "the backend wrote a malformed reply ({e}): used {len}, \
                         reply area {} bytes starting {:02x?}",
                        reply.len(),
                        &reply[..reply.len().min(24)]
                    )
                });
                if dispatch::trace() {
                    eprintln!("reply: {:?}", reply.status);
                    reply.records.iter().for_each(|r| {
                        eprintln!("  {:#x}: {:?}", r.opcode, r.status);
                    });
                }
                reply
                    .records
                    .iter()
                    .filter(|r| r.status.is_success())
                    .for_each(|_| note(SUCCEEDED));
                for (record, &cuda) in reply.records.iter().zip(&s.cuda) {
                    assert!(
                        !(cuda && record.status.is_success()),
                        "CUDA call {:#x} succeeded without a CUDA device",
                        record.opcode
                    );
                }
                Some(reply)
            })
            .collect()
    }

    /// Runs `requests` in `session` over a plain chain; the reply.
    fn plain(&mut self, session: u64, requests: &[Request]) -> Option<Reply> {
        let reply_len = REGION as u32;
        let bytes = self.encode(session, requests, reply_len);
        let layout = Layout {
            descs: vec![
                Desc {
                    addr: REQUEST_AT,
                    len: bytes.len() as u32,
                    writable: false,
                },
                Desc {
                    addr: REPLY_AT,
                    len: reply_len,
                    writable: true,
                },
            ],
            reply: vec![Desc {
                addr: REPLY_AT,
                len: reply_len,
                writable: true,
            }],
            looped: false,
        };
        let (tx, rx) = mpsc::channel();
        let sent = self.send(layout, &bytes, vec![false; requests.len()], &tx);
        self.collect(sent, &rx).into_iter().flatten().next()
    }

    /// The vGPU serves calls and refuses a handle it never issued.
    fn check_usable(&mut self) {
        let session = if self.vgpu.stats().sessions < 64 {
            self.vgpu.stats().sessions as u64 + 100
        } else {
            SESSION
        };
        let probe = [
            OpenSession {
                min_version: 1,
                max_version: 1,
                flags: 0,
            }
            .into(),
            GetInfo {
                target: InfoTarget::Platform as u32,
                handle: 0,
                index: 0,
                param: 0x0900,
            }
            .into(),
            GetInfo {
                target: InfoTarget::Context as u32,
                handle: 0x7e57_0000_dead,
                index: 0,
                param: 0x1080,
            }
            .into(),
        ];
        // One message a batch: the VM's batch limit may be one.
        let skip = usize::from(session == SESSION);
        let mut records = Vec::new();
        for request in &probe[skip..] {
            let reply = self
                .plain(session, std::slice::from_ref(request))
                .expect("a plain chain resolves");
            assert!(reply.status.is_success(), "probe batch refused: {reply:?}");
            records.extend(reply.records);
        }
        let records = &records[records.len() - 2..];
        assert!(
            records[0].status.is_success(),
            "platform query failed: {records:?}"
        );
        assert!(
            UNKNOWN_OBJECT.contains(&records[1].status),
            "an unknown context was not refused: {records:?}"
        );
    }

    /// Takes a checkpoint, damages it as `plan` says, restores it; checks
    /// the outcome.
    fn restore(&mut self, plan: &[u8]) -> Result<()> {
        let u = &mut Unstructured::new(plan);
        // Whatever the guest built, a checkpoint can be taken (a VM must
        // not be able to keep itself from being migrated).
        let (checkpoint, _) = persist::save(&self.vgpu, Vec::new(), None)
            .unwrap_or_else(|e| panic!("no checkpoint of the vGPU: {e}"));
        let (mutation, stream) = restore::mutate(u, &checkpoint)?;
        let quota = self.vgpu.quota();
        let before = (
            self.vgpu.stats().objects,
            quota.memory_used(),
            quota.objects_used(),
        );
        let result = persist::restore(&self.vgpu, &stream[..], Continuity::Unchecked);
        if dispatch::trace() {
            eprintln!(
                "restore {mutation:?}, {} of {} bytes differ: {:?}",
                stream
                    .iter()
                    .zip(&checkpoint)
                    .filter(|(a, b)| a != b)
                    .count(),
                checkpoint.len(),
                result.as_ref().map(|_| ()).map_err(|e| e.to_string())
            );
        }
        let after = || {
            (
                self.vgpu.stats().objects,
                quota.memory_used(),
                quota.objects_used(),
            )
        };
        match result {
            Ok(_) if mutation == Mutation::None => {
                note(RESTORED);
                assert_eq!(
                    self.vgpu.stats().objects,
                    before.0,
                    "a checkpoint restored to other objects"
                );
            }
            Ok(_) => note(RESTORED),
            Err(e) => {
                note(REFUSED);
                assert_ne!(
                    mutation,
                    Mutation::None,
                    "an unchanged checkpoint was refused: {e}"
                );
                assert_eq!(after(), before, "a refused restore changed the vGPU ({e})");
            }
        }
        self.check_quota();
        self.check_usable();
        Ok(())
    }
}

/// What the out-data region holds before each chain. Made once, not per
/// chain.
fn out_data() -> &'static [u8] {
    static OUT: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    OUT.get_or_init(|| (0..REGION).map(|i| (i * 7 + 3) as u8).collect())
}

/// The whole target.
pub fn backend_chains(data: &[u8]) {
    let Some((executor, _, _)) = dispatch::executor() else {
        return;
    };
    let mut u = Unstructured::new(data);
    let Ok(limits) = limits(&mut u) else {
        return;
    };
    // The restore's part of the input comes first, so that it does not
    // depend on how much the batches leave.
    let Ok(plan) = u.bytes(u.len().min(64)) else {
        return;
    };
    let mem = Arc::new(
        GuestRam::from_ranges(&[(GuestAddress(0), RAM as usize)]).expect("anonymous guest memory"),
    );
    let mock = MockSplitQueue::create(&*mem, GuestAddress(0), QUEUE_SIZE);
    let queue: Queue = mock.create_queue().expect("a valid queue");
    let mut run = Run {
        mem: mem.clone(),
        queue,
        mock,
        next_desc: 0,
        vgpu: Vgpu::with_limits(vec![executor as Arc<dyn Executor>], limits),
        limits,
        seq: 0,
        out_stale: true,
    };
    let opened = run.plain(
        SESSION,
        &[OpenSession {
            min_version: 1,
            max_version: 1,
            flags: 0,
        }
        .into()],
    );
    assert!(
        opened.is_some_and(|r| r.status.is_success() || limits.batch_messages != 0),
        "the session did not open"
    );
    let model = Model::default();
    let (tx, rx) = mpsc::channel();
    for _ in 0..6 {
        if u.is_empty() {
            break;
        }
        // A few chains in flight at once, against the in-flight limit.
        let mut sent = Vec::new();
        for slot in 0..u.int_in_range(1u64..=3).unwrap_or(1) {
            let Ok(requests) = requests(&mut u, &model) else {
                break;
            };
            let cuda = requests
                .iter()
                .map(|r| CUDA_OPCODES.contains(&r.opcode()))
                .collect();
            let reply_len = u
                .choose(&[REPLY_SLOT as u32, 4096, REPLY_HEADER_LEN as u32, 40])
                .copied()
                .unwrap_or(REPLY_SLOT as u32);
            if dispatch::trace() {
                eprintln!("batch of {} ({:?}):", requests.len(), limits);
                requests.iter().for_each(|r| eprintln!("  {r:?}"));
            }
            let mut bytes = run.encode(SESSION, &requests, reply_len);
            if bytes.len() as u64 > REGION {
                continue;
            }
            let damaged = !u.is_empty() && u.ratio(1u8, 16).unwrap_or(false);
            if damaged {
                // Header fields the chain must agree with (its reply may
                // then start anywhere in the writable descriptors).
                let at = u.int_in_range(0..=BATCH_HEADER_LEN - 1).unwrap_or(0);
                bytes[at] ^= 0xff;
            }
            let in_len = u.choose(&[REGION, 4096, 0, 1]).copied().unwrap_or(REGION);
            let Ok(layout) = layout::layout(
                &mut u,
                bytes.len() as u64,
                REGION,
                REPLY_AT + slot * REPLY_SLOT,
                u64::from(reply_len),
                in_len,
            ) else {
                break;
            };
            let mut layout = layout;
            if damaged {
                layout.reply.clear();
            }
            sent.extend(run.send(layout, &bytes, cuda, &tx));
        }
        run.collect(sent, &rx);
    }
    let _ = run.restore(plan);
    // The session's objects go when the vGPU does, as when a VM stops.
    drop(run);
}
