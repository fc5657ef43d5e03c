//! The experiment's line charts (per-flow goodput, cwnd and srtt over
//! time; a matrix's comparisons): stacked panels sharing the time axis,
//! drawn with plotters as the plot module draws the link's, and rasterised
//! by its [`crate::plot::draw::png`].

use std::path::Path;

use plotters::prelude::*;

use crate::plot::draw::PALETTE;
use crate::plot::PlotError;

const WIDTH: u32 = 960;
const PANEL_HEIGHT: u32 = 260;
const FONT: &str = "sans-serif";

/// One named line: (name, points (s, value)).
pub type Line = (String, Vec<(f64, f64)>);

/// One panel: its y axis's name and its lines.
pub struct Panel {
    pub y_label: String,
    pub lines: Vec<Line>,
}

/// The panels as an SVG document, `title` above, `x_max` s wide.
pub fn svg(title: &str, panels: &[Panel], x_max: f64) -> Result<String, PlotError> {
    let mut out = String::new();
    {
        let height = 40 + PANEL_HEIGHT * panels.len().max(1) as u32;
        let root = SVGBackend::with_string(&mut out, (WIDTH, height)).into_drawing_area();
        draw(&root, title, panels, x_max).map_err(|e| PlotError::draw(title, &*e))?;
        root.present().map_err(|e| PlotError::draw(title, &e))?;
    }
    Ok(out)
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    panels: &[Panel],
    x_max: f64,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let root = root.titled(title, (FONT, 22))?;
    let areas = root.split_evenly((panels.len().max(1), 1));
    for (k, (area, panel)) in areas.iter().zip(panels).enumerate() {
        let y_max = panel
            .lines
            .iter()
            .flat_map(|(_, pts)| pts.iter().map(|p| p.1))
            .filter(|v| v.is_finite())
            .fold(0.0f64, f64::max);
        // Room above the data for the legend.
        let y_top = if y_max > 0.0 { y_max * 1.35 } else { 1.0 };
        let last = k + 1 == panels.len();
        let mut chart = ChartBuilder::on(area)
            .margin(8)
            .x_label_area_size(if last { 40 } else { 22 })
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..x_max.max(1e-3), 0.0..y_top)?;
        let mut mesh = chart.configure_mesh();
        mesh.y_desc(panel.y_label.as_str())
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 14));
        if last {
            mesh.x_desc("time (s)");
        }
        mesh.draw()?;
        for (i, (name, pts)) in panel.lines.iter().enumerate() {
            let colour = PALETTE[i % PALETTE.len()];
            let style = ShapeStyle::from(&colour).stroke_width(2);
            chart
                .draw_series(LineSeries::new(
                    pts.iter().copied().filter(|p| p.1.is_finite()),
                    style,
                ))?
                .label(name.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], style));
        }
        if !panel.lines.is_empty() {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.3))
                .label_font((FONT, 13))
                .draw()?;
        }
    }
    Ok(())
}

/// Writes the chart as `stem`.svg and, with `png`, `stem`.png (if this
/// system has a font: its error is returned, the SVG is written anyway).
pub fn write(
    stem: &Path,
    title: &str,
    panels: &[Panel],
    x_max: f64,
    png: bool,
) -> Result<(), PlotError> {
    let svg = svg(title, panels, x_max)?;
    let with = |ext: &str| stem.with_extension(ext);
    std::fs::write(with("svg"), &svg).map_err(|source| PlotError::Write {
        path: with("svg"),
        source,
    })?;
    if !png {
        return Ok(());
    }
    let png = crate::plot::draw::png(&svg)?;
    std::fs::write(with("png"), png).map_err(|source| PlotError::Write {
        path: with("png"),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_is_drawn_and_named() {
        let panels = [
            Panel {
                y_label: "goodput (Mbit/s)".into(),
                lines: vec![
                    ("flow 0".into(), vec![(0.0, 1.0), (1.0, 2.0)]),
                    ("flow 1".into(), vec![(0.5, 3.0), (1.0, f64::NAN)]),
                ],
            },
            Panel {
                y_label: "cwnd".into(),
                lines: vec![],
            },
        ];
        let s = svg("t", &panels, 2.0).unwrap();
        let doc = roxmltree::Document::parse(&s).unwrap();
        let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).collect();
        for want in [
            "flow 0",
            "flow 1",
            "goodput (Mbit/s)",
            "cwnd",
            "time (s)",
            "t",
        ] {
            assert!(
                texts.iter().any(|t| t.trim() == want),
                "{want} missing: {texts:?}"
            );
        }
        let lines = doc
            .descendants()
            .filter(|n| n.has_tag_name("polyline"))
            .count();
        assert!(lines >= 2, "{lines} polylines");
        // The lines take the plot module's palette in order, as its drop
        // reasons do.
        let strokes: Vec<String> = doc
            .descendants()
            .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke-width") == Some("2"))
            .filter_map(|n| n.attribute("stroke"))
            .map(str::to_ascii_lowercase)
            .collect();
        for (i, c) in PALETTE.iter().take(2).enumerate() {
            let want = format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2);
            assert_eq!(strokes.get(i), Some(&want), "flow {i}: {strokes:?}");
        }
    }
}
