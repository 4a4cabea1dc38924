//! vgpu-bench: OpenCL figures natively and through vgpu, side by side, in
//! one run. See BENCHMARKS.md at the workspace root for what it measures.

pub mod backend;
pub mod benches;
pub mod context;
pub mod ctl;
pub mod error;
pub mod guest;
pub mod machine;
pub mod program_user;
pub mod record;
pub mod report;
pub mod run;
pub mod runner;
pub mod running;
pub mod stats;
