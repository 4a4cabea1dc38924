//! Live migration with the vGPU's buffers moved before the stop, against
//! the plain stop-and-copy, in the same run: a guest whose program rewrites
//! 2 of its 8 buffers; either QMP `migrate` at once; or first a whole
//! checkpoint of the running vGPU named on both backends (`vgpu-ctl
//! migration-base`), so the device state sent at the stop carries only the
//! objects and the buffers written since; or QEMU's own pre-copy
//! (`precopy-socket=`), which carries that whole checkpoint in its
//! iterative sections while the VM runs. One run per size and mode: each
//! boots two guests. As `migration`, otherwise.

use super::devices::Pair;
use super::migration::{migrate, Sample, Variant};
use super::{Benchmark, Section};
use crate::context::{vgpu_figure, Context};
use crate::error::{Error, Result};
use crate::guest::Guest;
use crate::params;
use crate::record::Figure;

pub struct PrecopyMigration;

const SIZES_MIB: &[usize] = &[64, 256, 1024];
const QUICK_SIZES_MIB: &[usize] = &[16];
/// Buffers of 8 the guest rewrites.
const ACTIVE: usize = 2;
const MIB: f64 = 1024.0 * 1024.0;

impl Benchmark for PrecopyMigration {
    fn name(&self) -> &'static str {
        "precopy_migration"
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
            SIZES_MIB
        };
        let mut figures = Vec::new();
        for &size in sizes {
            for (mode, lean, qemu_precopy) in [
                ("stop-and-copy", false, false),
                ("checkpoint first", true, false),
                ("QEMU pre-copy", false, true),
            ] {
                let variant = Variant {
                    active: ACTIVE,
                    lean_on_checkpoint: lean,
                    qemu_precopy,
                };
                let sample: Sample = migrate(ctx, &guest, &pair, size, 0, variant)?;
                for (name, unit, value) in [
                    ("precopy_migration_total_time", "s", sample.total_s),
                    ("precopy_migration_downtime", "ms", sample.downtime_ms),
                    ("precopy_migration_vgpu_load", "ms", sample.load_ms),
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
                            ("guest_writes", format!("{ACTIVE} of 8 buffers")),
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
