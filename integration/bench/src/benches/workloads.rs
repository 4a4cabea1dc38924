//! The four workloads of the VOCL evaluation at several problem sizes:
//! total time of the OpenCL part (`TIME` line), native against vgpu.

use super::{Benchmark, Section};
use crate::context::{figure, Context};
use crate::error::Result;
use crate::record::{Figure, Params};

pub struct Workloads;

/// One workload run: program, its options, and their names in the record.
pub struct Case {
    pub program: &'static str,
    pub options: &'static [(&'static str, &'static str, usize)],
}

impl Case {
    pub fn args(&self) -> Vec<String> {
        self.options
            .iter()
            .flat_map(|(flag, _, value)| [flag.to_string(), value.to_string()])
            .collect()
    }

    pub fn params(&self) -> Params {
        let mut params = Params::new();
        params.insert("workload".into(), self.program.into());
        for (_, name, value) in self.options {
            params.insert(name.to_string(), (*value).into());
        }
        params
    }
}

macro_rules! case {
    ($program:literal $(, $flag:literal $name:literal $value:literal)*) => {
        Case { program: $program, options: &[$(($flag, $name, $value)),*] }
    };
}

/// Full run: natively each takes from about 10 ms to 2 s of OpenCL time on
/// the 2-core development machines, so fixed per-call costs show at the
/// small end and device time dominates at the large end.
const FULL: &[Case] = &[
    case!("matmul", "-n" "n" 256, "-i" "iterations" 2),
    case!("matmul", "-n" "n" 512, "-i" "iterations" 2),
    case!("matmul", "-n" "n" 1024, "-i" "iterations" 2),
    case!("nbody", "-n" "bodies" 2048, "-i" "steps" 2),
    case!("nbody", "-n" "bodies" 4096, "-i" "steps" 2),
    case!("nbody", "-n" "bodies" 8192, "-i" "steps" 2),
    case!("transpose", "-n" "n" 1024, "-i" "iterations" 5),
    case!("transpose", "-n" "n" 2048, "-i" "iterations" 5),
    case!("transpose", "-n" "n" 4096, "-i" "iterations" 5),
    case!("smith_waterman", "-n" "query" 512, "-m" "database" 1024, "-i" "sequences" 2),
    case!("smith_waterman", "-n" "query" 1024, "-m" "database" 2048, "-i" "sequences" 2),
    case!("smith_waterman", "-n" "query" 2048, "-m" "database" 4096, "-i" "sequences" 2),
];

const QUICK: &[Case] = &[
    case!("matmul", "-n" "n" 64, "-i" "iterations" 1),
    case!("nbody", "-n" "bodies" 256, "-i" "steps" 1),
    case!("transpose", "-n" "n" 128, "-i" "iterations" 1),
    case!("smith_waterman", "-n" "query" 64, "-m" "database" 128, "-i" "sequences" 1),
];

impl Benchmark for Workloads {
    fn name(&self) -> &'static str {
        "workloads"
    }

    fn section(&self) -> Section {
        Section::Workloads
    }

    fn run(&self, ctx: &Context) -> Result<Vec<Figure>> {
        let cases = if ctx.settings.quick { QUICK } else { FULL };
        cases
            .iter()
            .map(|case| {
                let program = ctx.workload_program(case.program);
                let (native, vgpu) = ctx.times(&program, &case.args(), ctx.socket())?;
                figure("workload_time", case.params(), "s", false, &native, &vgpu)
            })
            .collect()
    }
}
