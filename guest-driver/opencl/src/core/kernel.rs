//! Kernels: the local knowledge that lets `clSetKernelArg` and
//! `clEnqueueNDRangeKernel` check their arguments without a round trip.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use opencl_sys::{
    cl_kernel_work_group_info, CL_INVALID_KERNEL, CL_KERNEL_ARG_ADDRESS_CONSTANT,
    CL_KERNEL_ARG_ADDRESS_GLOBAL, CL_KERNEL_ARG_ADDRESS_QUALIFIER, CL_KERNEL_NUM_ARGS,
};
use vgpu_protocol::{ArgKind, InfoTarget, ObjectKind};

use crate::core::info;
use crate::core::object::{kind, Cl, ClResult};
use crate::core::program::Program;

pub struct Kernel {
    pub program: Arc<Cl<Program>>,
    pub name: String,
    num_args: OnceLock<u32>,
    args: Mutex<Args>,
    work_group_info: Mutex<HashMap<cl_kernel_work_group_info, Vec<u8>>>,
    /// `CL_KERNEL_ARG_ADDRESS_QUALIFIER` per argument, asked when needed
    /// (`None`: the backend has no argument info).
    qualifiers: Mutex<HashMap<u32, Option<u32>>>,
}

#[derive(Default, Clone)]
struct Args {
    /// Indices given a value so far.
    set: HashSet<u32>,
    /// (index, kind, size) combinations the backend has accepted once:
    /// later ones are sent without waiting, since their only remaining
    /// failure causes were checked here.
    accepted: HashSet<(u32, u32, u64)>,
}

kind!(Kernel, CL_INVALID_KERNEL, Some(ObjectKind::Kernel));

impl Kernel {
    pub fn new(program: Arc<Cl<Program>>, name: String) -> Kernel {
        program.kernels.fetch_add(1, Ordering::Relaxed);
        Kernel {
            program,
            name,
            num_args: OnceLock::new(),
            args: Mutex::new(Args::default()),
            work_group_info: Mutex::new(HashMap::new()),
            qualifiers: Mutex::new(HashMap::new()),
        }
    }

    /// A kernel created by `clCloneKernel`: same arguments as `source`.
    pub fn cloned_from(source: &Kernel) -> Kernel {
        let kernel = Kernel::new(source.program.clone(), source.name.clone());
        *kernel.args() = source.args().clone();
        if let Some(n) = source.num_args.get() {
            let _ = kernel.num_args.set(*n);
        }
        kernel
    }

    fn args(&self) -> MutexGuard<'_, Args> {
        // Plain sets, updated by single inserts.
        self.args.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether this argument shape was accepted by the backend before.
    pub fn accepted_before(&self, index: u32, kind: ArgKind, size: u64) -> bool {
        self.args().accepted.contains(&(index, kind as u32, size))
    }

    pub fn record_arg(&self, index: u32, kind: ArgKind, size: u64) {
        let mut args = self.args();
        args.set.insert(index);
        args.accepted.insert((index, kind as u32, size));
    }

    /// Whether every argument has a value (else `CL_INVALID_KERNEL_ARGS`).
    pub fn all_args_set(&self, num_args: u32) -> bool {
        self.args().set.len() as u64 >= u64::from(num_args)
    }
}

impl Cl<Kernel> {
    /// `CL_KERNEL_NUM_ARGS`, asked once.
    pub fn num_args(&self) -> ClResult<u32> {
        if let Some(n) = self.num_args.get() {
            return Ok(*n);
        }
        let bytes = info::remote(InfoTarget::Kernel, self.handle(), 0, CL_KERNEL_NUM_ARGS)?;
        let n = info::le_number(&bytes) as u32;
        Ok(*self.num_args.get_or_init(|| n))
    }

    /// `clGetKernelWorkGroupInfo` for the one device, cached (the values do
    /// not change during a kernel's life).
    pub fn work_group_info(&self, param: cl_kernel_work_group_info) -> ClResult<Vec<u8>> {
        if let Some(v) = self.wg_cache().get(&param) {
            return Ok(v.clone());
        }
        let value = info::remote(InfoTarget::KernelWorkGroup, self.handle(), 0, param)?;
        self.wg_cache().insert(param, value.clone());
        Ok(value)
    }

    /// Whether argument `index` is a `__global` or `__constant` pointer;
    /// `None` when the backend cannot tell.
    pub fn arg_is_buffer(&self, index: u32) -> Option<bool> {
        let lock = || self.qualifiers.lock().unwrap_or_else(|e| e.into_inner());
        let cached = lock().get(&index).copied();
        let qualifier = match cached {
            Some(q) => q,
            None => {
                let q = info::remote(
                    InfoTarget::KernelArg,
                    self.handle(),
                    index,
                    CL_KERNEL_ARG_ADDRESS_QUALIFIER,
                )
                .ok()
                .map(|bytes| info::le_number(&bytes) as u32);
                lock().insert(index, q);
                q
            }
        };
        qualifier.map(|q| q == CL_KERNEL_ARG_ADDRESS_GLOBAL || q == CL_KERNEL_ARG_ADDRESS_CONSTANT)
    }

    fn wg_cache(&self) -> MutexGuard<'_, HashMap<cl_kernel_work_group_info, Vec<u8>>> {
        // Entries are inserted whole.
        self.work_group_info
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        self.program.kernels.fetch_sub(1, Ordering::Relaxed);
    }
}
