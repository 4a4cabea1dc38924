//! `vgpu-backend`: a vhost-user back-end that runs a VM's OpenCL calls on
//! this host's device, each VM's objects under the guest's own handles.

pub mod chain;
pub mod channel;
pub mod config;
pub mod control;
pub mod control_schema;
pub mod device;
pub mod executor;
pub mod exporter;
pub mod handles;
pub mod harness;
pub mod heap;
pub mod metrics;
pub mod migrate;
pub mod quota;
pub mod ratelimit;
pub mod sandbox;
pub mod server;
pub mod session;
pub mod snapshot;
pub mod supervisor;
pub mod vgpu;
pub mod worker;
