//! The benchmarks. Each is one module implementing [`Benchmark`]; adding a
//! figure means adding a module and one line to [`all`].

mod bandwidth;
mod checkpoint;
mod devices;
mod enqueue;
mod migration;
mod precopy;
mod queue_depth;
mod rehome;
mod roundtrip;
mod vm;
mod vm_datapath;
mod workloads;

use crate::context::Context;
use crate::error::Result;
use crate::record::Figure;

/// Where a benchmark's figures go in the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Section {
    /// Call round trip, enqueue rate, transfer bandwidth.
    Micro,
    /// The four workloads of the VOCL evaluation.
    Workloads,
    /// The backend's --queue-depth bound: throughput against drain time.
    QueueDepth,
    /// Workloads and the data path inside a real guest (only with --vm).
    Vm,
    /// Checkpoint/restore, re-homing and migration.
    State,
}

impl Section {
    pub const ALL: [Section; 5] = [
        Section::Micro,
        Section::Workloads,
        Section::QueueDepth,
        Section::Vm,
        Section::State,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Section::Micro => "Micro-benchmarks",
            Section::Workloads => "VOCL workloads",
            Section::QueueDepth => "Queue depth: run-time overhead against drain time",
            Section::Vm => "In a VM",
            Section::State => "Checkpoint, re-home and migration",
        }
    }
}

pub trait Benchmark {
    /// Short name, used by `--only` and in the logs.
    fn name(&self) -> &'static str;

    fn section(&self) -> Section;

    /// Why it cannot be measured on this machine (e.g. no patched QEMU),
    /// checked before it runs; the report says so in its place.
    fn unavailable(&self, _ctx: &Context) -> Option<String> {
        None
    }

    /// Whether it boots guests (runs only with --vm).
    fn needs_vm(&self) -> bool {
        false
    }

    /// Measures through vgpu, and natively where there is a native
    /// counterpart.
    fn run(&self, ctx: &Context) -> Result<Vec<Figure>>;
}

/// Every benchmark, in report order.
pub fn all() -> Vec<Box<dyn Benchmark>> {
    vec![
        Box::new(roundtrip::Roundtrip),
        Box::new(enqueue::EnqueueRate),
        Box::new(bandwidth::Bandwidth),
        Box::new(workloads::Workloads),
        Box::new(queue_depth::QueueDepth),
        Box::new(vm::VmWorkloads),
        Box::new(vm_datapath::VmDatapath),
        Box::new(checkpoint::Checkpoint),
        Box::new(rehome::Rehome),
        Box::new(migration::Migration),
        Box::new(precopy::PrecopyMigration::WRITE_HEAVY),
        Box::new(precopy::PrecopyMigration::READ_MOSTLY),
    ]
}
