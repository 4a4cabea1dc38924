use super::*;

/// A scratch folder removed at the end of the test.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("vgpu-include-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
    }

    fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dirs");
        std::fs::write(&path, text).expect("write");
        path
    }

    fn search(&self, dirs: &[&str]) -> Search {
        Search {
            dirs: dirs.iter().map(PathBuf::from).collect(),
            cwd: Some(self.0.clone()),
            embedded: Vec::new(),
            limit: 1 << 20,
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).expect("utf-8")
}

/// What the backend's guard refuses: an introducer, blanks, a file
/// directive, anywhere in the comment-free text.
fn guard_refuses(source: &[u8]) -> bool {
    let p3 = phase3(source);
    let t = &p3.text;
    (0..t.len()).any(|i| {
        let n = introducer_length(&t[i..]);
        if n == 0 {
            return false;
        }
        let mut at = i + n;
        while at < t.len() && is_blank(t[at]) {
            at += 1;
        }
        FILE_DIRECTIVES.contains(&word(&t[at..]))
    })
}

#[test]
fn expands_quoted_include_relative_to_including_file() {
    let s = Scratch::new("relative");
    s.file("inc/a.h", "#include \"sub/b.h\"\nint a;\n");
    s.file("inc/sub/b.h", "#include \"c.h\"\n");
    s.file("inc/sub/c.h", "int c;\n");
    // A c.h in the -I folder too: the including file's folder wins.
    s.file("inc/c.h", "int wrong;\n");
    let out = text(expand(
        b"#include \"a.h\"\nkernel void k(){}\n",
        &s.search(&["inc"]),
    ));
    assert!(out.contains("int c;"), "{out}");
    assert!(!out.contains("wrong"), "{out}");
    assert!(out.contains("int a;"));
    assert!(
        out.ends_with("#line 2 \"<source>\"\nkernel void k(){}\n"),
        "{out}"
    );
    assert!(!guard_refuses(out.as_bytes()));
}

#[test]
fn line_markers_name_each_file_and_the_line_after_the_include() {
    let s = Scratch::new("markers");
    let header = s.file("h/x.h", "int x;\n");
    let out = text(expand(
        b"// one\n#include <x.h>\nint y;\n",
        &s.search(&["h"]),
    ));
    let expected = format!(
        "// one\n#line 1 \"{}\"\nint x;\n#line 3 \"<source>\"\nint y;\n",
        header.display()
    );
    assert_eq!(out, expected);
}

#[test]
fn angled_include_skips_the_including_files_folder() {
    let s = Scratch::new("angled");
    s.file("inc/a.h", "#include <b.h>\n");
    s.file("inc/b.h", "int wrong;\n");
    s.file("other/b.h", "int right;\n");
    let out = text(expand(b"#include \"a.h\"\n", &s.search(&["other", "inc"])));
    assert!(out.contains("int right;"), "{out}");
    assert!(!out.contains("wrong"));
}

#[test]
fn working_directory_is_searched_last_as_pocl_does() {
    let s = Scratch::new("cwd");
    s.file("here.h", "int here;\n");
    let out = text(expand(b"#include <here.h>\n", &s.search(&[])));
    assert!(out.contains("int here;"), "{out}");
}

#[test]
fn missing_include_becomes_error_directive() {
    let s = Scratch::new("missing");
    let out = text(expand(
        b"#if 0\n#include \"nope.h\"\n#endif\nkernel void k(){}\n",
        &s.search(&["inc"]),
    ));
    assert_eq!(
        out,
        "#if 0\n#error 'nope.h' file not found\n#line 3 \"<source>\"\n#endif\nkernel void k(){}\n"
    );
    assert!(!guard_refuses(out.as_bytes()));
}

#[test]
fn computed_include_becomes_error_directive() {
    let out = text(expand(
        b"#define H \"x.h\"\n#include H\n",
        &Search::default(),
    ));
    assert!(out.contains("#error "), "{out}");
    assert!(!guard_refuses(out.as_bytes()), "{out}");
}

#[test]
fn without_file_system_every_file_is_missing() {
    let out = text(expand(b"#include \"/etc/hostname\"\n", &Search::default()));
    assert!(
        out.starts_with("#error '/etc/hostname' file not found\n"),
        "{out}"
    );
}

#[test]
fn directives_hidden_by_comments_and_splices_are_found() {
    let s = Scratch::new("lexing");
    s.file("x.h", "int x;\n");
    for source in [
        "/* a\n */ #include \"x.h\"\nint after;\n",
        "#inc\\\nlude \"x.h\"\nint after;\n",
        "# /* c */ include \"x.h\"\nint after;\n",
        "%:include \"x.h\"\nint after;\n",
        "#include \"x.h\" // trailing\r\nint after;\r\n",
        "#include \"x.h\" /* spans\n lines */\nint after;\n",
    ] {
        let out = text(expand(source.as_bytes(), &s.search(&[])));
        assert!(out.contains("int x;"), "{source:?} -> {out:?}");
        assert!(out.contains("#line 3 \"<source>\"") || out.contains("#line 2 \"<source>\""));
        assert!(out.contains("int after;"), "{out}");
        assert!(!guard_refuses(out.as_bytes()), "{source:?} -> {out:?}");
    }
}

#[test]
fn includes_inside_comments_and_literals_stay_text() {
    let s = Scratch::new("literals");
    s.file("x.h", "int x;\n");
    let source =
        "/* #include \"x.h\" */\n// #include \"x.h\"\nconstant char* s = \"#include <x.h>\";\n";
    let out = text(expand(source.as_bytes(), &s.search(&[])));
    assert!(!out.contains("int x;"), "{out}");
    assert!(out.contains("\"\\043include <x.h>\""), "{out}");
    assert!(!guard_refuses(out.as_bytes()), "{out}");
}

#[test]
fn cycles_stop_at_a_file_on_the_current_chain() {
    let s = Scratch::new("cycle");
    s.file(
        "a.h",
        "#ifndef A\n#define A\n#include \"b.h\"\nint a;\n#endif\n",
    );
    s.file("b.h", "#include \"a.h\"\nint b;\n");
    let out = text(expand(
        b"#include \"a.h\"\n#include \"a.h\"\n",
        &s.search(&[]),
    ));
    assert_eq!(out.matches("int a;").count(), 2, "{out}");
    assert_eq!(out.matches("int b;").count(), 2, "{out}");
}

#[test]
fn pragma_once_becomes_a_guard_macro() {
    let s = Scratch::new("once");
    s.file("o.h", "#pragma once\nint o;\n");
    let out = text(expand(
        b"#include \"o.h\"\n#include \"./o.h\"\n",
        &s.search(&[]),
    ));
    // Inlined twice (either may sit in a dead branch), one guard macro.
    assert_eq!(
        out.matches("#ifndef __vgpu_pragma_once_0\n").count(),
        2,
        "{out}"
    );
    assert!(!out.contains("__vgpu_pragma_once_1"));
    assert!(!out.contains("#pragma once"));
}

#[test]
fn embedded_headers_are_found_by_name_and_folder() {
    let search = Search {
        embedded: vec![
            ("dir/a.h".into(), b"#include \"b.h\"\nint a;\n".to_vec()),
            ("dir/b.h".into(), b"int b;\n".to_vec()),
        ],
        limit: 1 << 20,
        ..Search::default()
    };
    let out = text(expand(
        b"#include \"dir/a.h\"\nkernel void k(){}\n",
        &search,
    ));
    assert!(out.contains("#line 1 \"dir/a.h\"\n"), "{out}");
    assert!(out.contains("int b;"), "{out}");
    assert!(out.contains("int a;"));
}

#[test]
fn size_bound_turns_further_includes_into_errors() {
    let s = Scratch::new("bound");
    s.file("big.h", &"int big;\n".repeat(100));
    let mut search = s.search(&[]);
    search.limit = 1000;
    let out = text(expand(b"#include \"big.h\"\n#include \"big.h\"\n", &search));
    assert_eq!(out.matches("int big;").count(), 100, "{out}");
    assert!(out.contains("#error 'big.h' not included"), "{out}");
}

#[test]
fn depth_bound_stops_self_including_chains() {
    let s = Scratch::new("depth");
    // Distinct files, each including the next: a chain deeper than clang's.
    for i in 0..=MAX_DEPTH {
        s.file(&format!("d{i}.h"), &format!("#include \"d{}.h\"\n", i + 1));
    }
    let out = text(expand(b"#include \"d0.h\"\n", &s.search(&[])));
    assert!(out.contains("#error include nested too deeply"), "{out}");
}

#[test]
fn include_path_options_leave_the_options() {
    let (kept, dirs) = split_options(b"-DX=1 -I /a/b -I\"/c d\" -cl-fast-relaxed-math -Irel");
    assert_eq!(kept, b"-DX=1 -cl-fast-relaxed-math");
    assert_eq!(
        dirs,
        vec![
            PathBuf::from("/a/b"),
            PathBuf::from("/c d"),
            PathBuf::from("rel")
        ]
    );
}

#[test]
fn has_include_is_answered_from_the_guest_files() {
    let s = Scratch::new("has-include");
    s.file("inc/yes.h", "int yes;\n");
    let source = "#if __has_include(<yes.h>) && !__has_include( \"no.h\" )\nint both;\n#endif\nint x = __has_include(\"yes.h\");\n";
    let out = text(expand(source.as_bytes(), &s.search(&["inc"])));
    assert!(out.starts_with("#if 1 && !0\nint both;\n"), "{out}");
    // Outside a conditional directive it stays for the compiler to judge.
    assert!(out.contains("int x = __has_include(\"yes.h\");"), "{out}");
    assert!(!out.contains("#line"), "no include, no marker: {out}");
}
