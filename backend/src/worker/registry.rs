//! What one worker serves: its VM's vGPU (once a front-end connected) and
//! the devices it runs on. The worker's control requests act on it.

use std::sync::{Arc, Mutex, RwLock, Weak};

use crate::control_schema::{ErrorCode, ErrorReply};
use crate::executor::opencl::{DeviceSelector, OpenClExecutor};
use crate::executor::Executor;
use crate::startup::error_chain;
use crate::vgpu::Vgpu;

pub struct Registry {
    /// The VM id the supervisor gave this worker.
    pub id: u64,
    vm: Mutex<Weak<Vgpu>>,
    executors: RwLock<Vec<Arc<dyn Executor>>>,
    queue_depth: usize,
    /// The profile given with --profile and the --memory size, kept by
    /// re-homed devices.
    profile_limit: Option<Arc<vgpu_migration::Profile>>,
    memory: Option<u64>,
}

impl Registry {
    pub fn new(
        id: u64,
        executors: Vec<Arc<dyn Executor>>,
        queue_depth: usize,
        profile_limit: Option<Arc<vgpu_migration::Profile>>,
        memory: Option<u64>,
    ) -> Registry {
        Registry {
            id,
            vm: Mutex::new(Weak::new()),
            executors: RwLock::new(executors),
            queue_depth,
            profile_limit,
            memory,
        }
    }

    pub fn executors(&self) -> Vec<Arc<dyn Executor>> {
        self.executors
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The vGPU of the connected front-end.
    pub fn serve(&self, vgpu: &Arc<Vgpu>) {
        *self.vm.lock().unwrap_or_else(|e| e.into_inner()) = Arc::downgrade(vgpu);
    }

    /// The front-end went away: its vGPU is no longer this worker's to
    /// report or act on.
    pub fn release(&self) {
        *self.vm.lock().unwrap_or_else(|e| e.into_inner()) = Weak::new();
    }

    /// The live vGPU, if a front-end is connected.
    pub fn live(&self) -> Option<Arc<Vgpu>> {
        self.vm.lock().unwrap_or_else(|e| e.into_inner()).upgrade()
    }

    /// The live vGPU, or the error a command on it answers.
    pub fn vm(&self) -> Result<Arc<Vgpu>, ErrorReply> {
        self.live().ok_or_else(|| {
            ErrorReply::new(
                ErrorCode::NoVm,
                format!("front-end {} is not connected", self.id),
            )
        })
    }

    /// Moves the vGPU, if any, and this worker's later one to another
    /// OpenCL device.
    pub fn rehome(&self, selector: &DeviceSelector) -> Result<Vec<crate::persist::Report>, String> {
        let mut opencl = OpenClExecutor::open(selector).map_err(|e| e.to_string())?;
        opencl.queue_depth = self.queue_depth;
        opencl
            .configure_profile(self.profile_limit.clone(), self.memory)
            .map_err(|e| error_chain(&e))?;
        let to: Arc<dyn Executor> = Arc::new(opencl);
        let mut reports = Vec::new();
        if let Some(vgpu) = self.live() {
            let started = std::time::Instant::now();
            let report = crate::persist::rehome(&vgpu, to.clone()).map_err(|e| error_chain(&e))?;
            vgpu.metrics().rehomes.note(started.elapsed());
            reports.push(report);
        }
        let mut executors = self.executors.write().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = executors
            .iter_mut()
            .find(|e| e.kind() == Some(vgpu_migration::ExecutorKind::OpenCl))
        {
            *slot = to;
        }
        log::info!("front-end {} re-homed to {selector}", self.id);
        Ok(reports)
    }
}
