//! A plain table, printed aligned to stdout or as Markdown.

use crate::stats::Summary;

#[derive(Debug, Clone)]
pub struct Table {
    pub title: String,
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(title: impl Into<String>, headers: &[&str]) -> Table {
        Table {
            title: title.into(),
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Columns padded to their widest cell.
    pub fn text(&self) -> String {
        let widths: Vec<usize> = (0..self.headers.len())
            .map(|c| {
                std::iter::once(&self.headers)
                    .chain(&self.rows)
                    .map(|r| r.get(c).map_or(0, |s| s.chars().count()))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: &[String]| {
            let padded: Vec<String> = widths
                .iter()
                .enumerate()
                .map(|(c, w)| {
                    let cell = cells.get(c).map_or("", String::as_str);
                    format!("{cell}{}", " ".repeat(w - cell.chars().count().min(*w)))
                })
                .collect();
            padded.join("  ").trim_end().to_string()
        };
        let mut out = format!("== {}\n{}\n", self.title, line(&self.headers));
        for row in &self.rows {
            out.push_str(&line(row));
            out.push('\n');
        }
        out
    }

    /// A Markdown table under a level-3 heading.
    pub fn markdown(&self) -> String {
        let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
        let mut out = format!("### {}\n\n", self.title);
        out.push_str(&line(&self.headers));
        out.push_str(&line(&vec!["---".to_string(); self.headers.len()]));
        for row in &self.rows {
            out.push_str(&line(row));
        }
        out
    }
}

/// Three significant digits, without exponent for everyday magnitudes.
pub fn num(x: f64) -> String {
    if !x.is_finite() {
        return "–".into();
    }
    let a = x.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e6 {
        format!("{:.3e}", x)
    } else if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else if a >= 0.1 {
        format!("{x:.3}")
    } else if a >= 0.01 {
        format!("{x:.4}")
    } else if a >= 0.001 {
        format!("{x:.5}")
    } else {
        format!("{x:.2e}")
    }
}

/// `median (min–max)`.
pub fn summary(s: &Summary) -> String {
    format!("{} ({}–{})", num(s.median), num(s.min), num(s.max))
}

/// [`summary`], or `–` where there is no figure (no native counterpart).
pub fn maybe_summary(s: Option<&Summary>) -> String {
    s.map_or_else(|| "–".into(), summary)
}

/// `1.234×`.
pub fn ratio(r: f64) -> String {
    format!("{r:.3}×")
}

/// [`ratio`], or `–` where there is none.
pub fn maybe_ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "–".into(), ratio)
}

/// `+1.2 %` of `part` against `whole`.
pub fn percent(value: f64, reference: f64) -> String {
    format!("{:+.1} %", (value / reference - 1.0) * 100.0)
}

/// 4 KiB, 1 MiB, 256 MiB.
pub fn bytes(n: f64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = n;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{} {}", num(v), UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_three_significant_digits() {
        assert_eq!(num(1234.4), "1234");
        assert_eq!(num(12.345), "12.3");
        assert_eq!(num(1.2345), "1.23");
        assert_eq!(num(0.012345), "0.0123");
        assert_eq!(bytes(4096.0), "4.00 KiB");
        assert_eq!(bytes(256.0 * 1024.0 * 1024.0), "256 MiB");
    }

    #[test]
    fn text_table_pads_columns() {
        let mut t = Table::new("t", &["a", "long header"]);
        t.row(vec!["wide cell".into(), "x".into()]);
        assert_eq!(t.text(), "== t\na          long header\nwide cell  x\n");
    }
}
