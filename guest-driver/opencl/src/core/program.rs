//! Programs: what they were created from, whether they are executable, and
//! their kernel names (asked once per build).

use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, MutexGuard};

use opencl_sys::{CL_INVALID_PROGRAM, CL_INVALID_PROGRAM_EXECUTABLE, CL_PROGRAM_KERNEL_NAMES};
use vgpu_protocol::messages::{CreateProgramWithSource, Release};
use vgpu_protocol::{InfoTarget, ObjectKind};

use crate::core::context::Context;
use crate::core::include::{self, Search};
use crate::core::info;
use crate::core::kernel::Facts;
use crate::core::object::{kind, Cl, ClResult};
use crate::core::platform;

/// What a program was created from.
pub enum Origin {
    Source(Vec<u8>),
    Il(Vec<u8>),
    Binary,
    Linked,
}

pub struct Program {
    pub context: Arc<Cl<Context>>,
    pub origin: Origin,
    state: Mutex<State>,
    /// Live kernels created from it (`clBuildProgram` refuses to rebuild
    /// while there are any).
    pub kernels: AtomicUsize,
    /// Per kernel function of the current build.
    facts: Mutex<HashMap<String, Arc<Facts>>>,
}

#[derive(Default)]
struct State {
    executable: bool,
    kernel_names: Option<Vec<String>>,
    /// The options of the last build, compile or link, as given.
    options: Option<Vec<u8>>,
    /// The source the backend's program was created from (includes
    /// resolved), for a program created from source.
    sent: Option<Vec<u8>>,
}

kind!(Program, CL_INVALID_PROGRAM, Some(ObjectKind::Program));

impl Program {
    pub fn new(context: Arc<Cl<Context>>, origin: Origin, executable: bool) -> Program {
        Program {
            context,
            origin,
            state: Mutex::new(State {
                executable,
                kernel_names: None,
                options: None,
                sent: None,
            }),
            kernels: AtomicUsize::new(0),
            facts: Mutex::new(HashMap::new()),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The state is two independent fields, each written whole.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the outcome of a build, compile or link and its options.
    pub fn built(&self, executable: bool, options: Vec<u8>) {
        let mut state = self.state();
        state.executable = executable;
        state.kernel_names = None;
        state.options = Some(options);
        drop(state);
        self.facts.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// What is known about kernel function `name` of the current build.
    pub fn kernel_facts(&self, name: &str) -> Arc<Facts> {
        let mut facts = self.facts.lock().unwrap_or_else(|e| e.into_inner());
        facts.entry(name.to_string()).or_default().clone()
    }

    /// `CL_PROGRAM_BUILD_OPTIONS` as the application gave them (the backend
    /// may add its own).
    pub fn options(&self) -> Option<Vec<u8>> {
        self.state().options.clone()
    }

    pub fn is_executable(&self) -> bool {
        self.state().executable
    }
}

/// The source to create a program with before its build: every include
/// resolved against nothing (the build resolves them with its `-I`
/// directories), since the backend refuses include directives.
pub fn source_to_create(source: &[u8]) -> Vec<u8> {
    if include::needs_expansion(source) {
        include::expand(source, &Search::default())
    } else {
        source.to_vec()
    }
}

impl Program {
    /// Notes the source the backend's program was created from.
    pub fn created_from(&self, sent: Vec<u8>) {
        self.state().sent = Some(sent);
    }
}

impl Cl<Program> {
    /// Before a build or compile: makes the backend's program hold the
    /// source with its includes resolved through `search`, re-creating it
    /// under the same handle (no kernel exists, so nothing else holds it)
    /// when that differs from what it was created from. The requests are
    /// batched ahead of the build.
    pub fn resolve_includes(&self, search: &Search) -> ClResult<()> {
        let Origin::Source(source) = &self.origin else {
            return Ok(());
        };
        if !include::needs_expansion(source) {
            return Ok(());
        }
        let expanded = include::expand(source, search);
        if expanded.len() > vgpu_protocol::limits::MAX_BYTES_FIELD as usize {
            return Err(opencl_sys::CL_OUT_OF_RESOURCES);
        }
        if self.state().sent.as_ref() == Some(&expanded) {
            return Ok(());
        }
        let client = platform::client()?;
        let release = Release {
            kind: ObjectKind::Program as u32,
            handle: self.handle(),
        };
        client.defer(release.into()).map_err(|s| s.0)?;
        let create = CreateProgramWithSource {
            program: self.handle(),
            context: self.context.handle(),
            source: expanded.clone(),
        };
        client.defer(create.into()).map_err(|s| s.0)?;
        self.state().sent = Some(expanded);
        Ok(())
    }

    /// The kernel names of the current build, if they were asked already
    /// (`kernel_names`); asking is not free on every driver (NVIDIA 580
    /// corrupts its heap listing a name of 512 bytes or more).
    pub fn known_kernel_names(&self) -> Option<Vec<String>> {
        self.state().kernel_names.clone()
    }

    /// `CL_PROGRAM_KERNEL_NAMES`, split; asked once per build.
    pub fn kernel_names(&self) -> ClResult<Vec<String>> {
        if !self.is_executable() {
            return Err(CL_INVALID_PROGRAM_EXECUTABLE);
        }
        if let Some(names) = &self.state().kernel_names {
            return Ok(names.clone());
        }
        let bytes = info::remote(
            InfoTarget::Program,
            self.handle(),
            0,
            CL_PROGRAM_KERNEL_NAMES,
        )?;
        let names: Vec<String> = info::c_string(&bytes)
            .split(';')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(String::from)
            .collect();
        self.state().kernel_names = Some(names.clone());
        Ok(names)
    }
}
