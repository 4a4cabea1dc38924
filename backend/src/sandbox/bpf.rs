//! A small assembler for classic BPF, the language of seccomp filters.
//!
//! A seccomp program may only jump forward, and a conditional jump reaches
//! at most 255 instructions ahead. Writing offsets by hand breaks as soon as
//! a rule is added, so the policy is written with labels instead: the
//! assembler resolves them and refuses a program it cannot encode rather
//! than emitting a wrong one. Far targets are reached through `BPF_JA`,
//! whose offset has 32 bits.

/// Where a conditional jump goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The next instruction.
    Next,
    /// A label bound later in the program.
    To(Label),
}

/// A place in the program, bound once with [`Assembler::bind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Label(usize);

/// The comparisons a conditional jump can make with the accumulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    /// `A == k`
    Eq,
    /// `A >= k` (unsigned)
    Ge,
    /// `A & k != 0`
    AnyBit,
}

/// Why a program cannot be encoded.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum AsmError {
    #[error("label {0} is used but never bound")]
    Unbound(usize),
    #[error("label {0} is bound twice")]
    BoundTwice(usize),
    #[error("a jump to label {0} goes backwards")]
    Backward(usize),
    #[error("a conditional jump to label {0} is {1} instructions long (at most 255)")]
    TooFar(usize, usize),
    #[error("the program has {0} instructions; the kernel takes at most 4096")]
    TooLong(usize),
}

pub type Result<T> = std::result::Result<T, AsmError>;

const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
const JA: u16 = (libc::BPF_JMP | libc::BPF_JA) as u16;
const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const JSET_K: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;

#[derive(Debug)]
enum Op {
    Load(u32),
    Ret(u32),
    Cond {
        cmp: Cmp,
        k: u32,
        jt: Target,
        jf: Target,
    },
    Goto(Label),
    Bind(Label),
}

/// Collects instructions with symbolic jumps; [`Assembler::finish`] lays
/// them out.
#[derive(Debug, Default)]
pub struct Assembler {
    ops: Vec<Op>,
    labels: usize,
}

impl Assembler {
    pub fn new() -> Self {
        Self::default()
    }

    /// A fresh label, to be bound later.
    pub fn label(&mut self) -> Label {
        self.labels += 1;
        Label(self.labels - 1)
    }

    /// Makes `label` point at the next instruction emitted.
    pub fn bind(&mut self, label: Label) {
        self.ops.push(Op::Bind(label));
    }

    /// `A = *(u32 *)(data + offset)`
    pub fn load(&mut self, offset: u32) {
        self.ops.push(Op::Load(offset));
    }

    /// Ends the program with `value` as the filter's verdict.
    pub fn ret(&mut self, value: u32) {
        self.ops.push(Op::Ret(value));
    }

    /// Goes to `jt` when `A cmp k` holds, else to `jf`.
    pub fn branch(&mut self, cmp: Cmp, k: u32, jt: Target, jf: Target) {
        self.ops.push(Op::Cond { cmp, k, jt, jf });
    }

    /// Goes to `label` unconditionally, however far it is.
    pub fn goto(&mut self, label: Label) {
        self.ops.push(Op::Goto(label));
    }

    /// Resolves the labels into offsets.
    pub fn finish(self) -> Result<Vec<libc::sock_filter>> {
        let mut at = vec![None; self.labels];
        let mut pc = 0;
        for op in &self.ops {
            match op {
                Op::Bind(Label(l)) => {
                    if at[*l].replace(pc).is_some() {
                        return Err(AsmError::BoundTwice(*l));
                    }
                }
                _ => pc += 1,
            }
        }
        if pc > libc::BPF_MAXINSNS as usize {
            return Err(AsmError::TooLong(pc));
        }
        let offset = |from: usize, target: Label| -> Result<usize> {
            let to = at[target.0].ok_or(AsmError::Unbound(target.0))?;
            to.checked_sub(from + 1).ok_or(AsmError::Backward(target.0))
        };
        let short = |from: usize, target: Target| -> Result<u8> {
            match target {
                Target::Next => Ok(0),
                Target::To(label) => {
                    let off = offset(from, label)?;
                    u8::try_from(off).map_err(|_| AsmError::TooFar(label.0, off))
                }
            }
        };
        let insn = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
        let mut prog = Vec::with_capacity(pc);
        for op in &self.ops {
            let here = prog.len();
            let encoded = match *op {
                Op::Bind(_) => continue,
                Op::Load(offset) => insn(LD_W_ABS, 0, 0, offset),
                Op::Ret(value) => insn(RET_K, 0, 0, value),
                Op::Goto(label) => {
                    let off = offset(here, label)?;
                    // The program is at most 4096 long: always fits.
                    insn(JA, 0, 0, off as u32)
                }
                Op::Cond { cmp, k, jt, jf } => {
                    let code = match cmp {
                        Cmp::Eq => JEQ_K,
                        Cmp::Ge => JGE_K,
                        Cmp::AnyBit => JSET_K,
                    };
                    insn(code, short(here, jt)?, short(here, jf)?, k)
                }
            };
            prog.push(encoded);
        }
        Ok(prog)
    }
}

/// Runs a program on `data` the way the kernel does, for the tests: the
/// few instructions the assembler emits, nothing else.
#[cfg(test)]
pub fn run(prog: &[libc::sock_filter], data: &[u8]) -> u32 {
    let mut pc = 0;
    let mut acc = 0u32;
    loop {
        let i = &prog[pc];
        pc += 1;
        match i.code {
            LD_W_ABS => {
                let at = i.k as usize;
                let word = data[at..at + 4].try_into().expect("4 bytes");
                acc = u32::from_ne_bytes(word);
            }
            RET_K => return i.k,
            JA => pc += i.k as usize,
            JEQ_K | JGE_K | JSET_K => {
                let taken = match i.code {
                    JEQ_K => acc == i.k,
                    JGE_K => acc >= i.k,
                    _ => acc & i.k != 0,
                };
                pc += usize::from(if taken { i.jt } else { i.jf });
            }
            other => panic!("instruction {other:#x} is not one the assembler emits"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_resolve_to_forward_offsets() {
        let mut asm = Assembler::new();
        let yes = asm.label();
        asm.load(0);
        asm.branch(Cmp::Eq, 7, Target::To(yes), Target::Next);
        asm.ret(1);
        asm.bind(yes);
        asm.ret(2);
        let prog = asm.finish().expect("valid program");
        assert_eq!(prog.len(), 4);
        assert_eq!((prog[1].jt, prog[1].jf), (1, 0));
        assert_eq!(run(&prog, &7u32.to_ne_bytes()), 2);
        assert_eq!(run(&prog, &8u32.to_ne_bytes()), 1);
    }

    #[test]
    fn goto_reaches_past_the_conditional_jump_range() {
        let mut asm = Assembler::new();
        let far = asm.label();
        asm.goto(far);
        (0..300).for_each(|_| asm.ret(1));
        asm.bind(far);
        asm.ret(2);
        let prog = asm.finish().expect("valid program");
        assert_eq!(run(&prog, &[0; 4]), 2);
    }

    #[test]
    fn far_conditional_jump_is_refused() {
        let mut asm = Assembler::new();
        let far = asm.label();
        asm.branch(Cmp::Ge, 0, Target::To(far), Target::Next);
        (0..300).for_each(|_| asm.ret(1));
        asm.bind(far);
        asm.ret(2);
        assert_eq!(asm.finish().unwrap_err(), AsmError::TooFar(0, 300));
    }

    #[test]
    fn unbound_backward_and_doubly_bound_labels_are_refused() {
        let mut asm = Assembler::new();
        let never = asm.label();
        asm.goto(never);
        assert_eq!(asm.finish().unwrap_err(), AsmError::Unbound(0));

        let mut asm = Assembler::new();
        let back = asm.label();
        asm.bind(back);
        asm.ret(0);
        asm.goto(back);
        assert_eq!(asm.finish().unwrap_err(), AsmError::Backward(0));

        let mut asm = Assembler::new();
        let twice = asm.label();
        asm.bind(twice);
        asm.ret(0);
        asm.bind(twice);
        assert_eq!(asm.finish().unwrap_err(), AsmError::BoundTwice(0));
    }

    #[test]
    fn program_over_the_kernel_limit_is_refused() {
        let mut asm = Assembler::new();
        (0..4097).for_each(|_| asm.ret(0));
        assert_eq!(asm.finish().unwrap_err(), AsmError::TooLong(4097));
    }
}
