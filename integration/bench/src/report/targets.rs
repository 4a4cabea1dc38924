//! The targets set in the issues, checked against the records.

use super::table::{bytes, num, ratio};
use crate::record::{param_f64, Record};
use crate::stats::Summary;

/// One target and how this run did.
#[derive(Debug, Clone)]
pub struct Verdict {
    pub target: String,
    pub measured: String,
    /// `None`: not measured in this run.
    pub met: Option<bool>,
}

impl Verdict {
    pub fn label(&self) -> &'static str {
        match self.met {
            Some(true) => "met",
            Some(false) => "**missed**",
            None => "not measured",
        }
    }
}

/// The records of `name` that have a native counterpart: every target
/// compares vgpu with native.
fn find<'a>(records: &'a [Record], name: &str) -> Vec<(&'a Record, Summary, f64)> {
    records
        .iter()
        .filter(|r| r.benchmark == name)
        .filter_map(|r| Some((r, r.native?, r.ratio?)))
        .collect()
}

pub fn evaluate(records: &[Record]) -> Vec<Verdict> {
    let mut out = Vec::new();

    for (name, call, note) in [
        ("roundtrip_finish", "clFinish on an empty queue", ""),
        (
            "roundtrip_device_info",
            "clGetDeviceInfo",
            " (answered from the ICD's cache)",
        ),
    ] {
        let r = find(records, name);
        out.push(match r.first() {
            Some((r, native, _)) => {
                let added = r.vgpu.median - native.median;
                Verdict {
                    target: format!("Round trip added ≤ 5 µs (median), {call}"),
                    measured: format!("+{} µs{note}", num(added)),
                    met: Some(added <= 5.0),
                }
            }
            None => missing(format!("Round trip added ≤ 5 µs (median), {call}")),
        });
    }

    out.push(match find(records, "enqueue_rate").first() {
        Some(&(_, _, r)) => Verdict {
            target: "Enqueue rate ≥ 0.9× native (tiny kernels, until clFinish)".into(),
            measured: ratio(r),
            met: Some(r >= 0.9),
        },
        None => missing("Enqueue rate ≥ 0.9× native".into()),
    });

    let large: Vec<(&Record, f64)> = records
        .iter()
        .filter(|r| r.benchmark.starts_with("bandwidth_"))
        .filter(|r| param_f64(&r.parameters, "bytes").is_some_and(|b| b >= 1048576.0))
        .filter_map(|r| Some((r, r.ratio?)))
        .collect();
    out.push(match large.iter().min_by(|a, b| a.1.total_cmp(&b.1)) {
        Some(&(worst, worst_ratio)) => {
            let ok = large.iter().filter(|r| r.1 >= 0.95).count();
            let size = param_f64(&worst.parameters, "bytes").map_or("?".into(), bytes);
            let dir = worst.benchmark.trim_start_matches("bandwidth_");
            Verdict {
                target: "Bandwidth ≥ 0.95× native at ≥ 1 MiB (read and write)".into(),
                measured: format!(
                    "{ok} of {} sizes meet it; worst {} ({dir} {size})",
                    large.len(),
                    ratio(worst_ratio)
                ),
                met: Some(ok == large.len()),
            }
        }
        None => missing("Bandwidth ≥ 0.95× native at ≥ 1 MiB".into()),
    });

    for (workload, limit, kind) in [
        ("matmul", 1.01, "compute-bound"),
        ("nbody", 1.01, "compute-bound"),
        ("transpose", 1.01, "bandwidth-bound, held to the 1 % target"),
        ("smith_waterman", 1.05, "many short kernels"),
    ] {
        let target = format!(
            "{workload} within {:.0} % of native ({kind})",
            (limit - 1.0) * 100.0
        );
        let rs: Vec<(&Record, Summary, f64)> = find(records, "workload_time")
            .into_iter()
            .filter(|r| r.0.parameters.get("workload").and_then(|v| v.as_str()) == Some(workload))
            .collect();
        out.push(match rs.iter().max_by(|a, b| a.2.total_cmp(&b.2)) {
            Some(&(worst, _, worst_ratio)) => {
                let ok = rs.iter().filter(|r| r.2 <= limit).count();
                Verdict {
                    target,
                    measured: format!(
                        "{ok} of {} sizes; worst {}{}",
                        rs.len(),
                        ratio(worst_ratio),
                        if worst.ranges_overlap() {
                            " (min–max ranges overlap: within the spread)"
                        } else {
                            ""
                        }
                    ),
                    met: Some(ok == rs.len()),
                }
            }
            None => missing(target),
        });
    }
    out
}

fn missing(target: String) -> Verdict {
    Verdict {
        target,
        measured: "–".into(),
        met: None,
    }
}
