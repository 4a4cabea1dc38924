//! The report's tables, built from the records.

use super::state_tables;
use super::table::{bytes, maybe_ratio, maybe_summary, num, percent, summary, Table};
use crate::benches::Section;
use crate::record::{describe, param_f64, Record};

/// The tables of one section (none if it has no records).
pub fn section_tables(section: Section, records: &[Record]) -> Vec<Table> {
    let of =
        |name: &str| -> Vec<&Record> { records.iter().filter(|r| r.benchmark == name).collect() };
    let mut tables = match section {
        Section::Micro => vec![
            roundtrip(
                &[
                    of("roundtrip_program_info"),
                    of("roundtrip_program_info_idle"),
                    of("roundtrip_finish"),
                    of("roundtrip_device_info"),
                ]
                .concat(),
            ),
            generic(
                "Enqueue rate",
                &[of("enqueue_rate"), of("enqueue_issue_rate")].concat(),
            ),
            bandwidth(&of("bandwidth_write"), &of("bandwidth_read")),
        ],
        Section::Workloads => vec![workloads(
            "VOCL workloads: total time of the OpenCL part (s)",
            &of("workload_time"),
        )],
        Section::QueueDepth => vec![queue_depth(records)],
        Section::Vm => vec![
            workloads(
                "VOCL workloads in the guest (vgpu column) against native on the host (s)",
                &of("vm_workload_time"),
            ),
            generic(
                "Data path in the guest (vgpu column) against native on the host",
                &[
                    of("vm_roundtrip"),
                    of("vm_enqueue_rate"),
                    of("vm_bandwidth_write"),
                    of("vm_bandwidth_read"),
                    of("vm_idle_backend_cpu"),
                ]
                .concat(),
            ),
        ],
        Section::State => state_tables::tables(records),
    };
    // Figures no table above lays out (added later) go under State until
    // they are given a place in KNOWN.
    if section == Section::State {
        let others: Vec<&Record> = records
            .iter()
            .filter(|r| section_of(&r.benchmark).is_none())
            .collect();
        tables.push(generic("Figures", &others));
    }
    tables.retain(|t| !t.rows.is_empty());
    tables
}

/// Benchmarks the tables above lay out, and their section.
const KNOWN: &[(&str, Section)] = &[
    ("roundtrip_device_info", Section::Micro),
    ("roundtrip_finish", Section::Micro),
    ("roundtrip_program_info", Section::Micro),
    ("roundtrip_program_info_idle", Section::Micro),
    ("enqueue_rate", Section::Micro),
    ("enqueue_issue_rate", Section::Micro),
    ("bandwidth_write", Section::Micro),
    ("bandwidth_read", Section::Micro),
    ("workload_time", Section::Workloads),
    ("queue_depth_runtime", Section::QueueDepth),
    ("queue_depth_drain", Section::QueueDepth),
    ("queue_depth_burst", Section::QueueDepth),
    ("queue_depth_kernel", Section::QueueDepth),
    ("vm_workload_time", Section::Vm),
    ("vm_roundtrip", Section::Vm),
    ("vm_enqueue_rate", Section::Vm),
    ("vm_bandwidth_write", Section::Vm),
    ("vm_bandwidth_read", Section::Vm),
    ("vm_idle_backend_cpu", Section::Vm),
];

fn section_of(benchmark: &str) -> Option<Section> {
    if state_tables::lays_out(benchmark) {
        return Some(Section::State);
    }
    KNOWN.iter().find(|k| k.0 == benchmark).map(|k| k.1)
}

fn generic(title: &str, records: &[&Record]) -> Table {
    let mut t = Table::new(
        title,
        &[
            "figure",
            "parameters",
            "unit",
            "native",
            "vgpu",
            "vgpu/native",
        ],
    );
    for r in records {
        t.row(vec![
            r.benchmark.clone(),
            describe(&r.parameters),
            r.unit.clone(),
            maybe_summary(r.native.as_ref()),
            summary(&r.vgpu),
            maybe_ratio(r.ratio),
        ]);
    }
    t
}

fn roundtrip(records: &[&Record]) -> Table {
    let mut t = Table::new(
        "Synchronous call round trip (µs per call)",
        &["call", "native", "vgpu", "added", "vgpu/native"],
    );
    for r in records {
        let call = r
            .parameters
            .get("call")
            .and_then(|v| v.as_str())
            .unwrap_or("?");
        t.row(vec![
            call.to_string(),
            maybe_summary(r.native.as_ref()),
            summary(&r.vgpu),
            r.native.map_or("–".into(), |native| {
                format!("{} µs", num(r.vgpu.median - native.median))
            }),
            maybe_ratio(r.ratio),
        ]);
    }
    t
}

fn bandwidth(write: &[&Record], read: &[&Record]) -> Table {
    let mut t = Table::new(
        "Blocking transfer bandwidth (GB/s)",
        &[
            "size",
            "write native",
            "write vgpu",
            "write ratio",
            "read native",
            "read vgpu",
            "read ratio",
        ],
    );
    for w in write {
        let size = param_f64(&w.parameters, "bytes");
        let r = read
            .iter()
            .find(|r| param_f64(&r.parameters, "bytes") == size);
        let mut row = vec![
            size.map_or("?".into(), bytes),
            maybe_summary(w.native.as_ref()),
            summary(&w.vgpu),
            maybe_ratio(w.ratio),
        ];
        match r {
            Some(r) => row.extend([
                maybe_summary(r.native.as_ref()),
                summary(&r.vgpu),
                maybe_ratio(r.ratio),
            ]),
            None => row.extend(["–".to_string(), "–".to_string(), "–".to_string()]),
        }
        t.row(row);
    }
    t
}

fn workloads(title: &str, records: &[&Record]) -> Table {
    let mut t = Table::new(
        title,
        &[
            "workload",
            "size",
            "native",
            "vgpu",
            "vgpu/native",
            "overhead",
            "min–max overlap",
        ],
    );
    for r in records {
        let mut params = r.parameters.clone();
        let name = params
            .remove("workload")
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        t.row(vec![
            name,
            describe(&params),
            maybe_summary(r.native.as_ref()),
            summary(&r.vgpu),
            maybe_ratio(r.ratio),
            r.native
                .map_or("–".into(), |native| percent(r.vgpu.median, native.median)),
            overlap(r),
        ]);
    }
    t
}

/// Whether the two sides' ranges overlap: then the difference of the
/// medians is within the run-to-run spread.
fn overlap(r: &Record) -> String {
    if r.ranges_overlap() {
        "yes (within spread)"
    } else {
        "no"
    }
    .into()
}

fn depth_label(depth: Option<f64>) -> String {
    match depth {
        Some(0.0) => "unbounded".into(),
        Some(d) => format!("{d:.0}"),
        None => "?".into(),
    }
}

fn queue_depth(records: &[Record]) -> Table {
    let of = |name: &str, depth: Option<f64>| {
        records
            .iter()
            .find(|r| r.benchmark == name && param_f64(&r.parameters, "depth") == depth)
    };
    let unbounded = of("queue_depth_runtime", Some(0.0));
    let workload = unbounded.map_or(String::new(), |r| {
        let mut p = r.parameters.clone();
        p.remove("depth");
        describe(&p)
    });
    let mut t = Table::new(
        format!("Queue depth ({workload}; drain after a burst of equal kernels)"),
        &[
            "--queue-depth",
            "workload time (s)",
            "overhead vs unbounded",
            "drain (ms)",
            "one kernel (ms)",
            "burst total (ms)",
        ],
    );
    if let (Some(rt), Some(drain), Some(kernel), Some(burst)) = (
        unbounded,
        of("queue_depth_drain", Some(0.0)),
        of("queue_depth_kernel", Some(0.0)),
        of("queue_depth_burst", Some(0.0)),
    ) {
        t.row(vec![
            "native (no bound)".into(),
            maybe_summary(rt.native.as_ref()),
            "(reference)".into(),
            maybe_summary(drain.native.as_ref()),
            maybe_summary(kernel.native.as_ref()),
            maybe_summary(burst.native.as_ref()),
        ]);
    }
    for r in records
        .iter()
        .filter(|r| r.benchmark == "queue_depth_runtime")
    {
        let depth = param_f64(&r.parameters, "depth");
        let cell = |name: &str| of(name, depth).map_or("–".into(), |x| summary(&x.vgpu));
        t.row(vec![
            depth_label(depth),
            summary(&r.vgpu),
            unbounded.map_or("–".into(), |u| percent(r.vgpu.median, u.vgpu.median)),
            cell("queue_depth_drain"),
            cell("queue_depth_kernel"),
            cell("queue_depth_burst"),
        ]);
    }
    t
}
