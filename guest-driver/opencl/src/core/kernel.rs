//! Kernels: the local knowledge that lets `clSetKernelArg` and
//! `clEnqueueNDRangeKernel` check their arguments without a round trip.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use opencl_sys::{
    cl_kernel_work_group_info, CL_INVALID_KERNEL, CL_KERNEL_ARG_ADDRESS_CONSTANT,
    CL_KERNEL_ARG_ADDRESS_GLOBAL, CL_KERNEL_ARG_ADDRESS_QUALIFIER,
    CL_KERNEL_COMPILE_WORK_GROUP_SIZE, CL_KERNEL_NUM_ARGS, CL_KERNEL_WORK_GROUP_SIZE,
};
use vgpu_protocol::{ArgKind, InfoTarget, ObjectKind};

use crate::core::info;
use crate::core::object::{kind, Cl, ClResult};
use crate::core::program::Program;

/// What is known about one kernel function of one program build, shared by
/// every kernel object created for it: each fact is asked of the backend
/// once.
#[derive(Default)]
pub struct Facts {
    num_args: OnceLock<u32>,
    work_group_info: Mutex<HashMap<cl_kernel_work_group_info, Vec<u8>>>,
    /// `CL_KERNEL_ARG_ADDRESS_QUALIFIER` per argument (`None`: the backend
    /// has no argument info).
    qualifiers: Mutex<HashMap<u32, Option<u32>>>,
    /// (kind, size) shapes the backend accepted once, per argument index:
    /// later ones are sent without waiting, since their only remaining
    /// failure causes are checked here. A short list per index rather than
    /// a hashed set: every `clSetKernelArg` looks here, and hashing the
    /// shape was half of the call's own time.
    accepted: Mutex<Vec<Vec<(u32, u64)>>>,
    /// `CL_KERNEL_WORK_GROUP_SIZE` and `CL_KERNEL_COMPILE_WORK_GROUP_SIZE`
    /// as numbers, which launches check: no lookup, no allocation.
    max_group: OnceLock<u64>,
    required_group: OnceLock<[u64; 3]>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Caches of whole entries: a panic cannot leave one half-written.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub struct Kernel {
    pub program: Arc<Cl<Program>>,
    pub name: String,
    facts: Arc<Facts>,
    /// Indices given a value so far.
    set: Mutex<ArgsGiven>,
}

/// Which argument indices have a value, and how many (indices are below
/// the kernel's argument count, checked before they get here), and the
/// last value sent for each.
#[derive(Default, Clone)]
struct ArgsGiven {
    given: Vec<bool>,
    count: u32,
    /// Per index, the argument the backend last got through
    /// `clSetKernelArg`: setting it again to the same is not sent.
    /// Handles are never reused in a process, so the same handle is the
    /// same object.
    sent: Vec<Option<SentArg>>,
}

/// An argument as `clSetKernelArg` sent it.
#[derive(Clone, PartialEq, Eq)]
struct SentArg {
    kind: u32,
    size: u64,
    handle: u64,
    value: Vec<u8>,
}

impl ArgsGiven {
    fn insert(&mut self, index: u32) {
        let i = index as usize;
        if self.given.len() <= i {
            self.given.resize(i + 1, false);
        }
        if !self.given[i] {
            self.given[i] = true;
            self.count += 1;
        }
        // Whatever set it, the index no longer holds what was sent before.
        if let Some(sent) = self.sent.get_mut(i) {
            *sent = None;
        }
    }

    fn remember(&mut self, index: u32, arg: SentArg) {
        let i = index as usize;
        if self.sent.len() <= i {
            self.sent.resize(i + 1, None);
        }
        self.sent[i] = Some(arg);
    }

    fn holds(&self, index: u32, kind: u32, size: u64, handle: u64, value: &[u8]) -> bool {
        self.sent.get(index as usize).is_some_and(|sent| {
            sent.as_ref().is_some_and(|s| {
                s.kind == kind && s.size == size && s.handle == handle && s.value == value
            })
        })
    }
}

kind!(Kernel, CL_INVALID_KERNEL, Some(ObjectKind::Kernel));

impl Kernel {
    pub fn new(program: Arc<Cl<Program>>, name: String) -> Kernel {
        program.kernels.fetch_add(1, Ordering::Relaxed);
        let facts = program.kernel_facts(&name);
        Kernel {
            program,
            name,
            facts,
            set: Mutex::new(ArgsGiven::default()),
        }
    }

    /// A kernel created by `clCloneKernel`: same arguments as `source`.
    pub fn cloned_from(source: &Kernel) -> Kernel {
        let kernel = Kernel::new(source.program.clone(), source.name.clone());
        *lock(&kernel.set) = lock(&source.set).clone();
        kernel
    }

    /// Whether this argument shape was accepted by the backend before.
    pub fn accepted_before(&self, index: u32, kind: ArgKind, size: u64) -> bool {
        lock(&self.facts.accepted)
            .get(index as usize)
            .is_some_and(|shapes| shapes.contains(&(kind as u32, size)))
    }

    /// Whether `clSetKernelArg` last sent exactly this argument for
    /// `index` (so sending it again would change nothing).
    pub fn holds_arg(
        &self,
        index: u32,
        kind: ArgKind,
        size: u64,
        handle: u64,
        value: &[u8],
    ) -> bool {
        lock(&self.set).holds(index, kind as u32, size, handle, value)
    }

    /// `clSetKernelArg` sent this argument for `index` (after
    /// [`Self::record_arg`]).
    pub fn remember_sent(&self, index: u32, kind: ArgKind, size: u64, handle: u64, value: Vec<u8>) {
        let arg = SentArg {
            kind: kind as u32,
            size,
            handle,
            value,
        };
        lock(&self.set).remember(index, arg);
    }

    pub fn record_arg(&self, index: u32, kind: ArgKind, size: u64) {
        lock(&self.set).insert(index);
        let mut accepted = lock(&self.facts.accepted);
        let i = index as usize;
        if accepted.len() <= i {
            accepted.resize_with(i + 1, Vec::new);
        }
        let shape = (kind as u32, size);
        if !accepted[i].contains(&shape) {
            accepted[i].push(shape);
        }
    }

    /// Whether every argument has a value (else `CL_INVALID_KERNEL_ARGS`).
    pub fn all_args_set(&self, num_args: u32) -> bool {
        lock(&self.set).count >= num_args
    }
}

impl Cl<Kernel> {
    /// `CL_KERNEL_NUM_ARGS`.
    pub fn num_args(&self) -> ClResult<u32> {
        if let Some(n) = self.facts.num_args.get() {
            return Ok(*n);
        }
        let bytes = info::remote(InfoTarget::Kernel, self.handle(), 0, CL_KERNEL_NUM_ARGS)?;
        let n = info::le_number(&bytes) as u32;
        Ok(*self.facts.num_args.get_or_init(|| n))
    }

    /// `clGetKernelWorkGroupInfo` for the one device (the values do not
    /// change for a given build).
    pub fn work_group_info(&self, param: cl_kernel_work_group_info) -> ClResult<Vec<u8>> {
        if let Some(v) = lock(&self.facts.work_group_info).get(&param) {
            return Ok(v.clone());
        }
        let value = info::remote(InfoTarget::KernelWorkGroup, self.handle(), 0, param)?;
        lock(&self.facts.work_group_info).insert(param, value.clone());
        Ok(value)
    }

    /// `CL_KERNEL_WORK_GROUP_SIZE`, asked of the backend on first use.
    pub fn max_group(&self) -> ClResult<u64> {
        if let Some(max) = self.facts.max_group.get() {
            return Ok(*max);
        }
        let max = info::le_number(&self.work_group_info(CL_KERNEL_WORK_GROUP_SIZE)?);
        Ok(*self.facts.max_group.get_or_init(|| max))
    }

    /// `CL_KERNEL_COMPILE_WORK_GROUP_SIZE` (zeros: none required), asked
    /// of the backend on first use.
    pub fn required_group(&self) -> ClResult<[u64; 3]> {
        if let Some(required) = self.facts.required_group.get() {
            return Ok(*required);
        }
        let mut required = [0u64; 3];
        let compiled = self.work_group_info(CL_KERNEL_COMPILE_WORK_GROUP_SIZE)?;
        for (r, bytes) in required.iter_mut().zip(compiled.chunks_exact(8)) {
            *r = info::le_number(bytes);
        }
        Ok(*self.facts.required_group.get_or_init(|| required))
    }

    /// Whether argument `index` is a `__global` or `__constant` pointer;
    /// `None` when the backend cannot tell.
    pub fn arg_is_buffer(&self, index: u32) -> Option<bool> {
        let cached = lock(&self.facts.qualifiers).get(&index).copied();
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
                lock(&self.facts.qualifiers).insert(index, q);
                q
            }
        };
        qualifier.map(|q| q == CL_KERNEL_ARG_ADDRESS_GLOBAL || q == CL_KERNEL_ARG_ADDRESS_CONSTANT)
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        self.program.kernels.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::ArgsGiven;

    #[test]
    fn a_sent_argument_is_held_until_its_index_is_set_otherwise() {
        let sent = |value: &[u8]| super::SentArg {
            kind: 1,
            size: 4,
            handle: 0,
            value: value.to_vec(),
        };
        let mut given = ArgsGiven::default();
        assert!(!given.holds(2, 1, 4, 0, &[1, 0, 0, 0]));
        given.insert(2);
        given.remember(2, sent(&[1, 0, 0, 0]));
        assert!(given.holds(2, 1, 4, 0, &[1, 0, 0, 0]));
        assert!(!given.holds(2, 1, 4, 0, &[2, 0, 0, 0]), "another value");
        assert!(!given.holds(2, 2, 4, 0, &[1, 0, 0, 0]), "another kind");
        assert!(!given.holds(1, 1, 4, 0, &[1, 0, 0, 0]), "another index");
        // Set again another way (an SVM pointer): no longer what was sent.
        given.insert(2);
        assert!(!given.holds(2, 1, 4, 0, &[1, 0, 0, 0]));
    }

    #[test]
    fn an_index_given_twice_counts_once_in_any_order() {
        let mut given = ArgsGiven::default();
        for index in [3, 0, 3, 1, 0] {
            given.insert(index);
        }
        assert_eq!(given.count, 3);
        assert_eq!(given.given, [true, true, false, true]);
        given.insert(2);
        assert_eq!(given.count, 4);
    }
}
