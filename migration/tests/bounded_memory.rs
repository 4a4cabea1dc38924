//! A 1 GiB vGPU streams through a socket with bounded memory: the writer
//! holds no copy of the contents and the reader one chunk at a time. A
//! counting allocator measures the peak of live heap bytes. (One test in
//! this binary, so nothing else allocates meanwhile.)

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{BufReader, BufWriter};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicUsize, Ordering};

use vgpu_migration::stream::MAX_BUFFER_CHUNK;
use vgpu_migration::*;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only counts on the side.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const CHUNKS: u64 = 256;
const TOTAL: u64 = CHUNKS * MAX_BUFFER_CHUNK as u64;

fn one_buffer_state() -> VgpuState {
    VgpuStateV1 {
        profile: Profile::default(),
        device: DeviceIdentity::default(),
        sessions: vec![SessionStateV1 {
            id: 1,
            protocol_version: 1,
            contexts: vec![ContextState {
                id: 1,
                guest: Some(GuestRef { handle: 1, refs: 1 }),
                properties: vec![],
            }],
            buffers: vec![BufferState {
                id: 5,
                guest: Some(GuestRef { handle: 5, refs: 1 }),
                context: 1,
                flags: 1,
                size: TOTAL,
                parent: None,
            }],
            ..SessionStateV1::default()
        }
        .into()],
    }
    .into()
}

#[test]
fn a_gibibyte_streams_in_bounded_memory() {
    let state = one_buffer_state();
    let (tx, rx) = UnixStream::pair().expect("socket pair");
    let baseline = LIVE.load(Ordering::Relaxed);
    PEAK.store(baseline, Ordering::Relaxed);

    let writer_state = state.clone();
    let writer = std::thread::spawn(move || {
        let mut w = StreamWriter::new(BufWriter::new(tx)).expect("header");
        w.write_state(&writer_state).expect("state");
        // The generator: one chunk of staging, refilled, as the backend
        // does while it reads buffers off the device.
        let mut staging = vec![0u8; MAX_BUFFER_CHUNK];
        for i in 0..CHUNKS {
            staging.fill(i as u8);
            let offset = i * MAX_BUFFER_CHUNK as u64;
            w.write_buffer_chunk(1, 5, offset, &staging).expect("chunk");
        }
        w.finish().expect("end").1
    });

    let mut r = StreamReader::new(BufReader::new(rx)).expect("header");
    let mut received = 0u64;
    let mut end = None;
    while let Some(item) = r.next_item().expect("a whole stream") {
        match item {
            Item::State(s) => assert_eq!(*s, state),
            Item::BufferChunk { offset, data, .. } => {
                let i = (offset / MAX_BUFFER_CHUNK as u64) as u8;
                assert!(data[0] == i && data[data.len() - 1] == i);
                received += data.len() as u64;
            }
            Item::End(summary) => end = Some(summary),
            Item::Base { .. } | Item::BaseRef { .. } => panic!("a whole stream has no base"),
        }
    }
    let written = writer.join().expect("writer thread");
    let peak = PEAK.load(Ordering::Relaxed) - baseline;

    assert_eq!(received, TOTAL);
    assert_eq!(end, Some(written));
    assert_eq!(written.buffer_bytes, TOTAL);
    // Generator staging + the reader's one chunk + small change: nowhere
    // near the 1 GiB that went through.
    let chunk = MAX_BUFFER_CHUNK;
    println!("peak heap while streaming 1 GiB: {peak} bytes");
    assert!(
        peak < 2 * chunk + (1 << 20),
        "peak {peak} bytes for {TOTAL} bytes streamed"
    );
}
