//! PNG plots (plotters' bitmap backend; text through ab_glyph with a font
//! file, so neither fontconfig nor freetype is needed).

use std::error::Error as StdError;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::FontStyle;

use super::table::bytes;
use crate::error::{Error, Result};
use crate::record::{param_f64, Record};

type DynResult = std::result::Result<(), Box<dyn StdError>>;
type Draw = fn(&[Record], &Path) -> DynResult;

/// The font used for every label: `VGPU_BENCH_FONT`, else DejaVu Sans
/// (Debian's fonts-dejavu-core).
const DEFAULT_FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

const NATIVE: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
const VGPU: RGBColor = RGBColor(0xd6, 0x27, 0x28);
const NATIVE_READ: RGBColor = RGBColor(0x2c, 0xa0, 0x2c);
const VGPU_READ: RGBColor = RGBColor(0xff, 0x7f, 0x0e);

fn register_font() -> std::result::Result<(), String> {
    static DONE: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        let path = std::env::var_os("VGPU_BENCH_FONT")
            .map_or_else(|| PathBuf::from(DEFAULT_FONT), PathBuf::from);
        let bytes = std::fs::read(&path).map_err(|e| {
            format!(
                "font {}: {e} (install fonts-dejavu-core or set VGPU_BENCH_FONT)",
                path.display()
            )
        })?;
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
            .map_err(|_| format!("font {}: not a usable TrueType font", path.display()))
    })
    .clone()
}

/// Draws every plot the records allow into `dir`; the files written.
pub fn draw_all(records: &[Record], dir: &Path) -> Result<Vec<PathBuf>> {
    register_font().map_err(|e| Error::Plot("plots".into(), e))?;
    std::fs::create_dir_all(dir).map_err(crate::error::io("create", dir))?;
    let plots: [(&str, Draw, &str); 3] = [
        ("bandwidth.png", bandwidth, "bandwidth_read"),
        ("workloads.png", workloads, "workload_time"),
        ("queue_depth.png", queue_depth, "queue_depth_runtime"),
    ];
    let mut written = Vec::new();
    for (file, draw, needs) in plots {
        if !records.iter().any(|r| r.benchmark == needs) {
            continue;
        }
        let path = dir.join(file);
        draw(records, &path).map_err(|e| Error::Plot(path.display().to_string(), e.to_string()))?;
        written.push(path);
    }
    Ok(written)
}

fn of<'a>(records: &'a [Record], name: &str) -> Vec<&'a Record> {
    records.iter().filter(|r| r.benchmark == name).collect()
}

fn bandwidth(records: &[Record], path: &Path) -> DynResult {
    let root = BitMapBackend::new(path, (960, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let series = [
        ("bandwidth_write", false, "write, native", NATIVE),
        ("bandwidth_write", true, "write, vgpu", VGPU),
        ("bandwidth_read", false, "read, native", NATIVE_READ),
        ("bandwidth_read", true, "read, vgpu", VGPU_READ),
    ];
    let points = |name: &str, vgpu: bool| -> Vec<(f64, f64, f64, f64)> {
        of(records, name)
            .iter()
            .filter_map(|r| {
                let s = if vgpu { r.vgpu } else { r.native? };
                Some((
                    param_f64(&r.parameters, "bytes")?.log2(),
                    s.min,
                    s.median,
                    s.max,
                ))
            })
            .collect()
    };
    let all: Vec<(f64, f64, f64, f64)> = series.iter().flat_map(|s| points(s.0, s.1)).collect();
    let (x0, x1) = all
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let ymax = all.iter().fold(0.0f64, |m, p| m.max(p.3)) * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Blocking transfer bandwidth (median, min–max)",
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x0 - 0.5..x1 + 0.5, 0.0..ymax.max(0.1))?;
    chart
        .configure_mesh()
        .x_desc("transfer size")
        .y_desc("GB/s")
        .x_labels(((x1 - x0) / 2.0) as usize + 1)
        .x_label_formatter(&|x| bytes(2f64.powf(x.round())))
        .draw()?;
    for (name, vgpu, label, color) in series {
        let pts = points(name, vgpu);
        chart
            .draw_series(LineSeries::new(
                pts.iter().map(|p| (p.0, p.2)),
                color.stroke_width(2),
            ))?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart.draw_series(
            pts.iter()
                .map(|p| ErrorBar::new_vertical(p.0, p.1, p.2, p.3, color.filled(), 6)),
        )?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

fn workload_label(r: &Record) -> String {
    let name = r
        .parameters
        .get("workload")
        .and_then(|v| v.as_str())
        .unwrap_or("?");
    let size: Vec<String> = ["n", "bodies", "query", "database"]
        .iter()
        .filter_map(|k| param_f64(&r.parameters, k).map(|v| format!("{v}")))
        .collect();
    format!("{name} {}", size.join("×"))
}

fn workloads(records: &[Record], path: &Path) -> DynResult {
    // (record, native median, ratio): the plot is of vgpu against native.
    let rs: Vec<(&Record, f64, f64)> = of(records, "workload_time")
        .into_iter()
        .filter_map(|r| Some((r, r.native?.median, r.ratio?)))
        .collect();
    let n = rs.len();
    let height = 120 + 36 * n as u32;
    let root = BitMapBackend::new(path, (960, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let whisker =
        |&(r, native, _): &(&Record, f64, f64)| (r.vgpu.min / native, r.vgpu.max / native);
    let xmax = rs.iter().fold(1.2f64, |m, r| m.max(whisker(r).1 * 1.05));
    let labels: Vec<String> = rs.iter().map(|r| workload_label(r.0)).collect();
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "VOCL workloads: vgpu time / native time (1 = native speed)",
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(200)
        .build_cartesian_2d(0.0..xmax, (0..n.saturating_sub(1)).into_segmented())?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc("vgpu / native (bar: median; whisker: vgpu min–max over native median)")
        .y_labels(n)
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                labels.get(*i).cloned().unwrap_or_default()
            }
            SegmentValue::Last => String::new(),
        })
        .draw()?;
    chart.draw_series(rs.iter().enumerate().map(|(i, r)| {
        let mut bar = Rectangle::new(
            [
                (0.0, SegmentValue::Exact(i)),
                (r.2, SegmentValue::Exact(i + 1)),
            ],
            VGPU.mix(0.7).filled(),
        );
        bar.set_margin(6, 6, 0, 0);
        bar
    }))?;
    chart.draw_series(rs.iter().enumerate().map(|(i, r)| {
        let (lo, hi) = whisker(r);
        ErrorBar::new_horizontal(SegmentValue::CenterOf(i), lo, r.2, hi, BLACK.filled(), 8)
    }))?;
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(1.0, SegmentValue::Exact(0)), (1.0, SegmentValue::Last)],
        NATIVE.stroke_width(2),
    )))?;
    root.present()?;
    Ok(())
}

fn depth_name(depth: f64) -> String {
    if depth == 0.0 {
        "unbounded".into()
    } else {
        format!("{depth}")
    }
}

fn queue_depth(records: &[Record], path: &Path) -> DynResult {
    let root = BitMapBackend::new(path, (1100, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(550);
    let panels = [
        (
            left,
            "queue_depth_runtime",
            "workload time (s)",
            "Run time of smith_waterman",
        ),
        (
            right,
            "queue_depth_drain",
            "drain (ms)",
            "Drain after a burst (clFinish)",
        ),
    ];
    for (area, name, y_desc, caption) in panels {
        let rs = of(records, name);
        let n = rs.len();
        let labels: Vec<String> = rs
            .iter()
            .map(|r| param_f64(&r.parameters, "depth").map_or("?".into(), depth_name))
            .collect();
        let native = rs.first().and_then(|r| r.native).map_or(0.0, |n| n.median);
        let ymax = rs.iter().fold(native, |m, r| m.max(r.vgpu.max)) * 1.15;
        let mut chart = ChartBuilder::on(&area)
            .caption(caption, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(
                (0..n.saturating_sub(1)).into_segmented(),
                0.0..ymax.max(1e-3),
            )?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc("--queue-depth")
            .y_desc(y_desc)
            .x_labels(n)
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                    labels.get(*i).cloned().unwrap_or_default()
                }
                SegmentValue::Last => String::new(),
            })
            .draw()?;
        chart
            .draw_series(rs.iter().enumerate().map(|(i, r)| {
                let mut bar = Rectangle::new(
                    [
                        (SegmentValue::Exact(i), 0.0),
                        (SegmentValue::Exact(i + 1), r.vgpu.median),
                    ],
                    VGPU.mix(0.7).filled(),
                );
                bar.set_margin(0, 0, 8, 8);
                bar
            }))?
            .label("vgpu (median, min–max)")
            .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 15, y + 5)], VGPU.mix(0.7).filled()));
        chart.draw_series(rs.iter().enumerate().map(|(i, r)| {
            ErrorBar::new_vertical(
                SegmentValue::CenterOf(i),
                r.vgpu.min,
                r.vgpu.median,
                r.vgpu.max,
                BLACK.filled(),
                8,
            )
        }))?;
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![
                    (SegmentValue::Exact(0), native),
                    (SegmentValue::Last, native),
                ],
                NATIVE.stroke_width(2),
            )))?
            .label("native (no bound)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], NATIVE.stroke_width(2)));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}
