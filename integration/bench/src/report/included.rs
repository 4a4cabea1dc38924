//! Parts of BENCHMARKS.md that no single run of the harness makes: notes
//! and figures kept by hand (comparisons across several runs, figures of
//! other scripts). Each lives in a file of its own under `docs/bench/`, and
//! every regeneration copies it in at its place, as it is, under a line
//! that names the file: a new run (or a `--only` subset) never drops them.
//!
//! A file may start with `<!-- vgpu-bench: only for the run of commit C -->`:
//! it is then a note about that run's figures, left out of the report of
//! any other run.

use std::path::Path;

use crate::benches::Section;

/// Where in the report a part goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Under "This run", before the run's facts.
    RunNote,
    /// At the end of a section, after its tables, plots and pending lines.
    SectionEnd(Section),
}

/// A file kept outside the generator, and who keeps it.
#[derive(Debug, Clone, Copy)]
pub struct Source {
    /// Relative to the workspace root.
    pub path: &'static str,
    pub place: Place,
    /// What it holds (where its figures come from), for the line above it.
    pub origin: &'static str,
}

/// Every included part, in report order within its place.
pub const SOURCES: &[Source] = &[
    Source {
        path: "docs/bench/run-note.md",
        place: Place::RunNote,
        origin: "notes on one run's figures",
    },
    Source {
        path: "docs/bench/vm-datapath-section.md",
        place: Place::SectionEnd(Section::Vm),
        origin: "figures of `vgpu-bench --vm --only vm_datapath` runs",
    },
    Source {
        path: "docs/bench/live-checkpoint-section.md",
        place: Place::SectionEnd(Section::State),
        origin: "figures of `scripts/bench-live-checkpoint.sh`",
    },
    Source {
        path: "docs/bench/migration-section.md",
        place: Place::SectionEnd(Section::State),
        origin: "figures of `vgpu-bench --vm --only precopy_migration`",
    },
];

/// A part as the report shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub place: Place,
    /// The line naming the file, a blank line, then the file's text.
    pub markdown: String,
}

const RUN_MARKER: &str = "<!-- vgpu-bench: only for the run of commit ";

/// Reads every part for the report of a run of `run_commit`. `root` is
/// the workspace root, `link` turns a file's path into a link from the
/// report. A missing or unreadable file is named in its place (and on
/// stderr) rather than failing a run that has already measured.
pub fn load(
    sources: &[Source],
    root: &Path,
    link: impl Fn(&Path) -> String,
    run_commit: Option<&str>,
) -> Vec<Part> {
    let mut parts = Vec::new();
    for source in sources {
        let file = root.join(source.path);
        let text = match std::fs::read_to_string(&file) {
            Ok(text) => text,
            Err(e) => {
                eprintln!("vgpu-bench: cannot read {}: {e}", file.display());
                parts.push(Part {
                    place: source.place,
                    markdown: format!(
                        "- `{}` (kept by hand, {}) could not be read: {e}.\n",
                        source.path, source.origin
                    ),
                });
                continue;
            }
        };
        let (only_for, body) = split_run_marker(&text);
        if let Some(commit) = only_for {
            if !same_commit(commit, run_commit) {
                eprintln!(
                    "vgpu-bench: {} is about the run of {commit}: left out",
                    source.path
                );
                continue;
            }
        }
        let scope = match only_for {
            Some(commit) => format!(", shown only with the run of commit `{commit}` it is about"),
            None => String::new(),
        };
        parts.push(Part {
            place: source.place,
            markdown: format!(
                "*From [`{path}`]({link}), kept by hand ({origin}{scope}); `scripts/bench.sh` copies the file in as it is.*\n\n{body}\n",
                path = source.path,
                link = link(&file),
                origin = source.origin,
                body = body.trim_end(),
            ),
        });
    }
    parts
}

/// The commit named by a leading run marker, and the text after it.
fn split_run_marker(text: &str) -> (Option<&str>, &str) {
    let Some(rest) = text.strip_prefix(RUN_MARKER) else {
        return (None, text);
    };
    let Some((commit, body)) = rest.split_once("-->") else {
        return (None, text);
    };
    let commit = commit.trim();
    if commit.is_empty() {
        return (None, text);
    }
    (Some(commit), body.trim_start_matches(['\r', '\n']))
}

/// Whether `marked` (an abbreviated commit) names the run's commit, as
/// `git describe --always --dirty` gives it (any abbreviation length).
fn same_commit(marked: &str, run: Option<&str>) -> bool {
    let Some(run) = run else {
        return false;
    };
    let run = run.trim_end_matches("-dirty");
    !run.is_empty() && (run.starts_with(marked) || marked.starts_with(run))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A scratch workspace root holding the given files.
    struct Root(PathBuf);

    impl Root {
        fn new(name: &str, files: &[(&str, &str)]) -> Root {
            let dir = std::env::temp_dir()
                .join(format!("vgpu-bench-included-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            for (path, text) in files {
                let file = dir.join(path);
                std::fs::create_dir_all(file.parent().expect("file in a folder"))
                    .expect("create scratch folder");
                std::fs::write(&file, text).expect("write scratch file");
            }
            Root(dir)
        }
    }

    impl Drop for Root {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    const NOTE: Source = Source {
        path: "docs/note.md",
        place: Place::RunNote,
        origin: "notes",
    };
    const TABLE: Source = Source {
        path: "docs/table.md",
        place: Place::SectionEnd(Section::State),
        origin: "figures of a script",
    };

    fn link(path: &Path) -> String {
        format!(
            "LINK:{}",
            path.file_name().unwrap_or_default().to_string_lossy()
        )
    }

    #[test]
    fn file_is_copied_verbatim_under_a_line_naming_it() {
        let text = "### A table\n\n| a | b |\n| --- | --- |\n| 1 | 2 |\n";
        let root = Root::new("verbatim", &[("docs/table.md", text)]);
        let parts = load(&[TABLE], &root.0, link, Some("abc1234"));
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].place, Place::SectionEnd(Section::State));
        let (line, body) = parts[0].markdown.split_once("\n\n").expect("a source line");
        assert!(line.contains("[`docs/table.md`](LINK:table.md)"), "{line}");
        assert!(
            line.contains("kept by hand (figures of a script)"),
            "{line}"
        );
        assert_eq!(body, text);
    }

    #[test]
    fn parts_keep_the_order_of_their_sources() {
        let root = Root::new(
            "order",
            &[("docs/note.md", "note\n"), ("docs/table.md", "table\n")],
        );
        let parts = load(&[TABLE, NOTE], &root.0, link, None);
        let bodies: Vec<&str> = parts
            .iter()
            .map(|p| p.markdown.split_once("\n\n").expect("a source line").1)
            .collect();
        assert_eq!(bodies, ["table\n", "note\n"]);
    }

    #[test]
    fn run_note_is_shown_only_with_its_run() {
        let note = "<!-- vgpu-bench: only for the run of commit 25ed8f4 -->\n> Stale.\n";
        let root = Root::new("run-note", &[("docs/note.md", note)]);
        for commit in ["25ed8f4", "25ed8f4c0ffee", "25ed8f4-dirty"] {
            let parts = load(&[NOTE], &root.0, link, Some(commit));
            assert_eq!(parts.len(), 1, "run of {commit}");
            assert!(parts[0].markdown.ends_with("\n\n> Stale.\n"), "{parts:?}");
            assert!(parts[0].markdown.contains("commit `25ed8f4`"));
            assert!(!parts[0].markdown.contains("<!--"));
        }
        for commit in [Some("1018d41"), Some("-dirty"), None] {
            assert!(
                load(&[NOTE], &root.0, link, commit).is_empty(),
                "run of {commit:?}"
            );
        }
    }

    #[test]
    fn malformed_marker_leaves_the_file_as_text() {
        for text in [
            "<!-- vgpu-bench: only for the run of commit 25ed8f4\nno end\n",
            "<!-- vgpu-bench: only for the run of commit  -->\nempty commit\n",
        ] {
            assert_eq!(split_run_marker(text), (None, text));
        }
    }

    #[test]
    fn missing_file_is_named_in_its_place() {
        let root = Root::new("missing", &[]);
        let parts = load(&[TABLE], &root.0, link, None);
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].place, Place::SectionEnd(Section::State));
        assert!(
            parts[0].markdown.starts_with(
                "- `docs/table.md` (kept by hand, figures of a script) could not be read:"
            ),
            "{}",
            parts[0].markdown
        );
    }

    #[test]
    fn every_listed_file_exists_in_the_workspace() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for source in SOURCES {
            assert!(
                root.join(source.path).is_file(),
                "{} is listed but missing",
                source.path
            );
        }
    }
}
