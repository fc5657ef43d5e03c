//! Drawing a [`Series`] with plotters: stacked panels sharing the time
//! axis, as SVG text; PNG is that SVG rasterised by resvg.
//!
//! Each per-window value is drawn as a step over its window (the mean over
//! that window, not a point sample), so a plot never suggests detail finer
//! than `--window`. Units follow the data (bit/s up to Gbit/s, bytes up to
//! MB), and every axis says its unit.

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use super::series::Series;
use super::{Capacity, Panel, PlotError};

/// The picture's width, and each panel's height, in pixels.
const WIDTH: u32 = 960;
const PANEL_HEIGHT: u32 = 280;
const TITLE_HEIGHT: u32 = 40;
const FONT: &str = "sans-serif";
/// Room for the queue panel's bytes axis, on the right.
const RIGHT_AXIS: u32 = 78;

const INGRESS: RGBColor = RGBColor(0xe6, 0x9f, 0x00);
const DELIVERED: RGBColor = RGBColor(0x00, 0x5a, 0xb5);
const CAPACITY: RGBColor = RGBColor(0x33, 0x33, 0x33);
const PACKET_DELAY: RGBColor = RGBColor(0x56, 0xb4, 0xe9);
const P95: RGBColor = RGBColor(0xd5, 0x5e, 0x00);
const BYTES: RGBColor = RGBColor(0x00, 0x9e, 0x73);
/// Okabe and Ito's palette, whose colours stay apart for colour-blind
/// readers: drop reasons take them in the order they were first seen, the
/// experiment's lines ([`super::panels`]) in theirs.
pub(crate) const PALETTE: [RGBColor; 7] = [
    RGBColor(0xd5, 0x5e, 0x00),
    RGBColor(0x00, 0x72, 0xb2),
    RGBColor(0x00, 0x9e, 0x73),
    RGBColor(0xcc, 0x79, 0xa7),
    RGBColor(0xe6, 0x9f, 0x00),
    RGBColor(0x56, 0xb4, 0xe9),
    RGBColor(0x00, 0x00, 0x00),
];

/// What to draw.
pub struct Plot<'a> {
    pub series: &'a Series,
    pub capacity: &'a Capacity,
    pub panels: &'a [Panel],
    pub title: Option<&'a str>,
    /// Says which packets the plot is of, in the panels' legends.
    pub pipe: Option<u32>,
}

/// The plot as an SVG document.
pub fn svg(plot: &Plot) -> Result<String, PlotError> {
    let mut out = String::new();
    {
        let title = if plot.title.is_some() {
            TITLE_HEIGHT
        } else {
            0
        };
        let height = title + PANEL_HEIGHT * plot.panels.len().max(1) as u32;
        let root = SVGBackend::with_string(&mut out, (WIDTH, height)).into_drawing_area();
        draw(&root, plot).map_err(|e| PlotError::draw("the plot", &*e))?;
        root.present()
            .map_err(|e| PlotError::draw("the plot", &e))?;
    }
    Ok(out)
}

type Result2<T> = Result<T, Box<dyn std::error::Error>>;

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, plot: &Plot) -> Result2<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let root = match plot.title {
        Some(t) => root.titled(t, (FONT, 22))?,
        None => root.clone(),
    };
    let areas = root.split_evenly((plot.panels.len().max(1), 1));
    let s = plot.series;
    let x_max = (s.span as f64 / 1e9).max(s.window as f64 / 1e9);
    for (k, (area, panel)) in areas.iter().zip(plot.panels).enumerate() {
        let last = k + 1 == plot.panels.len();
        let ctx = PanelArea {
            area,
            s,
            x_max,
            last,
        };
        match panel {
            Panel::Throughput => ctx.throughput(plot.capacity, plot.pipe)?,
            Panel::Delay => ctx.delay(plot.pipe)?,
            Panel::Queue => ctx.queue(plot.pipe)?,
            Panel::Drops => ctx.drops(plot.pipe)?,
        }
    }
    Ok(())
}

/// One panel's drawing area and what every panel shares.
struct PanelArea<'a, DB: DrawingBackend> {
    area: &'a DrawingArea<DB, Shift>,
    s: &'a Series,
    x_max: f64,
    /// The bottom panel: the time axis is named there.
    last: bool,
}

/// A scale for an axis: the divisor and the unit's name.
fn scale(max: f64, units: &[(f64, &'static str)]) -> (f64, &'static str) {
    units
        .iter()
        .rev()
        .find(|(d, _)| max >= *d)
        .or(units.first())
        .copied()
        .unwrap_or((1.0, ""))
}

const RATE_UNITS: [(f64, &str); 4] = [
    (1.0, "bit/s"),
    (1e3, "kbit/s"),
    (1e6, "Mbit/s"),
    (1e9, "Gbit/s"),
];
const BYTE_UNITS: [(f64, &str); 3] = [(1.0, "bytes"), (1e3, "kB"), (1e6, "MB")];

/// How far above the data the y axis goes, for the legend in the top
/// corner: its `entries` lines (about 20 px each, and a border) over the
/// panel's plotting height.
fn headroom(entries: usize, last: bool) -> f64 {
    let plot = f64::from(PANEL_HEIGHT) - if last { 60.0 } else { 42.0 };
    let legend = entries as f64 * 20.0 + 24.0;
    1.0 / (1.0 - (legend / plot).min(0.5))
}

/// A tick label: no more digits than it needs (0, 0.5, 12.25, 100).
fn tick(v: &f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// A rate with a unit that suits it, for legends and the summary.
pub fn rate(bps: f64) -> String {
    let (d, unit) = scale(bps, &RATE_UNITS);
    format!("{:.3} {unit}", bps / d)
}

/// The step line of per-window values: each value held over its window.
fn steps(s: &Series, values: impl Iterator<Item = (usize, f64)>) -> Vec<(f64, f64)> {
    let w = s.window as f64 / 1e9;
    let mut points = Vec::new();
    for (k, v) in values {
        let from = k as f64 * w;
        let to = from + s.window_len(k) as f64 / 1e9;
        points.push((from, v));
        points.push((to, v));
    }
    points
}

fn which(pipe: Option<u32>) -> String {
    match pipe {
        Some(n) => format!("pipe {n}"),
        None => "all packets".to_string(),
    }
}

impl<DB: DrawingBackend> PanelArea<'_, DB>
where
    DB::ErrorType: 'static,
{
    /// The panel's chart, its mesh not drawn yet ([`Self::mesh`]); room
    /// above the data for a legend of `entries` lines.
    fn chart(
        &self,
        y_max: f64,
        entries: usize,
        right: bool,
    ) -> Result2<ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>> {
        let mut b = ChartBuilder::on(self.area);
        // Panels without a right axis keep its room empty, so that every
        // panel's time axis spans the same pixels.
        b.margin_top(12)
            .margin_right(if right { 8 } else { 8 + RIGHT_AXIS })
            .margin_left(8)
            .x_label_area_size(if self.last { 48 } else { 30 })
            .y_label_area_size(78);
        if right {
            b.right_y_label_area_size(RIGHT_AXIS);
        }
        let y_max = y_max.max(1e-9) * headroom(entries, self.last);
        Ok(b.build_cartesian_2d(0.0..self.x_max, 0.0..y_max)?)
    }

    /// Axes, ticks and grid of the primary coordinates.
    fn mesh<'c>(
        &self,
        chart: &mut ChartContext<'c, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
        y_desc: &str,
    ) -> Result2<()>
    where
        DB: 'c,
    {
        let mut mesh = chart.configure_mesh();
        mesh.y_desc(y_desc)
            .axis_desc_style((FONT, 16))
            .label_style((FONT, 14))
            .x_label_formatter(&tick)
            .y_label_formatter(&tick)
            .bold_line_style(RGBColor(0xdd, 0xdd, 0xdd))
            .light_line_style(TRANSPARENT)
            .x_labels(12)
            .y_labels(6);
        if self.last {
            mesh.x_desc("time (s)");
        }
        mesh.draw()?;
        Ok(())
    }

    fn legend<'c>(
        chart: &mut ChartContext<'c, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    ) -> Result2<()>
    where
        DB: 'c,
    {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(0x99, 0x99, 0x99))
            .label_font((FONT, 14))
            .draw()?;
        Ok(())
    }

    fn throughput(&self, capacity: &Capacity, pipe: Option<u32>) -> Result2<()> {
        let s = self.s;
        let bps = |bits: u64, k: usize| bits as f64 * 1e9 / s.window_len(k) as f64;
        let ingress: Vec<f64> = (0..s.windows.len())
            .map(|k| bps(s.windows[k].ingress_bits, k))
            .collect();
        let delivered: Vec<f64> = (0..s.windows.len())
            .map(|k| bps(s.windows[k].delivered_bits, k))
            .collect();
        let cap: Option<Vec<f64>> = match capacity {
            Capacity::Rate { bps, .. } => Some(vec![*bps as f64; s.windows.len()]),
            Capacity::Trace { bits, .. } => Some(
                (0..s.windows.len())
                    .map(|k| bps(bits.get(k).copied().unwrap_or(0), k))
                    .collect(),
            ),
            Capacity::Unknown(_) => None,
        };
        let max = ingress
            .iter()
            .chain(&delivered)
            .chain(cap.iter().flatten())
            .fold(0.0f64, |a, b| a.max(*b));
        let (d, unit) = scale(max, &RATE_UNITS);
        let mut chart = self.chart(max / d, 3, false)?;
        self.mesh(&mut chart, &format!("throughput ({unit})"))?;
        let scaled = |v: &[f64]| steps(s, v.iter().map(|x| x / d).enumerate());
        match &cap {
            // As mahimahi draws it: the capacity as a shaded area, which
            // stays visible where the delivered line runs along its edge.
            Some(c) => {
                let fill = CAPACITY.mix(0.13);
                let edge = CAPACITY.mix(0.6).stroke_width(1);
                chart
                    .draw_series(AreaSeries::new(scaled(c), 0.0, fill).border_style(edge))?
                    .label(format!("capacity ({})", capacity.describe()))
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 6), (x + 22, y + 6)], fill.filled())
                    });
            }
            None => {
                chart
                    .draw_series(std::iter::empty::<EmptyElement<(f64, f64), DB>>())?
                    .label(format!("capacity: {}", capacity.describe()))
                    .legend(|(x, y)| EmptyElement::at((x, y)));
            }
        }
        let ingress_style = INGRESS.stroke_width(2);
        chart
            .draw_series(LineSeries::new(scaled(&ingress), ingress_style))?
            .label(format!("ingress ({})", which(pipe)))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], ingress_style));
        let delivered_style = DELIVERED.stroke_width(2);
        chart
            .draw_series(LineSeries::new(scaled(&delivered), delivered_style))?
            .label(format!("delivered, mean {}", rate(self.s.mean_bps())))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], delivered_style));
        Self::legend(&mut chart)
    }

    fn delay(&self, pipe: Option<u32>) -> Result2<()> {
        let s = self.s;
        let ms = |ns: u64| ns as f64 / 1e6;
        let windows = s.window_delays();
        let max = windows
            .iter()
            .flatten()
            .map(|w| ms(w.max))
            .fold(0.0f64, f64::max);
        let what = match pipe {
            Some(n) => format!("delay in pipe {n} (ms)"),
            None => "delay (ms)".to_string(),
        };
        let mut chart = self.chart(max, 2, false)?;
        self.mesh(&mut chart, &what)?;
        let light = PACKET_DELAY.stroke_width(1);
        if s.points_dropped {
            // Too many packets to draw one by one: each window's range.
            let w = s.window as f64 / 1e9;
            let band = PACKET_DELAY.mix(0.45).filled();
            chart
                .draw_series(windows.iter().enumerate().filter_map(|(k, d)| {
                    let d = (*d)?;
                    let x = k as f64 * w;
                    let to = x + s.window_len(k) as f64 / 1e9;
                    Some(Rectangle::new([(x, ms(d.min)), (to, ms(d.max))], band))
                }))?
                .label("per-packet delay (min to max in each window)")
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 22, y + 5)], band));
        } else {
            chart
                .draw_series(LineSeries::new(
                    s.points.iter().map(|(t, d)| (*t as f64 / 1e9, ms(*d))),
                    light,
                ))?
                .label("per-packet delay")
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], light));
        }
        let p95 = P95.stroke_width(2);
        // A window with nothing delivered breaks the line rather than
        // joining its neighbours across it.
        let mut runs: Vec<Vec<(f64, f64)>> = Vec::new();
        let mut run = Vec::new();
        for (k, d) in windows.iter().enumerate() {
            match d {
                Some(d) => run.extend(steps(s, std::iter::once((k, ms(d.p95))))),
                None if !run.is_empty() => runs.push(std::mem::take(&mut run)),
                None => {}
            }
        }
        if !run.is_empty() {
            runs.push(run);
        }
        let mut first = true;
        for r in runs {
            let drawn = chart.draw_series(LineSeries::new(r, p95))?;
            if std::mem::take(&mut first) {
                drawn
                    .label("95th percentile per window")
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], p95));
            }
        }
        Self::legend(&mut chart)
    }

    fn queue(&self, pipe: Option<u32>) -> Result2<()> {
        let s = self.s;
        let levels: Vec<(f64, f64)> = (0..s.windows.len()).map(|k| s.mean_inside(k)).collect();
        let max_p = levels.iter().map(|l| l.0).fold(0.0f64, f64::max);
        let max_b = levels.iter().map(|l| l.1).fold(0.0f64, f64::max);
        let (d, unit) = scale(max_b, &BYTE_UNITS);
        let inside = match pipe {
            Some(n) => format!("in pipe {n}"),
            None => "inside".to_string(),
        };
        let room = headroom(2, self.last);
        let mut chart = self
            .chart(max_p, 2, true)?
            .set_secondary_coord(0.0..self.x_max, 0.0..(max_b / d).max(1e-9) * room);
        self.mesh(&mut chart, &format!("packets {inside} (mean)"))?;
        chart
            .configure_secondary_axes()
            .y_desc(format!("{unit} {inside} (mean)"))
            .axis_desc_style((FONT, 16))
            .label_style((FONT, 14))
            .y_label_formatter(&tick)
            .y_labels(6)
            .draw()?;
        let ps = DELIVERED.stroke_width(2);
        chart
            .draw_series(LineSeries::new(
                steps(s, levels.iter().map(|l| l.0).enumerate()),
                ps,
            ))?
            .label("packets (left axis)")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], ps));
        let bs = BYTES.stroke_width(2);
        chart
            .draw_secondary_series(DashedLineSeries::new(
                steps(s, levels.iter().map(|l| l.1 / d).enumerate()),
                8,
                4,
                bs,
            ))?
            .label(format!("{unit} (right axis)"))
            .legend(move |(x, y)| DashedPathElement::new(vec![(x, y), (x + 22, y)], 6, 3, bs));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(0x99, 0x99, 0x99))
            .label_font((FONT, 14))
            .draw()?;
        Ok(())
    }

    fn drops(&self, pipe: Option<u32>) -> Result2<()> {
        let s = self.s;
        let max = s
            .windows
            .iter()
            .flat_map(|w| w.drops.iter())
            .fold(0u64, |a, b| a.max(*b));
        let per = format!("drops per {} ms", s.window as f64 / 1e6);
        let mut chart = self.chart((max as f64).max(1.0), s.reasons.len().max(1), false)?;
        self.mesh(&mut chart, &per)?;
        if s.reasons.is_empty() {
            chart
                .draw_series(std::iter::empty::<EmptyElement<(f64, f64), DB>>())?
                .label(format!("no drops ({})", which(pipe)))
                .legend(|(x, y)| EmptyElement::at((x, y)));
        }
        for (r, (reason, total)) in s.drops_by_reason().into_iter().enumerate() {
            let style = PALETTE[r % PALETTE.len()].stroke_width(2);
            let counts = s
                .windows
                .iter()
                .map(|w| w.drops.get(r).copied().unwrap_or(0) as f64)
                .enumerate();
            chart
                .draw_series(LineSeries::new(steps(s, counts), style))?
                .label(format!("{reason} ({total} in all)"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], style));
        }
        Self::legend(&mut chart)
    }
}

/// The SVG rasterised to PNG, with a font this system has for its text:
/// a PNG has no viewer to pick one, and nothing is downloaded.
pub fn png(svg: &str) -> Result<Vec<u8>, PlotError> {
    let mut options = resvg::usvg::Options::default();
    let db = options.fontdb_mut();
    db.load_system_fonts();
    // plotters asks for `sans-serif`: name a family the system has.
    let preferred = [
        "DejaVu Sans",
        "Liberation Sans",
        "Noto Sans",
        "FreeSans",
        "Arial",
    ];
    let families: Vec<String> = db
        .faces()
        .flat_map(|f| f.families.iter().map(|(name, _)| name.clone()))
        .collect();
    let family = preferred
        .iter()
        .find(|p| families.iter().any(|f| f == *p))
        .map(|p| p.to_string())
        .or_else(|| families.first().cloned())
        .ok_or(PlotError::NoFont)?;
    db.set_sans_serif_family(family);
    let tree = resvg::usvg::Tree::from_str(svg, &options).map_err(PlotError::Render)?;
    let size = tree.size().to_int_size();
    // Twice the SVG's size: sharp text at the size a paper prints it.
    let zoom = 2.0;
    let mut pixmap = resvg::tiny_skia::Pixmap::new(
        (size.width() as f32 * zoom) as u32,
        (size.height() as f32 * zoom) as u32,
    )
    .ok_or(PlotError::NoArea)?;
    pixmap.fill(resvg::tiny_skia::Color::WHITE);
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::from_scale(zoom, zoom),
        &mut pixmap.as_mut(),
    );
    pixmap.encode_png().map_err(|e| PlotError::Encode {
        message: e.to_string(),
    })
}
