//! `#include` resolved in the guest. The backend never lets the host
//! compiler open a file the guest names (its guard refuses `-I` options and
//! every include directive), so this library reads the headers from the
//! guest's own file system, and from `clCompileProgram`'s embedded headers,
//! and sends one self-contained source:
//!
//! - `-I dir` / `-Idir` leave the build options ([`split_options`]);
//! - every include directive is replaced by the file's text between `#line`
//!   markers, so build logs name the header and its line;
//! - an include that cannot be found, or a computed `#include MACRO`,
//!   becomes an `#error` line with clang's message, so it fails only where
//!   the branch is live, as natively, and the build log says why;
//! - `#pragma once` becomes a guard macro around the file's text (the text
//!   may sit in a dead branch, so "seen once" cannot be decided here);
//!   a file already on the current include chain is not expanded again;
//!   depth and total size are bounded;
//! - `__has_include("x")` in `#if` / `#elif` is answered here (`1` or
//!   `0`), from the same search, not by the host's file system.
//!
//! Directives are found the way the backend's guard (and clang) lexes:
//! line splices first (`\` or `??/`, optional blanks, a newline), then
//! comments become one space, string and character literals are opaque.
//! An introducer (`#`, `%:`, `??=`) before `include`, `include_next`,
//! `import` or `embed` inside a literal, which clang leaves alone but the
//! guard would refuse, is respelt with an octal escape.
//!
//! Search order, as PoCL gives it natively: for `"x"` the including file's
//! directory (for the program's own source: the working directory), then
//! the `-I` directories, then the working directory; for `<x>` the `-I`
//! directories, then the working directory. Embedded headers match by the
//! name as written (or relative to an including embedded header's folder)
//! before the file system.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Directives that read files (the guard's list).
const FILE_DIRECTIVES: &[&[u8]] = &[b"include", b"include_next", b"import", b"embed"];
/// clang's limit on nesting.
pub const MAX_DEPTH: usize = 200;
/// The name `#line` gives the program's own source after a header.
pub const MAIN_NAME: &str = "<source>";

/// Where headers come from.
#[derive(Clone)]
pub struct Search {
    /// `-I` directories, in order, as given (relative to `cwd`).
    pub dirs: Vec<PathBuf>,
    /// The working directory; `None`: no file system at all (only the
    /// embedded headers).
    pub cwd: Option<PathBuf>,
    /// `clCompileProgram`'s embedded headers: include name and text.
    pub embedded: Vec<(String, Vec<u8>)>,
    /// Bound on the expanded source.
    pub limit: usize,
}

/// Room left in the largest source one message carries for what the
/// backend puts before it.
pub const DEFAULT_LIMIT: usize = vgpu_protocol::limits::MAX_BYTES_FIELD as usize - (64 << 10);

impl Default for Search {
    /// No file system and no embedded headers: every include is missing.
    fn default() -> Search {
        Search {
            dirs: Vec::new(),
            cwd: None,
            embedded: Vec::new(),
            limit: DEFAULT_LIMIT,
        }
    }
}

impl Search {
    /// The guest's file system: `dirs`, then the working directory.
    pub fn files(dirs: Vec<PathBuf>) -> Search {
        Search {
            dirs,
            cwd: std::env::current_dir().ok(),
            ..Search::default()
        }
    }
}

/// The build options without the include-path options, and those paths.
/// Tokens split at white space, with `"…"` and `'…'` quoting; the options
/// kept are the original spellings joined by one space.
pub fn split_options(options: &[u8]) -> (Vec<u8>, Vec<PathBuf>) {
    let tokens = tokens(options);
    let mut kept: Vec<&[u8]> = Vec::new();
    let mut dirs = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let (raw, value) = &tokens[i];
        if value == b"-I" {
            if let Some((_, dir)) = tokens.get(i + 1) {
                dirs.push(path_of(dir));
            }
            i += 2;
            continue;
        }
        if let Some(dir) = value.strip_prefix(b"-I") {
            dirs.push(path_of(dir));
        } else {
            kept.push(raw);
        }
        i += 1;
    }
    (kept.join(&b' '), dirs)
}

fn path_of(bytes: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(std::ffi::OsStr::from_bytes(bytes))
}

/// Option tokens: (original spelling, value with quotes removed).
fn tokens(text: &[u8]) -> Vec<(&[u8], Vec<u8>)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        if text[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        let mut value = Vec::new();
        let mut quote = None;
        while i < text.len() {
            let b = text[i];
            match quote {
                Some(q) if b == q => quote = None,
                Some(_) => value.push(b),
                None if b == b'"' || b == b'\'' => quote = Some(b),
                None if b.is_ascii_whitespace() => break,
                None => value.push(b),
            }
            i += 1;
        }
        out.push((&text[start..i], value));
    }
    out
}

/// Whether `source` has a directive (or literal) that expansion changes.
pub fn needs_expansion(source: &[u8]) -> bool {
    !scan(source).is_empty()
}

/// The source with every include resolved.
pub fn expand(source: &[u8], search: &Search) -> Vec<u8> {
    let mut expander = Expander {
        search,
        out: Vec::with_capacity(source.len()),
        chain: Vec::new(),
        once: HashMap::new(),
    };
    let main = Unit {
        text: source,
        name: MAIN_NAME.to_string(),
        dir: search.cwd.clone(),
        embedded_dir: Some(String::new()),
        key: None,
        found_in: None,
    };
    expander.unit(&main, 0);
    expander.out
}

/// What identifies a file for cycles and `#pragma once`.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Key {
    File(PathBuf),
    Embedded(usize),
}

struct Unit<'a> {
    text: &'a [u8],
    /// Its name in `#line` markers.
    name: String,
    /// Its folder, for `"…"` includes (`None`: no file system).
    dir: Option<PathBuf>,
    /// Its folder among the embedded headers' names (`None`: a file).
    embedded_dir: Option<String>,
    key: Option<Key>,
    /// The index of the `-I` directory it was found in (`include_next`).
    found_in: Option<usize>,
}

struct Expander<'a> {
    search: &'a Search,
    out: Vec<u8>,
    /// The files being expanded, outermost first.
    chain: Vec<Key>,
    /// Guard-macro numbers of `#pragma once` files.
    once: HashMap<Key, usize>,
}

/// One change to a unit's text.
#[derive(Debug, PartialEq)]
enum Edit {
    /// The physical lines `start..end` hold a directive.
    Directive {
        start: usize,
        end: usize,
        /// The physical line after it (1-based).
        next_line: usize,
        what: Directive,
    },
    /// An introducer inside a literal, at `at`.
    Escape { at: usize },
    /// `__has_include("x")` (or `<x>`) at `start..end` of a conditional
    /// directive: answered here, from the guest's files, as `1` or `0`.
    HasInclude {
        start: usize,
        end: usize,
        name: Vec<u8>,
        angled: bool,
    },
}

impl Edit {
    fn start(&self) -> usize {
        match self {
            Edit::Directive { start, .. } | Edit::HasInclude { start, .. } => *start,
            Edit::Escape { at, .. } => *at,
        }
    }
}

#[derive(Debug, PartialEq)]
enum Directive {
    Include {
        name: Vec<u8>,
        angled: bool,
        next: bool,
        once: bool,
    },
    /// `#include` without a `"…"` or `<…>` name.
    Computed,
    Embed,
    PragmaOnce,
}

impl Expander<'_> {
    fn unit(&mut self, unit: &Unit<'_>, depth: usize) {
        let edits = scan(unit.text);
        let mut cursor = 0;
        for edit in edits {
            match edit {
                Edit::HasInclude {
                    start,
                    end,
                    name,
                    angled,
                } => {
                    self.out.extend_from_slice(&unit.text[cursor..start]);
                    let found = self.find(unit, &name, angled, false).is_some();
                    self.out.push(if found { b'1' } else { b'0' });
                    cursor = end;
                }
                Edit::Escape { at } => {
                    self.out.extend_from_slice(&unit.text[cursor..at]);
                    let escaped: &[u8] = match unit.text[at] {
                        b'#' => b"\\043",
                        b'%' => b"\\045",
                        _ => b"\\077",
                    };
                    self.out.extend_from_slice(escaped);
                    cursor = at + 1;
                }
                Edit::Directive {
                    start,
                    end,
                    next_line,
                    what,
                } => {
                    self.out.extend_from_slice(&unit.text[cursor..start]);
                    cursor = end;
                    match what {
                        Directive::PragmaOnce => {
                            self.out.push(b'\n');
                            self.line(next_line, &unit.name);
                            continue;
                        }
                        Directive::Computed => self.error(
                            "a macro-named include cannot be expanded: vgpu resolves includes in the guest",
                        ),
                        Directive::Embed => {
                            self.error("embedding files is not supported: vgpu resolves includes in the guest")
                        }
                        Directive::Include {
                            name,
                            angled,
                            next,
                            once,
                        } => self.include(unit, &name, angled, next, once, depth),
                    }
                    self.line(next_line, &unit.name);
                }
            }
        }
        self.out.extend_from_slice(&unit.text[cursor..]);
    }

    /// Replaces one include directive.
    fn include(
        &mut self,
        includer: &Unit<'_>,
        name: &[u8],
        angled: bool,
        next: bool,
        import: bool,
        depth: usize,
    ) {
        let shown = sanitized(&String::from_utf8_lossy(name));
        if depth + 1 > MAX_DEPTH {
            return self.error("include nested too deeply");
        }
        let Some((found, text)) = self.find(includer, name, angled, next) else {
            return self.error(&format!("'{shown}' file not found"));
        };
        let key = found.key.clone().expect("found units have a key");
        if self.chain.contains(&key) {
            // On the current chain: its guard (or pragma) is already set,
            // or it would recurse without end.
            self.out.extend_from_slice(b"\n");
            return;
        }
        if self.out.len() + text.len() > self.search.limit {
            return self.error(&format!(
                "'{shown}' not included: the program's sources exceed vgpu's limit of {} bytes",
                self.search.limit
            ));
        }
        let once = import
            || scan(&text).iter().any(|e| {
                matches!(
                    e,
                    Edit::Directive {
                        what: Directive::PragmaOnce,
                        ..
                    }
                )
            });
        let guard = once.then(|| {
            let next = self.once.len();
            *self.once.entry(key.clone()).or_insert(next)
        });
        if let Some(n) = guard {
            self.out.extend_from_slice(
                format!("#ifndef __vgpu_pragma_once_{n}\n#define __vgpu_pragma_once_{n}\n")
                    .as_bytes(),
            );
        }
        self.line(1, &found.name);
        self.chain.push(key);
        let unit = Unit {
            text: &text,
            ..found
        };
        self.unit(&unit, depth + 1);
        self.chain.pop();
        if !self.out.ends_with(b"\n") && !self.out.ends_with(b"\r") {
            self.out.push(b'\n');
        }
        if guard.is_some() {
            self.out.extend_from_slice(b"#endif\n");
        }
    }

    /// The header `name` names, and its text.
    fn find(
        &self,
        includer: &Unit<'_>,
        name: &[u8],
        angled: bool,
        next: bool,
    ) -> Option<(Unit<'static>, Vec<u8>)> {
        let name_str = String::from_utf8_lossy(name).into_owned();
        let embedded = &self.search.embedded;
        let mut candidates = Vec::new();
        if let (false, Some(dir)) = (angled, &includer.embedded_dir) {
            if !dir.is_empty() {
                candidates.push(format!("{dir}/{name_str}"));
            }
        }
        candidates.push(name_str.clone());
        for candidate in &candidates {
            if let Some(i) = embedded.iter().position(|(n, _)| n == candidate) {
                let folder = candidate.rsplit_once('/').map_or("", |(d, _)| d);
                return Some((
                    Unit {
                        text: &[],
                        name: sanitized(candidate),
                        dir: None,
                        embedded_dir: Some(folder.to_string()),
                        key: Some(Key::Embedded(i)),
                        found_in: None,
                    },
                    embedded[i].1.clone(),
                ));
            }
        }
        let cwd = self.search.cwd.as_ref()?;
        let relative = path_of(name);
        let mut places: Vec<(Option<usize>, PathBuf)> = Vec::new();
        if relative.is_absolute() {
            places.push((None, PathBuf::new()));
        } else {
            if !angled && !next {
                if let Some(dir) = &includer.dir {
                    places.push((None, dir.clone()));
                }
            }
            let skip = match (next, includer.found_in) {
                (true, Some(i)) => i + 1,
                _ => 0,
            };
            for (i, dir) in self.search.dirs.iter().enumerate().skip(skip) {
                places.push((Some(i), cwd.join(dir)));
            }
            places.push((None, cwd.clone()));
        }
        for (index, dir) in places {
            let path = dir.join(&relative);
            if !path.is_file() {
                continue;
            }
            let Ok(text) = std::fs::read(&path) else {
                continue;
            };
            let canonical = path.canonicalize().unwrap_or_else(|_| path.clone());
            let folder = path.parent().map(Path::to_path_buf);
            return Some((
                Unit {
                    text: &[],
                    name: sanitized(&path.to_string_lossy()),
                    dir: folder,
                    embedded_dir: None,
                    key: Some(Key::File(canonical)),
                    found_in: index,
                },
                text,
            ));
        }
        None
    }

    fn error(&mut self, message: &str) {
        self.out.extend_from_slice(b"#error ");
        self.out.extend_from_slice(message.as_bytes());
        self.out.push(b'\n');
    }

    fn line(&mut self, line: usize, name: &str) {
        self.out
            .extend_from_slice(format!("#line {line} \"{name}\"\n").as_bytes());
    }
}

/// A name safe inside `#line "…"` and `#error` text: no quote, backslash,
/// introducer or trigraph that the guard or the lexer would read.
fn sanitized(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            '"' | '\'' | '\\' | '#' | '%' | '?' => '_',
            c if c.is_control() => '_',
            c => c,
        })
        .collect()
}

/// The text after translation phases 1 to 3, as the guard computes it,
/// with each byte's offset in the original.
struct Phase3 {
    text: Vec<u8>,
    origin: Vec<usize>,
    /// Whether each byte is inside a string or character literal.
    literal: Vec<bool>,
}

fn splice_length(text: &[u8]) -> Option<usize> {
    let mut at = if text.starts_with(b"\\") {
        1
    } else if text.starts_with(b"??/") {
        3
    } else {
        return None;
    };
    while matches!(text.get(at), Some(b' ' | b'\t' | 0x0b | 0x0c)) {
        at += 1;
    }
    match (text.get(at), text.get(at + 1)) {
        (Some(b'\r'), Some(b'\n')) => Some(at + 2),
        (Some(b'\r' | b'\n'), _) => Some(at + 1),
        _ => None,
    }
}

fn phase3(source: &[u8]) -> Phase3 {
    let mut joined = Vec::with_capacity(source.len());
    let mut joined_origin = Vec::with_capacity(source.len());
    let mut i = 0;
    while i < source.len() {
        match splice_length(&source[i..]) {
            Some(length) => i += length,
            None => {
                joined.push(source[i]);
                joined_origin.push(i);
                i += 1;
            }
        }
    }
    let mut out = Phase3 {
        text: Vec::with_capacity(joined.len()),
        origin: Vec::with_capacity(joined.len()),
        literal: Vec::with_capacity(joined.len()),
    };
    let push = |out: &mut Phase3, byte: u8, at: usize, literal: bool| {
        out.text.push(byte);
        out.origin.push(joined_origin[at]);
        out.literal.push(literal);
    };
    let mut i = 0;
    while i < joined.len() {
        if joined[i..].starts_with(b"/*") {
            push(&mut out, b' ', i, false);
            i = match joined[i + 2..].windows(2).position(|w| w == b"*/") {
                Some(end) => i + 2 + end + 2,
                None => joined.len(),
            };
        } else if joined[i..].starts_with(b"//") {
            push(&mut out, b' ', i, false);
            while i < joined.len() && joined[i] != b'\n' && joined[i] != b'\r' {
                i += 1;
            }
        } else if joined[i] == b'"' || joined[i] == b'\'' {
            let quote = joined[i];
            push(&mut out, quote, i, false);
            i += 1;
            while i < joined.len() && joined[i] != b'\n' && joined[i] != b'\r' {
                push(&mut out, joined[i], i, true);
                i += 1;
                match joined[i - 1] {
                    b'\\' if i < joined.len() => {
                        push(&mut out, joined[i], i, true);
                        i += 1;
                    }
                    byte if byte == quote => break,
                    _ => {}
                }
            }
        } else {
            push(&mut out, joined[i], i, false);
            i += 1;
        }
    }
    out
}

fn is_blank(b: u8) -> bool {
    b.is_ascii_whitespace() || b == 0x0b || b == 0x0c
}

fn introducer_length(text: &[u8]) -> usize {
    if text.starts_with(b"#") {
        1
    } else if text.starts_with(b"%:") {
        2
    } else if text.starts_with(b"??=") {
        3
    } else {
        0
    }
}

fn word(text: &[u8]) -> &[u8] {
    let n = text
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
        .count();
    &text[..n]
}

/// Where the physical line holding offset `at` starts.
fn line_start(source: &[u8], at: usize) -> usize {
    source[..at]
        .iter()
        .rposition(|&b| b == b'\n' || b == b'\r')
        .map_or(0, |p| p + 1)
}

/// Where the physical line holding offset `at` ends (after its newline),
/// and whether a newline ended it.
fn line_end(source: &[u8], at: usize) -> usize {
    match source[at..].iter().position(|&b| b == b'\n' || b == b'\r') {
        Some(p) if source[at + p] == b'\r' && source.get(at + p + 1) == Some(&b'\n') => at + p + 2,
        Some(p) => at + p + 1,
        None => source.len(),
    }
}

/// Physical lines in `text` (`\r\n`, `\r` and `\n` each end one).
fn count_lines(text: &[u8]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b'\r' if text.get(i + 1) == Some(&b'\n') => {
                n += 1;
                i += 2;
                continue;
            }
            b'\r' | b'\n' => n += 1,
            _ => {}
        }
        i += 1;
    }
    n
}

/// The edits `source` needs, in order.
fn scan(source: &[u8]) -> Vec<Edit> {
    let p3 = phase3(source);
    let text = &p3.text;
    let mut edits = Vec::new();
    let mut lines_before = 0;
    let mut counted_to = 0;
    // Logical lines of the phase-3 text.
    let mut ls = 0;
    while ls < text.len() {
        let le = text[ls..]
            .iter()
            .position(|&b| b == b'\n' || b == b'\r')
            .map_or(text.len(), |p| ls + p);
        let line = &text[ls..le];
        // Every introducer followed by a file-reading directive name.
        let mut directive = None;
        let first = line.iter().position(|&b| !is_blank(b));
        let mut i = 0;
        while i < line.len() {
            let n = introducer_length(&line[i..]);
            if n == 0 {
                i += 1;
                continue;
            }
            let mut at = i + n;
            while at < line.len() && is_blank(line[at]) {
                at += 1;
            }
            let name = word(&line[at..]);
            let reads_files = FILE_DIRECTIVES.contains(&name);
            if Some(i) == first && !p3.literal[ls + i] {
                let rest = &line[at + name.len()..];
                directive = match name {
                    b"include" | b"include_next" | b"import" => {
                        Some(include_of(rest, name == b"include_next", name == b"import"))
                    }
                    b"embed" => Some(Directive::Embed),
                    b"pragma" => {
                        let mut at = 0;
                        while at < rest.len() && is_blank(rest[at]) {
                            at += 1;
                        }
                        let once = word(&rest[at..]) == b"once"
                            && rest[at + 4..].iter().all(|&b| is_blank(b));
                        once.then_some(Directive::PragmaOnce)
                    }
                    _ => None,
                };
            } else if reads_files && p3.literal[ls + i] {
                edits.push(Edit::Escape {
                    at: p3.origin[ls + i],
                });
            }
            i += n;
        }
        if directive.is_none() {
            has_includes(&p3, ls, line, &mut edits);
        }
        if let Some(what) = directive {
            let start = line_start(source, p3.origin[ls]);
            let last = if le > ls {
                p3.origin[le - 1]
            } else {
                p3.origin[ls]
            };
            let end = line_end(source, last);
            lines_before += count_lines(&source[counted_to..end]);
            counted_to = end;
            // Escapes on this line are replaced with it.
            edits.retain(|e| !matches!(e, Edit::Escape { at, .. } if *at >= start));
            edits.push(Edit::Directive {
                start,
                end,
                next_line: lines_before + 1,
                what,
            });
        }
        ls = le;
        if ls < text.len() {
            ls += if text[ls] == b'\r' && text.get(ls + 1) == Some(&b'\n') {
                2
            } else {
                1
            };
        }
    }
    edits.sort_by_key(Edit::start);
    edits
}

/// `__has_include(…)` and `__has_include_next(…)` in a `#if` or `#elif`
/// line: the host's compiler would answer them from the host's files.
fn has_includes(p3: &Phase3, ls: usize, line: &[u8], edits: &mut Vec<Edit>) {
    let Some(first) = line.iter().position(|&b| !is_blank(b)) else {
        return;
    };
    let n = introducer_length(&line[first..]);
    if n == 0 || p3.literal[ls + first] {
        return;
    }
    let mut at = first + n;
    while at < line.len() && is_blank(line[at]) {
        at += 1;
    }
    if !matches!(word(&line[at..]), b"if" | b"elif") {
        return;
    }
    let mut i = at;
    while i < line.len() {
        let starts_word = i == 0 || !(line[i - 1].is_ascii_alphanumeric() || line[i - 1] == b'_');
        let name = word(&line[i..]);
        if !starts_word || !matches!(name, b"__has_include" | b"__has_include_next") {
            i += name.len().max(1);
            continue;
        }
        let mut j = i + name.len();
        while j < line.len() && is_blank(line[j]) {
            j += 1;
        }
        if line.get(j) != Some(&b'(') {
            i = j;
            continue;
        }
        j += 1;
        while j < line.len() && is_blank(line[j]) {
            j += 1;
        }
        let (close, angled) = match line.get(j) {
            Some(b'"') => (b'"', false),
            Some(b'<') => (b'>', true),
            _ => {
                i = j;
                continue;
            }
        };
        let Some(len) = line[j + 1..].iter().position(|&b| b == close) else {
            return;
        };
        let header = line[j + 1..j + 1 + len].to_vec();
        let mut k = j + 1 + len + 1;
        while k < line.len() && is_blank(line[k]) {
            k += 1;
        }
        if line.get(k) != Some(&b')') {
            i = k;
            continue;
        }
        edits.push(Edit::HasInclude {
            start: p3.origin[ls + i],
            end: p3.origin[ls + k] + 1,
            name: header,
            angled,
        });
        i = k + 1;
    }
}

/// The directive after `include`, `include_next` or `import`.
fn include_of(rest: &[u8], next: bool, once: bool) -> Directive {
    let mut at = 0;
    while at < rest.len() && is_blank(rest[at]) {
        at += 1;
    }
    let rest = &rest[at..];
    let (close, angled) = match rest.first() {
        Some(b'"') => (b'"', false),
        Some(b'<') => (b'>', true),
        _ => return Directive::Computed,
    };
    match rest[1..].iter().position(|&b| b == close) {
        Some(n) if n > 0 => Directive::Include {
            name: rest[1..1 + n].to_vec(),
            angled,
            next,
            once,
        },
        _ => Directive::Computed,
    }
}

#[cfg(test)]
mod tests;
