//! Restoring ahead on OpenCL (see `executor::ahead`): a prepared part
//! keeps the contexts and top-level buffers it built, by their ids in the
//! checkpoint; the restore at the stop takes a context that is the same
//! (same id, properties and devices) and, in it, every buffer that is the
//! same (same id, flags and size), contents and all. Everything else
//! (programs, kernels, queues, events, sub-buffers, images) is built
//! again: cheap, the programs coming from the driver's cache.
//!
//! Only contexts on the root device are adopted: a context on sub-devices
//! would need the prepared part's sub-devices, which the restored session
//! partitions anew.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use vgpu_migration as m;

use super::objects::{ContextEntry, HostMem};
use crate::executor::{AdoptedSession, Executor, PreparedSession, SnapshotError};

/// What a restore built, by the ids of the state it restored.
#[derive(Default)]
pub(super) struct Built {
    pub contexts: HashMap<u64, Arc<ContextEntry>>,
    pub mems: HashMap<u64, Arc<HostMem>>,
}

/// A prepared part's objects, for the restore at the stop to take.
#[derive(Default)]
pub(super) struct Ahead {
    built: Built,
    /// Ids of the buffers taken.
    adopted: HashSet<u64>,
}

impl Ahead {
    /// The contexts and top-level buffers of a part restored ahead.
    fn keep(built: Built) -> Ahead {
        let mems = built
            .mems
            .into_iter()
            .filter(|(_, mem)| mem.parent.is_none() && mem.image.is_none())
            .collect();
        Ahead {
            built: Built {
                contexts: built.contexts,
                mems,
            },
            adopted: HashSet::new(),
        }
    }

    /// The prepared context `id`, if it was made with these properties on
    /// the root device only, as `devices` (the incoming state's) says.
    pub(super) fn context(
        &mut self,
        id: u64,
        properties: &[u64],
        devices: &[u64],
    ) -> Option<Arc<ContextEntry>> {
        let context = self.built.contexts.get(&id)?;
        let on_root = devices.iter().all(|d| *d == m::ROOT_DEVICE)
            && context.devices.iter().all(|d| d.sub.is_none());
        (on_root && context.properties == properties).then(|| context.clone())
    }

    /// The prepared buffer `b.id`, if it is a top-level buffer like `b`
    /// in `context` (a context taken from this part).
    pub(super) fn buffer(
        &mut self,
        b: &m::BufferState,
        context: &Arc<ContextEntry>,
    ) -> Option<Arc<HostMem>> {
        if b.parent.is_some() {
            return None;
        }
        let mem = self.built.mems.get(&b.id)?;
        let same = mem.size == b.size
            && mem.flags == b.flags
            && Arc::ptr_eq(&mem.context, context)
            && !self.adopted.contains(&b.id);
        if !same {
            return None;
        }
        self.adopted.insert(b.id);
        Some(mem.clone())
    }
}

impl super::OpenClExecutor {
    pub(super) fn prepare(
        &self,
        state: &m::OpenClStateV1,
    ) -> Result<PreparedSession, SnapshotError> {
        let (restored, built) =
            self.new_session()
                .restore_objects(state, &self.identity(), None)?;
        // The session itself goes: what it built that is not kept here is
        // in the driver's caches (programs) or cheap to build again.
        Ok(PreparedSession {
            sinks: restored.sinks,
            objects: Box::new(Ahead::keep(built)),
        })
    }

    pub(super) fn adopt(
        &self,
        state: &m::OpenClStateV1,
        ahead: PreparedSession,
    ) -> Result<AdoptedSession, SnapshotError> {
        let mut ahead = match ahead.objects.downcast::<Ahead>() {
            Ok(ahead) => *ahead,
            // Not prepared here: nothing to take.
            Err(_) => Ahead::default(),
        };
        let (restored, _) =
            self.new_session()
                .restore_objects(state, &self.identity(), Some(&mut ahead))?;
        Ok(AdoptedSession {
            restored,
            adopted: std::mem::take(&mut ahead.adopted),
        })
    }
}
