//! The SVG chart of a comparison: throughput and p99 latency per workload, one bar per server.
//!
//! plotters' SVG backend writes text as `<text>` elements (the viewer picks the font), so no
//! font files or fontconfig are needed at build or run time.

use std::error::Error;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

const COLORS: [RGBColor; 6] = [
    RGBColor(0xd9, 0x5f, 0x02),
    RGBColor(0x1b, 0x9e, 0x77),
    RGBColor(0x75, 0x70, 0xb3),
    RGBColor(0xe7, 0x29, 0x8a),
    RGBColor(0x66, 0xa6, 0x1e),
    RGBColor(0xe6, 0xab, 0x02),
];

/// (workload, [(server, ops/s, p99 ms)]) from a compare report.
type Bars = Vec<(String, Vec<(String, f64, f64)>)>;

fn bars(doc: &serde_json::Value) -> Bars {
    let empty = Vec::new();
    doc["workloads"]
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .map(|w| {
            let servers = w["servers"].as_array().unwrap_or(&empty);
            (
                w["workload"].as_str().unwrap_or("?").to_string(),
                servers
                    .iter()
                    .map(|s| {
                        (
                            s["server"].as_str().unwrap_or("?").to_string(),
                            s["ops_per_sec"].as_f64().unwrap_or(0.0),
                            s["p99_ms"].as_f64().unwrap_or(0.0),
                        )
                    })
                    .collect(),
            )
        })
        .collect()
}

/// Writes the chart of compare report `doc` to `path`.
pub fn write(path: &Path, title: &str, doc: &serde_json::Value) -> Result<(), Box<dyn Error>> {
    let data = bars(doc);
    let root = SVGBackend::new(path, (1100, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(
        &format!("kvbench compare --preset {title}"),
        ("sans-serif", 22),
    )?;
    let (left, right) = root.split_horizontally(550);
    panel(&left, "throughput, ops/s (higher is better)", &data, |b| {
        b.1
    })?;
    panel(&right, "p99 latency, ms (lower is better)", &data, |b| b.2)?;
    root.present()?;
    Ok(())
}

fn panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    caption: &str,
    data: &Bars,
    value: fn(&(String, f64, f64)) -> f64,
) -> Result<(), Box<dyn Error>> {
    let n = data.len().max(1);
    let top = data
        .iter()
        .flat_map(|w| w.1.iter().map(value))
        .fold(0.0, f64::max)
        .max(1e-9)
        * 1.3;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..n as f64, 0f64..top)?;
    let names: Vec<&str> = data.iter().map(|w| w.0.as_str()).collect();
    let label = |x: &f64| {
        let i = x.floor();
        if (x - i - 0.5).abs() < 1e-6 {
            names
                .get(i as usize)
                .map_or(String::new(), |s| s.to_string())
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(2 * n + 1)
        .x_label_formatter(&label)
        .y_label_formatter(&|y| {
            if top >= 1e4 {
                format!("{:.0}k", y / 1e3)
            } else {
                format!("{y:.2}")
            }
        })
        .draw()?;
    let servers: Vec<String> = data
        .first()
        .map(|w| w.1.iter().map(|s| s.0.clone()).collect())
        .unwrap_or_default();
    let width = 0.8 / servers.len().max(1) as f64;
    for (k, server) in servers.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        let rects = data.iter().enumerate().filter_map(move |(i, w)| {
            let v = w.1.get(k).map(value)?;
            let x0 = i as f64 + 0.1 + k as f64 * width;
            Some(Rectangle::new(
                [(x0, 0.0), (x0 + width * 0.9, v)],
                color.filled(),
            ))
        });
        chart
            .draw_series(rects)?
            .label(server.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .draw()?;
    Ok(())
}
