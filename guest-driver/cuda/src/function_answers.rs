//! Answers about a function that stay the same until the program changes
//! the function's attributes: its attributes (`cuFuncGetAttribute`) and
//! occupancy (`cuOccupancy*`). Each is a round trip, and a round trip
//! waits for every launch batched before it; cudart asks for occupancy
//! before some launches (PyTorch's CNN step asked once a step, 0.3 ms of a
//! 1.8 ms step), so the library asks the device once per question.
//!
//! An answer is forgotten when its function's attributes or cache
//! configuration change (they set shared memory and carve-out, which
//! occupancy depends on). Function handles are never reused within a
//! session, so an unloaded function's answers are merely unused. After a
//! re-home or migration to another GPU model the answers are those of the
//! GPU the program started on: a program that sized its launches from them
//! keeps doing so, which stays correct (occupancy is a hint, and a launch
//! larger than the device allows fails as it would have natively).

use std::collections::HashMap;

/// What was asked about a function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Question {
    /// `cuFuncGetAttribute(attribute)`.
    Attribute(u32),
    /// Blocks per multiprocessor: block size, dynamic shared memory, flags.
    BlocksPerSm(u32, u64, u32),
    /// Potential block size: dynamic shared memory, block size limit, flags.
    PotentialBlockSize(u64, u32, u32),
    /// Active clusters: grid, block, dynamic shared memory, cluster shape.
    ActiveClusters([u32; 3], [u32; 3], u32, [u32; 3]),
}

/// The device's answers, by function and question: (value, second value).
#[derive(Debug, Default)]
pub struct FunctionAnswers {
    answers: HashMap<(u64, Question), (i32, i32)>,
}

impl FunctionAnswers {
    pub fn get(&self, function: u64, question: Question) -> Option<(i32, i32)> {
        self.answers.get(&(function, question)).copied()
    }

    pub fn insert(&mut self, function: u64, question: Question, answer: (i32, i32)) {
        self.answers.insert((function, question), answer);
    }

    /// Forgets what was asked about `function` (its attributes changed).
    pub fn forget(&mut self, function: u64) {
        self.answers.retain(|(f, _), _| *f != function);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_kept_per_function_and_question() {
        let mut a = FunctionAnswers::default();
        a.insert(7, Question::BlocksPerSm(256, 0, 0), (8, 0));
        assert_eq!(a.get(7, Question::BlocksPerSm(256, 0, 0)), Some((8, 0)));
        assert_eq!(a.get(7, Question::BlocksPerSm(128, 0, 0)), None);
        assert_eq!(a.get(8, Question::BlocksPerSm(256, 0, 0)), None);
    }

    #[test]
    fn changing_a_function_forgets_only_its_answers() {
        let mut a = FunctionAnswers::default();
        a.insert(7, Question::Attribute(1), (1024, 0));
        a.insert(7, Question::PotentialBlockSize(0, 0, 0), (264, 1024));
        a.insert(9, Question::Attribute(1), (512, 0));
        a.forget(7);
        assert_eq!(a.get(7, Question::Attribute(1)), None);
        assert_eq!(a.get(7, Question::PotentialBlockSize(0, 0, 0)), None);
        assert_eq!(a.get(9, Question::Attribute(1)), Some((512, 0)));
    }
}
