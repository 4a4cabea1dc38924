//! The tables of checkpoint/restore, re-homing and live migration: figures
//! with no native counterpart, one row per state size (and move), one
//! column per figure, with the device and machine that made them.

use super::table::{num, summary, Table};
use crate::record::Record;
use crate::stats::Summary;

/// One table: which parameters name a row, which figures fill it.
struct Layout {
    title: &'static str,
    /// (parameter, header)
    keys: &'static [(&'static str, &'static str)],
    /// (benchmark, header); the first one's records make the rows.
    columns: &'static [(&'static str, &'static str)],
}

const CHECKPOINT: Layout = Layout {
    title: "Checkpoint to the local disk and restore at start-up (loopback checkpoint_loop)",
    keys: &[("state_mib", "state (MiB)")],
    columns: &[
        ("checkpoint_time", "checkpoint (s)"),
        ("checkpoint_size", "file (MiB)"),
        ("checkpoint_write_rate", "write rate (GB/s)"),
        (
            "checkpoint_memory_growth",
            "backend memory growth while saving (MiB)",
        ),
        ("restore_time", "restore at start-up (s)"),
        ("restore_read_rate", "read rate (GB/s)"),
    ],
};

const REHOME: Layout = Layout {
    title: "Re-home of a running vGPU to another device (loopback checkpoint_loop; ms)",
    keys: &[("move", "move"), ("state_mib", "state (MiB)")],
    columns: &[
        ("rehome_pause", "pause"),
        ("rehome_drain", "drain"),
        ("rehome_capture", "capture"),
        ("rehome_rebuild", "rebuild"),
        ("rehome_upload", "upload"),
    ],
};

const MIGRATION: Layout = Layout {
    title: "QEMU live migration of a guest computing on its vGPU",
    keys: &[("state_mib", "state (MiB)"), ("guest", "guest")],
    columns: &[
        ("migration_total_time", "total time (s)"),
        ("migration_downtime", "downtime (ms)"),
        ("migration_vgpu_state", "vGPU state in the stream (MiB)"),
    ],
};

const PRECOPY: Layout = Layout {
    title: "QEMU live migration with the buffers moved before the stop (checkpoint first, QEMU pre-copy) against stop-and-copy",
    keys: &[
        ("state_mib", "state (MiB)"),
        ("guest_writes", "guest writes"),
        ("mode", "mode"),
        ("guest", "guest"),
    ],
    columns: &[
        ("precopy_migration_total_time", "total time (s)"),
        ("precopy_migration_downtime", "downtime (ms)"),
        ("precopy_migration_vgpu_load", "vGPU load at the destination (ms)"),
        (
            "precopy_migration_vgpu_after_stop",
            "vGPU pre-copy after the stop (ms)",
        ),
        ("precopy_migration_vgpu_state", "vGPU state at the stop (MiB)"),
        ("precopy_migration_precopied", "pre-copied (MiB)"),
        ("precopy_migration_rounds", "copy rounds"),
        ("precopy_migration_downtime_limit", "downtime limit (ms)"),
    ],
};

const LAYOUTS: [&Layout; 4] = [&CHECKPOINT, &REHOME, &MIGRATION, &PRECOPY];

/// Whether one of these tables lays out `benchmark`.
pub fn lays_out(benchmark: &str) -> bool {
    LAYOUTS
        .iter()
        .any(|l| l.columns.iter().any(|c| c.0 == benchmark))
}

pub fn tables(records: &[Record]) -> Vec<Table> {
    LAYOUTS.iter().map(|l| table(l, records)).collect()
}

fn table(layout: &Layout, records: &[Record]) -> Table {
    let headers: Vec<&str> = layout
        .keys
        .iter()
        .map(|k| k.1)
        .chain(layout.columns.iter().map(|c| c.1))
        .chain(["runs", "device", "machine"])
        .collect();
    let mut t = Table::new(layout.title, &headers);
    let first = layout.columns[0].0;
    for row in records.iter().filter(|r| r.benchmark == first) {
        let mut cells: Vec<String> = layout
            .keys
            .iter()
            .map(|(key, _)| match row.parameters.get(*key) {
                Some(serde_json::Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => "–".into(),
            })
            .collect();
        for (benchmark, _) in layout.columns {
            let cell = records
                .iter()
                .find(|r| r.benchmark == *benchmark && r.parameters == row.parameters)
                .map_or("–".into(), |r| cell(&r.vgpu));
            cells.push(cell);
        }
        cells.push(row.vgpu.runs.to_string());
        cells.push(row.device.clone());
        cells.push(format!("{}, {} CPUs", row.machine.cpu, row.machine.cores));
        t.row(cells);
    }
    t
}

/// `median (min–max)`, or the one value where every run gave the same
/// (a state size).
fn cell(s: &Summary) -> String {
    if s.min == s.max {
        num(s.median)
    } else {
        summary(s)
    }
}
