//! Synchronous copies between the device and page-locked heap memory that
//! the backend answers before the DMA ends (`CuMemcpy*Signalled`): the
//! device writes a word of a page-locked page of this library's when the
//! copy is done, and the copy returns once the word says so, as a native
//! driver watches its own semaphore. The answer no longer waits for the
//! copy, so the copy's end reaches the program half a round trip sooner.
//! Where the backend cannot signal, its answer says the copy landed; where
//! a signal does not come within the look budget (a long wait behind
//! other work, or a backend that restarted), a stream synchronization
//! answers instead.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use vgpu_protocol::cuda::{to_cuda_result, CuSignalledCopyReply};
use vgpu_protocol::messages::CuStreamSynchronize;
use vgpu_protocol::pacing::LookPacer;
use vgpu_protocol::{Request, Status, Wire};

use crate::ffi::{result, CuResult};
use crate::runtime::Runtime;

/// Signal words in the page: one per copy waited for at once.
const WORDS: u32 = 1024;
/// How long a copy looks for its signal before it asks the backend.
const LOOK_BUDGET: Duration = Duration::from_millis(2);

/// The page of signal words and the backend's name for it.
pub struct Signals {
    words: &'static [AtomicU32],
    block: u64,
    /// The value the next copy waits for (never 0, the page's first state).
    next: AtomicU32,
    /// The backend does not know signalled copies (an older one).
    refused: AtomicBool,
}

/// One copy's signal: where the backend writes, and what.
#[derive(Debug, Clone, Copy)]
pub struct Signal {
    pub block: u64,
    pub offset: u64,
    pub value: u32,
}

impl Signals {
    /// Registers a page for signals; `None` without a heap or room in it.
    fn new(rt: &Runtime) -> Option<Signals> {
        let (start, len) = super::pinned::alloc(rt, WORDS as usize * 4)?;
        let block = *crate::runtime::lock(&rt.heap_blocks).get(&(start as usize))?;
        // SAFETY: the heap block is `len >= WORDS * 4` bytes of page-aligned
        // shared memory, registered for the session's life and used only
        // through atomics here (and by the device's writes).
        let words = unsafe {
            std::slice::from_raw_parts(start.cast::<AtomicU32>(), (len / 4).min(WORDS as usize))
        };
        words.iter().for_each(|w| w.store(0, Ordering::Relaxed));
        Some(Signals {
            words,
            block,
            next: AtomicU32::new(1),
            refused: AtomicBool::new(false),
        })
    }

    /// A signal no copy in flight uses.
    pub fn take(&self) -> Signal {
        let mut value = self.next.fetch_add(1, Ordering::Relaxed);
        if value == 0 {
            value = self.next.fetch_add(1, Ordering::Relaxed);
        }
        let slot = value % self.words.len() as u32;
        Signal {
            block: self.block,
            offset: u64::from(slot) * 4,
            value,
        }
    }

    /// Looks for `signal` until the budget is spent; whether it came.
    fn look(&self, signal: Signal) -> bool {
        let word = &self.words[(signal.offset / 4) as usize];
        let mut pacer = LookPacer::new(LOOK_BUDGET);
        loop {
            if word.load(Ordering::Acquire) == signal.value {
                return true;
            }
            if !pacer.pause() {
                return false;
            }
        }
    }
}

/// The process's signal page, made on first use; `None` where there is
/// none to be had.
pub fn signals(rt: &Runtime) -> Option<&Signals> {
    rt.signals
        .get_or_init(|| Signals::new(rt))
        .as_ref()
        .filter(|s| !s.refused.load(Ordering::Relaxed))
}

/// Waits until a signalled copy on `stream` of `ctx` landed, given the
/// backend's `reply` to it. `false`: the backend did not know the message,
/// so nothing was copied (an older backend answers an unknown opcode with
/// `INVALID_OPERATION`, which arrives as `CUDA_ERROR_NOT_SUPPORTED`, a
/// code the copy itself never returns); signals are not used again then.
pub fn finish(
    rt: &Runtime,
    signals: &Signals,
    signal: Signal,
    reply: CuResult<Vec<u8>>,
    ctx: u64,
    stream: u64,
) -> CuResult<bool> {
    let reply = match reply {
        Err(code) if code == to_cuda_result(Status::INVALID_OPERATION) => {
            log::info!("the backend does not signal copies; they wait for its answer");
            signals.refused.store(true, Ordering::Relaxed);
            return Ok(false);
        }
        other => other?,
    };
    let reply = CuSignalledCopyReply::from_bytes(&reply).map_err(|_| result::ERROR_UNKNOWN)?;
    if reply.landed == 0 && !signals.look(signal) {
        rt.call(Request::CuStreamSynchronize(CuStreamSynchronize {
            ctx,
            stream,
        }))?;
    }
    Ok(true)
}
