//! The JSON records: one per figure, native and vgpu side by side.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{io, Error, Result};
use crate::machine::Machine;
use crate::stats::Summary;

/// A parameter value: a number or a word.
pub type Params = BTreeMap<String, serde_json::Value>;

/// One figure measured through vgpu, and natively where a native run of the
/// same thing exists (checkpoint, re-home and migration have none).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    /// The figure, e.g. `bandwidth_read` (see BENCHMARKS.md for the list).
    pub benchmark: String,
    /// What distinguishes this figure from others of the same benchmark.
    pub parameters: Params,
    pub unit: String,
    /// Whether a larger value is better (rates) or worse (times).
    pub higher_is_better: bool,
    /// `null` in the JSON for figures without a native counterpart.
    pub native: Option<Summary>,
    pub vgpu: Summary,
    /// `vgpu.median / native.median`; `null` without a native figure.
    pub ratio: Option<f64>,
    pub machine: Machine,
    /// The device that ran the work (the vgpu device is "vgpu: " + this);
    /// for a move between devices, both (`from → to`).
    pub device: String,
}

impl Record {
    /// Whether native's and vgpu's min–max ranges overlap: then the
    /// difference of the medians is within the run-to-run spread.
    pub fn ranges_overlap(&self) -> bool {
        self.native
            .is_some_and(|native| native.min <= self.vgpu.max && self.vgpu.min <= native.max)
    }
}

/// What a benchmark module hands back, before machine and device are added.
#[derive(Debug, Clone)]
pub struct Figure {
    pub benchmark: &'static str,
    pub parameters: Params,
    pub unit: &'static str,
    pub higher_is_better: bool,
    pub native: Option<Summary>,
    pub vgpu: Summary,
    /// The device when it is not the run's (a move between two devices).
    pub device: Option<String>,
}

impl Figure {
    pub fn into_record(self, machine: &Machine, device: &str) -> Record {
        Record {
            benchmark: self.benchmark.to_string(),
            parameters: self.parameters,
            unit: self.unit.to_string(),
            higher_is_better: self.higher_is_better,
            ratio: self.native.map(|native| self.vgpu.median / native.median),
            native: self.native,
            vgpu: self.vgpu,
            machine: machine.clone(),
            device: self.device.unwrap_or_else(|| device.to_string()),
        }
    }
}

/// Builds a parameter map: `params![("n", 512), ("iters", 3)]`.
#[macro_export]
macro_rules! params {
    [$(($key:expr, $value:expr)),* $(,)?] => {{
        #[allow(unused_mut)]
        let mut map = $crate::record::Params::new();
        $(map.insert($key.to_string(), serde_json::json!($value));)*
        map
    }};
}

/// `key=value` pairs of the parameters, for tables.
pub fn describe(params: &Params) -> String {
    params
        .iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A parameter as a number, if it is one.
pub fn param_f64(params: &Params, key: &str) -> Option<f64> {
    params.get(key).and_then(serde_json::Value::as_f64)
}

pub fn write_json(records: &[Record], path: &Path) -> Result<()> {
    let text = serde_json::to_string_pretty(records).map_err(Error::Json)?;
    std::fs::write(path, text + "\n").map_err(io("write", path))
}

pub fn read_json(path: &Path) -> Result<Vec<Record>> {
    let text = std::fs::read_to_string(path).map_err(io("read", path))?;
    serde_json::from_str(&text).map_err(Error::Json)
}
