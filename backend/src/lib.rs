//! `vgpu-backend`: a vhost-user back-end that runs a VM's OpenCL calls on
//! this host's device, each VM's objects under the guest's own handles.

pub mod awaited_signal;
pub mod chain;
pub mod channel;
pub mod config;
pub mod control_schema;
pub mod desc_walk;
pub mod executor;
pub mod guest_ranges;
pub mod handles;
pub mod harness;
pub mod peer;
pub mod peer_copy;
pub mod persist;
pub mod piece_copy;
pub mod quota;
pub mod ratelimit;
pub mod sandbox;
pub mod startup;
pub mod supervisor;
pub mod vgpu;
pub mod vhost;
pub mod worker;
