//! Results of the OpenCL C suite: `RESULT <name> <checksum> PASS|FAIL ...`.

use std::collections::BTreeMap;

/// Program name → (checksum, passed).
pub fn parse_results(output: &str) -> BTreeMap<String, (String, bool)> {
    output
        .lines()
        .filter_map(|line| {
            let line = line.trim_start_matches(|c: char| c != 'R');
            let mut words = line.strip_prefix("RESULT ")?.split_whitespace();
            let name = words.next()?.to_string();
            let checksum = words.next()?.to_string();
            let passed = words.next() == Some("PASS");
            Some((name, (checksum, passed)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_parsed_from_noisy_output() {
        let out = "noise\nRESULT vector_add 0badf00d PASS\n[ 1.2] RESULT nbody - FAIL timeout\n";
        let results = parse_results(out);
        assert_eq!(results["vector_add"], ("0badf00d".into(), true));
        assert_eq!(results["nbody"], ("-".into(), false));
    }
}
