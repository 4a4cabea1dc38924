//! Tables on stdout, BENCHMARKS.md and the plots.

pub mod included;
pub mod markdown;
pub mod plot;
pub mod state_tables;
pub mod table;
pub mod tables;
pub mod targets;
