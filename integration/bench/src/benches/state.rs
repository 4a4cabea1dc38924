//! Hooks for the figures of features still to come: checkpoint/restore,
//! re-homing to another device, and live migration. Each is listed in the
//! report as pending; when the feature lands, replace its entry here with a
//! module of its own (see `roundtrip.rs` for the shape) whose figures use
//! the `State` section, e.g. `checkpoint_time` with `native` = the
//! workload's time without a checkpoint and `vgpu` = with one.

use super::{Benchmark, Section};
use crate::context::Context;
use crate::error::Result;
use crate::record::Figure;

pub struct Pending {
    name: &'static str,
    why: &'static str,
}

impl Pending {
    pub const CHECKPOINT: Pending = Pending {
        name: "checkpoint",
        why: "the feature does not exist yet; to come: checkpoint/restore through vgpu-ctl, time to save and to restore, stream size",
    };
    pub const REHOME: Pending = Pending {
        name: "rehome",
        why: "the feature does not exist yet; to come: re-homing a running vGPU to another device on the host (CPU ⇄ GPU), pause time",
    };
    pub const MIGRATION: Pending = Pending {
        name: "migration",
        why: "the feature does not exist yet; to come: QEMU live migration with the vGPU, downtime and total time",
    };
}

impl Benchmark for Pending {
    fn name(&self) -> &'static str {
        self.name
    }

    fn section(&self) -> Section {
        Section::State
    }

    fn pending(&self) -> Option<&'static str> {
        Some(self.why)
    }

    fn run(&self, _ctx: &Context) -> Result<Vec<Figure>> {
        Ok(Vec::new())
    }
}
