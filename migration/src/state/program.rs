//! Programs: what they were created from and how far they were built.

use super::device::DeviceIdentity;
use super::objects::{GuestRef, ObjectId};
use crate::codec::{record, Codec, DecodeError, Decoder, Encoder, Result};

record! {
    /// A device binary and the device it was built for.
    pub struct DeviceBinary {
        pub device: DeviceIdentity,
        pub bytes: Vec<u8>,
    }
}

/// What a program was created from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgramOrigin {
    /// `clCreateProgramWithSource`: OpenCL C.
    Source(Vec<u8>),
    /// `clCreateProgramWithIL`: SPIR-V.
    Il(Vec<u8>),
    /// `clCreateProgramWithBinary`: runs only on the device it names.
    Binary(DeviceBinary),
    /// `clLinkProgram` of compiled programs, kept whole so the link can be
    /// redone even after the guest released its inputs.
    Linked(Vec<LinkInput>),
}

record! {
    /// One input of a link: a program compiled with `clCompileProgram`.
    pub struct LinkInput {
        pub origin: ProgramOrigin,
        pub compile_options: Vec<u8>,
    }
}

/// How far a program was built, with the options of the call that did it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgramBuild {
    /// Created, never built.
    None,
    /// `clCompileProgram` succeeded (compile only: an input for a link).
    Compiled { options: Vec<u8> },
    /// Executable: `clBuildProgram` succeeded, or `clLinkProgram` made it
    /// (then `options` are the link options).
    Built { options: Vec<u8> },
    /// The last build or compile failed; restore repeats it so the guest
    /// finds the same status and log.
    Failed {
        options: Vec<u8>,
        compile_only: bool,
    },
}

record! {
    pub struct ProgramState {
        pub id: ObjectId,
        pub guest: Option<GuestRef>,
        pub context: ObjectId,
        pub origin: ProgramOrigin,
        pub build: ProgramBuild,
        /// The built executable as the source device produced it: restore
        /// may load it instead of rebuilding on a device with the same
        /// identity, and must rebuild anywhere else.
        pub executable: Option<DeviceBinary>,
    }
}

fn bad_tag(what: &'static str, tag: u32, at: usize) -> DecodeError {
    DecodeError::BadTag { what, tag, at }
}

impl Codec for ProgramOrigin {
    fn encode(&self, e: &mut Encoder) {
        match self {
            ProgramOrigin::Source(bytes) => {
                e.u32(1);
                bytes.encode(e);
            }
            ProgramOrigin::Il(bytes) => {
                e.u32(2);
                bytes.encode(e);
            }
            ProgramOrigin::Binary(binary) => {
                e.u32(3);
                binary.encode(e);
            }
            ProgramOrigin::Linked(inputs) => {
                e.u32(4);
                inputs.encode(e);
            }
        }
    }

    fn decode(d: &mut Decoder<'_>) -> Result<Self> {
        match d.tag()? {
            (1, _) => Ok(ProgramOrigin::Source(Vec::decode(d)?)),
            (2, _) => Ok(ProgramOrigin::Il(Vec::decode(d)?)),
            (3, _) => Ok(ProgramOrigin::Binary(DeviceBinary::decode(d)?)),
            // Inputs may themselves be linked libraries: bound the depth.
            (4, _) => d.nested(|d| Ok(ProgramOrigin::Linked(Vec::decode(d)?))),
            (tag, at) => Err(bad_tag("program origin", tag, at)),
        }
    }
}

impl Codec for ProgramBuild {
    fn encode(&self, e: &mut Encoder) {
        match self {
            ProgramBuild::None => e.u32(0),
            ProgramBuild::Compiled { options } => {
                e.u32(1);
                options.encode(e);
            }
            ProgramBuild::Built { options } => {
                e.u32(2);
                options.encode(e);
            }
            ProgramBuild::Failed {
                options,
                compile_only,
            } => {
                e.u32(3);
                options.encode(e);
                compile_only.encode(e);
            }
        }
    }

    fn decode(d: &mut Decoder<'_>) -> Result<Self> {
        match d.tag()? {
            (0, _) => Ok(ProgramBuild::None),
            (1, _) => Ok(ProgramBuild::Compiled {
                options: Vec::decode(d)?,
            }),
            (2, _) => Ok(ProgramBuild::Built {
                options: Vec::decode(d)?,
            }),
            (3, _) => Ok(ProgramBuild::Failed {
                options: Vec::decode(d)?,
                compile_only: bool::decode(d)?,
            }),
            (tag, at) => Err(bad_tag("program build", tag, at)),
        }
    }
}
