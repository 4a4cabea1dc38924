//! The vhost-user glue: features, memory table, and the submit queue's kick
//! handler. Device work happens on the vring thread or session threads (`crate::vgpu`); vring locks
//! are only taken to pop a chain or to return one.

use std::io;
use std::sync::{Arc, RwLock};

use vgpu_protocol::{EVENT_QUEUE, NUM_QUEUES, SUBMIT_QUEUE, SUBMIT_QUEUE_SIZE};
use vhost::vhost_user::message::{
    VhostTransferStateDirection, VhostTransferStatePhase, VhostUserProtocolFeatures,
};
use vhost_user_backend::{VhostUserBackend, VringRwLock, VringT};
use virtio_bindings::virtio_config::VIRTIO_F_VERSION_1;
use virtio_bindings::virtio_ring::{VIRTIO_RING_F_EVENT_IDX, VIRTIO_RING_F_INDIRECT_DESC};
use virtio_queue::QueueT;
use vm_memory::{GuestAddressSpace, GuestMemoryAtomic};
use vmm_sys_util::epoll::EventSet;
use vmm_sys_util::event::{
    new_event_consumer_and_notifier, EventConsumer, EventFlag, EventNotifier,
};

use crate::chain::{resolve, ChainStart, GuestRam};
use crate::vgpu::Vgpu;
use crate::vhost::avail_index::AvailIndex;

/// `VHOST_USER_F_PROTOCOL_FEATURES`: vring enable/disable messages are in use.
const VHOST_USER_F_PROTOCOL_FEATURES: u32 = 30;
/// `VHOST_F_LOG_ALL`: the back-end logs its writes to guest memory, which
/// QEMU requires before it migrates a vhost device.
const VHOST_F_LOG_ALL: u32 = 26;
/// Longest wait for accepted chains when a vring stops.
const STOP_DRAIN_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// The device of one front-end connection (one VM, or one loopback process).
#[derive(Clone)]
pub struct VgpuDevice {
    inner: Arc<Inner>,
}

struct Inner {
    vgpu: Arc<Vgpu>,
    mem: RwLock<Option<GuestMemoryAtomic<GuestRam>>>,
    event_idx: std::sync::atomic::AtomicBool,
    exit_consumer: EventConsumer,
    exit_notifier: EventNotifier,
    /// The device-state transfer of a migration in progress.
    transfer: crate::vhost::device_state::Transfer,
    /// How long the vring thread keeps looking for the next request after
    /// the last one before it sleeps on the kick (`--poll-us`).
    poll: std::time::Duration,
}

impl VgpuDevice {
    pub fn new(vgpu: Arc<Vgpu>, poll: std::time::Duration) -> io::Result<VgpuDevice> {
        let (exit_consumer, exit_notifier) = new_event_consumer_and_notifier(EventFlag::NONBLOCK)?;
        Ok(VgpuDevice {
            inner: Arc::new(Inner {
                vgpu,
                mem: RwLock::new(None),
                event_idx: false.into(),
                exit_consumer,
                exit_notifier,
                transfer: Default::default(),
                poll,
            }),
        })
    }

    pub fn vgpu(&self) -> &Arc<Vgpu> {
        &self.inner.vgpu
    }

    /// Stops the vring worker threads.
    pub fn signal_exit(&self) {
        if let Err(e) = self.inner.exit_notifier.notify() {
            log::warn!("cannot signal the vring worker to exit: {e}");
        }
    }

    /// Pops every available chain and hands each to its session.
    fn process_submit_queue(
        &self,
        vring: &VringRwLock<GuestMemoryAtomic<GuestRam>>,
    ) -> io::Result<()> {
        let Some(atomic) = self
            .inner
            .mem
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        else {
            return Ok(());
        };
        let mem: Arc<GuestRam> = atomic.memory().into_inner();
        let mut avail = AvailIndex::new(&mem);
        let mut notifications_on = true;
        loop {
            // No kicks while this thread takes requests anyway; they stay
            // off while it polls, so only a pass after `enable_notification`
            // turns them off again (a write lock per chain saved).
            if notifications_on {
                vring.disable_notification().map_err(io::Error::other)?;
                notifications_on = false;
            }
            if !self.avail_index_sane(vring, &mut avail) {
                // A driver that moved the available index further than the
                // ring holds has broken the queue: nothing is taken from it
                // until it is reset, and the worker does not spin on it.
                return Ok(());
            }
            loop {
                // Counted before the pop: a stop in between must wait for
                // this chain's answer (`vgpu/in_flight.rs`).
                let ticket = self.inner.vgpu.chain_ticket();
                // The write lock is held only to pop one chain; its table
                // is read under the same hold.
                let start = {
                    let mut state = vring.get_mut();
                    let queue = state.get_queue_mut();
                    queue
                        .pop_descriptor_chain(&*mem)
                        .map(|chain| ChainStart::of(queue, chain.head_index()))
                };
                let Some(start) = start else { break };
                let head = start.head;
                let started = crate::vgpu::profile::start();
                match resolve(start, mem.clone()) {
                    Ok(resolved) => {
                        let resolved_at = started.map(|t| (t, t.elapsed()));
                        let (vring, atomic) = (vring.clone(), atomic.clone());
                        self.inner.vgpu.accept(
                            resolved,
                            Box::new(move |head, used| {
                                return_chain(&vring, &atomic.memory(), head, used)
                            }),
                            ticket,
                        );
                        if let Some((t, resolving)) = resolved_at {
                            crate::vgpu::profile::TRANSPORT
                                .note_chain(resolving, t.elapsed() - resolving);
                        }
                    }
                    Err(e) => {
                        crate::guest_warn!(
                            self.inner.vgpu.warnings,
                            "dropping descriptor chain {head}: {e}"
                        );
                        return_chain(vring, &mem, head, 0);
                        drop(ticket);
                    }
                }
            }
            if self.poll_for_more(vring, &mut avail) {
                crate::vgpu::profile::TRANSPORT.note_found_by_polling();
                continue;
            }
            // Re-enabled, then looked at again: a request published in
            // between would otherwise wait for a kick that never comes.
            notifications_on = true;
            if !vring.enable_notification().map_err(io::Error::other)? {
                crate::vgpu::profile::TRANSPORT.note_sleep();
                break;
            }
        }
        Ok(())
    }
}

impl VgpuDevice {
    /// Adaptive polling: looks for a new request for up to the poll budget
    /// after the last one, while the guest keeps its kicks to itself (a
    /// kick and the wake-up it causes cost more than a short look). Only
    /// while no session thread has work, so that on a small host the
    /// looking never takes a core from a running call.
    fn poll_for_more(
        &self,
        vring: &VringRwLock<GuestMemoryAtomic<GuestRam>>,
        avail: &mut AvailIndex<'_>,
    ) -> bool {
        if self.inner.poll.is_zero() {
            return false;
        }
        let mut pacer = vgpu_protocol::pacing::LookPacer::new(self.inner.poll);
        // A guest waiting for a device signal sends its next request once
        // the signal lands: the budget counts from then.
        let mut awaited = crate::awaited_signal::AwaitedSignal::take();
        loop {
            if self.inner.vgpu.has_queued_jobs() {
                return false;
            }
            let state = vring.get_ref();
            let queue = state.get_queue();
            match avail.read(queue) {
                Ok(index) if index.0 != queue.next_avail() => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
            drop(state);
            if let Some(signal) = &awaited {
                if signal.pending() {
                    pacer.look_again();
                    continue;
                }
                awaited = None;
                pacer = vgpu_protocol::pacing::LookPacer::new(self.inner.poll);
            }
            // Paced to the host: where the guest's thread has to share this
            // core (a small host), it runs at once instead of after the
            // whole budget.
            if !pacer.pause() {
                return false;
            }
        }
    }

    /// Whether the driver's available index is at most a ring's worth ahead.
    fn avail_index_sane(
        &self,
        vring: &VringRwLock<GuestMemoryAtomic<GuestRam>>,
        avail: &mut AvailIndex<'_>,
    ) -> bool {
        let state = vring.get_ref();
        let queue = state.get_queue();
        let Ok(index) = avail.read(queue) else {
            crate::guest_warn!(
                self.inner.vgpu.warnings,
                "the submit ring's available index is unreadable"
            );
            return false;
        };
        let pending = index.0.wrapping_sub(queue.next_avail());
        if pending > queue.size() {
            crate::guest_warn!(
                self.inner.vgpu.warnings,
                "the driver published {pending} chains on a ring of {}: queue ignored until reset",
                queue.size()
            );
            return false;
        }
        true
    }
}

/// Puts a chain on the used ring (in `mem`, the vring's memory now) and
/// notifies the driver.
fn return_chain(
    vring: &VringRwLock<GuestMemoryAtomic<GuestRam>>,
    mem: &GuestRam,
    head: u16,
    used: u32,
) {
    // One hold of the write lock for both steps; with EVENT_IDX the driver
    // says when it wants an interrupt.
    let notify = {
        let mut state = vring.get_mut();
        match crate::vhost::used_ring::add_used(state.get_queue_mut(), mem, head, used) {
            Ok(notify) => notify,
            Err(e) => {
                // Only a head the driver forged, or a ring it moved out of
                // its memory, fails here.
                log::debug!("cannot return descriptor chain {head}: {e}");
                return;
            }
        }
    };
    if notify {
        if let Err(e) = vring.signal_used_queue() {
            log::warn!("cannot notify the driver: {e}");
        }
    }
}

impl VhostUserBackend for VgpuDevice {
    type Bitmap = vhost_user_backend::bitmap::BitmapMmapRegion;
    type Vring = VringRwLock<GuestMemoryAtomic<GuestRam>>;

    fn num_queues(&self) -> usize {
        NUM_QUEUES
    }

    fn max_queue_size(&self) -> usize {
        SUBMIT_QUEUE_SIZE as usize
    }

    fn features(&self) -> u64 {
        (1 << VIRTIO_F_VERSION_1)
            | (1 << VIRTIO_RING_F_INDIRECT_DESC)
            | (1 << VIRTIO_RING_F_EVENT_IDX)
            | (1 << VHOST_USER_F_PROTOCOL_FEATURES)
            | (1 << VHOST_F_LOG_ALL)
    }

    fn protocol_features(&self) -> VhostUserProtocolFeatures {
        VhostUserProtocolFeatures::MQ
            | VhostUserProtocolFeatures::REPLY_ACK
            | VhostUserProtocolFeatures::LOG_SHMFD
            | VhostUserProtocolFeatures::DEVICE_STATE
    }

    fn set_event_idx(&self, enabled: bool) {
        self.inner
            .event_idx
            .store(enabled, std::sync::atomic::Ordering::Relaxed);
    }

    fn update_memory(&self, mem: GuestMemoryAtomic<GuestRam>) -> io::Result<()> {
        let mapped: Arc<GuestRam> = mem.memory().into_inner();
        *self.inner.mem.write().unwrap_or_else(|e| e.into_inner()) = Some(mem);
        self.inner.vgpu.map_guest_memory(&mapped);
        Ok(())
    }

    fn exit_event(&self, _thread_index: usize) -> Option<(EventConsumer, EventNotifier)> {
        Some((
            self.inner.exit_consumer.try_clone().ok()?,
            self.inner.exit_notifier.try_clone().ok()?,
        ))
    }

    fn stop_vring(&self, queue_index: u32) -> io::Result<()> {
        if queue_index == u32::from(SUBMIT_QUEUE) && !self.inner.vgpu.wait_idle(STOP_DRAIN_LIMIT) {
            log::error!(
                "chains still in flight after {STOP_DRAIN_LIMIT:?}; the vring stops anyway"
            );
        }
        Ok(())
    }

    fn set_device_state_fd(
        &self,
        direction: VhostTransferStateDirection,
        _phase: VhostTransferStatePhase,
        file: std::fs::File,
    ) -> io::Result<Option<std::fs::File>> {
        crate::vhost::device_state::start_transfer(
            &self.inner.vgpu,
            &self.inner.transfer,
            direction,
            file,
        )?;
        Ok(None)
    }

    fn check_device_state(&self) -> io::Result<()> {
        crate::vhost::device_state::finish_transfer(&self.inner.transfer)
    }

    fn handle_event(
        &self,
        device_event: u16,
        evset: EventSet,
        vrings: &[Self::Vring],
        _thread_id: usize,
    ) -> io::Result<()> {
        if evset != EventSet::IN {
            return Err(io::Error::other(format!("unexpected event set {evset:?}")));
        }
        match device_event {
            SUBMIT_QUEUE => self.process_submit_queue(&vrings[SUBMIT_QUEUE as usize]),
            // Event-queue buffers stay posted until there is something to say.
            EVENT_QUEUE => Ok(()),
            other => Err(io::Error::other(format!("unknown device event {other}"))),
        }
    }
}
