//! Live migration with the vGPU's buffers moved before the stop, against
//! the plain stop-and-copy, in the same run, for two guests: one whose
//! program rewrites 2 of its 8 buffers all the time (`precopy_migration`),
//! and one that reads all 8 whole every iteration and writes only a small
//! result (`precopy_migration_read_mostly`, as inference does with its
//! weights). Either QMP `migrate` at once; or first a whole
//! checkpoint of the running vGPU named on both backends (`vgpu-ctl
//! migration-base`), so the device state sent at the stop carries only the
//! objects and the buffers written since; or QEMU's own pre-copy
//! (`precopy-socket=`), which carries that whole checkpoint in its
//! iterative sections while the VM runs. One run per size and mode: each
//! boots two guests. As `migration`, otherwise.

use super::devices::Pair;
use super::migration::{migrate, GuestWrites, Sample, Variant};
use super::{Benchmark, Section};
use crate::context::{vgpu_figure, Context};
use crate::error::{Error, Result};
use crate::guest::Guest;
use crate::params;
use crate::record::Figure;

/// One guest program, migrated at each size in each mode.
pub struct PrecopyMigration {
    name: &'static str,
    writes: GuestWrites,
    sizes_mib: &'static [usize],
    modes: &'static [Mode],
}

/// A mode's name, and whether it leans on a checkpoint taken first or
/// QEMU's pre-copy.
type Mode = (&'static str, bool, bool);
const STOP_AND_COPY: Mode = ("stop-and-copy", false, false);
const CHECKPOINT_FIRST: Mode = ("checkpoint first", true, false);
const QEMU_PRECOPY: Mode = ("QEMU pre-copy", false, true);

impl PrecopyMigration {
    /// The guest rewrites 2 of its 8 buffers.
    pub const WRITE_HEAVY: PrecopyMigration = PrecopyMigration {
        name: "precopy_migration",
        writes: GuestWrites::Buffers(2),
        sizes_mib: &[64, 256, 1024],
        modes: &[STOP_AND_COPY, CHECKPOINT_FIRST, QEMU_PRECOPY],
    };

    /// The guest reads all its buffers and writes a small result: the
    /// case issue #17's downtime target is about.
    pub const READ_MOSTLY: PrecopyMigration = PrecopyMigration {
        name: "precopy_migration_read_mostly",
        writes: GuestWrites::SmallResult,
        sizes_mib: &[256, 1024],
        modes: &[STOP_AND_COPY, QEMU_PRECOPY],
    };
}

const QUICK_SIZES_MIB: &[usize] = &[16];
const MIB: f64 = 1024.0 * 1024.0;

impl Benchmark for PrecopyMigration {
    fn name(&self) -> &'static str {
        self.name
    }

    fn section(&self) -> Section {
        Section::State
    }

    /// It boots guests: only with --vm, where the set-up also rebuilds
    /// the guest image (without it an image left by an older checkout
    /// ran programs older than this tree's).
    fn needs_vm(&self) -> bool {
        true
    }

    fn unavailable(&self, ctx: &Context) -> Option<String> {
        super::migration::Migration.unavailable(ctx)
    }

    fn run(&self, ctx: &Context) -> Result<Vec<Figure>> {
        let guest = Guest::find(&ctx.paths.root)?;
        let pair = Pair::find(&ctx.paths.backend).map_err(Error::Unavailable)?;
        let sizes = if ctx.settings.quick {
            QUICK_SIZES_MIB
        } else {
            self.sizes_mib
        };
        let mut figures = Vec::new();
        for &size in sizes {
            for &(mode, lean, qemu_precopy) in self.modes {
                let variant = Variant {
                    writes: self.writes,
                    lean_on_checkpoint: lean,
                    qemu_precopy,
                };
                let sample: Sample = migrate(ctx, &guest, &pair, size, 0, variant)?;
                for (name, unit, value) in [
                    ("precopy_migration_total_time", "s", sample.total_s),
                    ("precopy_migration_downtime", "ms", sample.downtime_ms),
                    ("precopy_migration_vgpu_load", "ms", sample.load_ms),
                    (
                        "precopy_migration_vgpu_after_stop",
                        "ms",
                        sample.after_stop_ms,
                    ),
                    (
                        "precopy_migration_vgpu_state",
                        "MiB",
                        sample.state_bytes / MIB,
                    ),
                    (
                        "precopy_migration_precopied",
                        "MiB",
                        sample.precopy_bytes / MIB,
                    ),
                    ("precopy_migration_rounds", "", sample.rounds),
                    (
                        "precopy_migration_downtime_limit",
                        "ms",
                        sample.downtime_limit_ms,
                    ),
                ] {
                    let mut f = vgpu_figure(
                        name,
                        params![
                            ("state_mib", size),
                            ("guest_writes", self.writes.describe()),
                            ("mode", mode),
                            ("guest", format!("QEMU {}", guest.accel))
                        ],
                        unit,
                        false,
                        &[value],
                    )?;
                    f.device = Some(pair.describe());
                    figures.push(f);
                }
            }
        }
        Ok(figures)
    }
}
