//! Restoring ahead: a destination builds the objects of a whole checkpoint
//! and fills them while the source VM still runs (pre-copy), aside from
//! any guest; the restore at the stop then adopts the objects that are
//! the same in the incoming state instead of creating and filling them
//! again. What an executor keeps ahead is its own (`objects`): the vGPU
//! layer only hands it back to the executor that made it.

use std::any::Any;
use std::collections::{HashMap, HashSet};

use super::{BufferSink, RestoredSession};

/// An executor's part of a session built ahead from a whole checkpoint.
/// Dropping it releases everything it holds.
pub struct PreparedSession {
    /// Where the checkpoint's contents go, by the executor's object id.
    pub sinks: HashMap<u64, Box<dyn BufferSink>>,
    /// The executor's own record of what it built, by the ids of the
    /// checkpoint it was built from.
    pub objects: Box<dyn Any + Send>,
}

/// A part restored at the stop, with the objects it took from a prepared
/// part.
pub struct AdoptedSession {
    /// Every object has a sink, adopted ones too: contents the incoming
    /// stream carries for them (written since their copy) overwrite them.
    pub restored: RestoredSession,
    /// Ids of objects that hold, from the prepared part, the contents of
    /// the object with the same id in the checkpoint it was built from.
    pub adopted: HashSet<u64>,
}
