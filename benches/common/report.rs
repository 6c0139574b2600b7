//! What the benchmarks' reports share: the results folder, the chart font,
//! percentiles of sorted latencies, and a line chart with linear or
//! logarithmic axes (drawn with `plotters`).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// `$CARGO_TARGET_DIR/bench-results/<prefix><UTC timestamp>/` (not created):
/// results stay outside the clone, so nothing needs ignoring.
pub(crate) fn results_dir(prefix: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            // target/release/deps/<bench>-… → target
            let exe = std::env::current_exe().unwrap();
            exe.ancestors().nth(3).unwrap().to_path_buf()
        });
    let now = time::OffsetDateTime::now_utc();
    let stamp = format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    );
    let target = if target.is_absolute() {
        target
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(target)
    };
    target
        .join("bench-results")
        .join(format!("{prefix}{stamp}"))
}

/// Registers DejaVu Sans as plotters' `sans-serif` when it is installed.
/// Returns whether a font is available; without one, charts are drawn
/// without labels.
pub(crate) fn register_font() -> bool {
    static FONT: OnceLock<bool> = OnceLock::new();
    *FONT.get_or_init(|| {
        ["/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"]
            .iter()
            .find_map(|p| std::fs::read(p).ok())
            .and_then(|bytes| {
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).ok()
            })
            .is_some()
    })
}

/// The `p` quantile (0 to 1) of sorted samples, nearest rank on `(n - 1) · p`.
pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

/// A duration in milliseconds.
pub(crate) fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// A number for an axis label: `10k`, `1M`, `256`, `0.5`.
pub(crate) fn short_number(value: f64) -> String {
    let trim = |text: String| {
        if text.contains('.') {
            text.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            text
        }
    };
    let magnitude = value.abs();
    if magnitude >= 1e6 {
        format!("{}M", trim(format!("{:.1}", value / 1e6)))
    } else if magnitude >= 1e3 {
        format!("{}k", trim(format!("{:.1}", value / 1e3)))
    } else if magnitude >= 10.0 || magnitude == 0.0 {
        format!("{value:.0}")
    } else if magnitude >= 1.0 {
        trim(format!("{value:.1}"))
    } else {
        trim(format!("{value:.3}"))
    }
}

/// Bytes for an axis label, in powers of 1024: `8 KiB`, `1 MiB`.
pub(crate) fn short_bytes(value: f64) -> String {
    if value >= 1024.0 * 1024.0 {
        format!("{} MiB", short_number(value / (1024.0 * 1024.0)))
    } else if value >= 1024.0 {
        format!("{} KiB", short_number(value / 1024.0))
    } else {
        format!("{value:.0} B")
    }
}

/// One axis of a [`line_chart`].
pub(crate) struct Axis<'a> {
    pub(crate) label: &'a str,
    pub(crate) log: bool,
    pub(crate) format: fn(f64) -> String,
    /// The tick values, which then also bound the axis; empty: chosen from the
    /// data (decades and their 2 and 5 multiples on a logarithmic axis).
    pub(crate) ticks: &'a [f64],
}

/// One line of a [`line_chart`]: points `(x, y)` joined in order, each marked.
pub(crate) struct Series {
    pub(crate) label: String,
    pub(crate) colour: RGBColor,
    pub(crate) dashed: bool,
    pub(crate) points: Vec<(f64, f64)>,
}

/// Distinct colours for up to four lines.
pub(crate) const COLOURS: [RGBColor; 4] = [
    RGBColor(46, 109, 180),
    RGBColor(214, 95, 40),
    RGBColor(60, 150, 80),
    RGBColor(150, 70, 160),
];

/// The range an axis shows and its ticks, in plotted coordinates (`log10` of
/// the value on a logarithmic axis).
fn axis_ticks(values: &[f64], log: bool) -> (std::ops::Range<f64>, Vec<f64>) {
    let finite = values.iter().copied().filter(|v| v.is_finite());
    if log {
        let positive: Vec<f64> = finite.filter(|v| *v > 0.0).collect();
        if positive.is_empty() {
            return (0.0..1.0, vec![0.0, 1.0]);
        }
        let low = positive.iter().copied().fold(f64::INFINITY, f64::min);
        let high = positive.iter().copied().fold(0.0f64, f64::max);
        // The 1-2-5 steps around the data, as log10.
        let steps: Vec<f64> = (low.log10().floor() as i32 - 1..=high.log10().ceil() as i32 + 1)
            .flat_map(|decade| [1.0, 2.0, 5.0].map(|m| (m * 10f64.powi(decade)).log10()))
            .collect();
        let (low, high) = (low.log10(), high.log10());
        let bottom = steps
            .iter()
            .copied()
            .filter(|s| *s <= low + 1e-9)
            .fold(f64::NEG_INFINITY, f64::max);
        let top = steps
            .iter()
            .copied()
            .find(|s| *s >= high - 1e-9)
            .unwrap_or(high);
        let top = if top > bottom { top } else { bottom + 1.0 };
        // Over more than three decades, label the decades only.
        let few = top - bottom > 3.0;
        let ticks = steps
            .into_iter()
            .filter(|s| *s >= bottom - 1e-9 && *s <= top + 1e-9)
            .filter(|s| !few || (s - s.round()).abs() < 1e-9)
            .collect();
        (bottom..top, ticks)
    } else {
        let high = finite.fold(0.0f64, f64::max).max(1e-9) * 1.1;
        let raw = high / 6.0;
        let power = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 5.0, 10.0]
            .iter()
            .map(|m| m * power)
            .find(|s| *s >= raw)
            .unwrap_or(10.0 * power);
        let top = (high / step).ceil() * step;
        let ticks = (0..=((top / step).round() as usize))
            .map(|i| i as f64 * step)
            .collect();
        (0.0..top, ticks)
    }
}

/// An axis's own ticks and the range they span, in plotted coordinates.
fn chosen_ticks(axis: &Axis<'_>) -> Option<(std::ops::Range<f64>, Vec<f64>)> {
    let ticks: Vec<f64> = axis
        .ticks
        .iter()
        .map(|&v| if axis.log { v.log10() } else { v })
        .collect();
    let low = ticks.iter().copied().fold(f64::INFINITY, f64::min);
    let high = ticks.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (high > low).then_some((low..high, ticks))
}

/// A line chart of `series` (one marker per point), 1000 × 600 px, with a
/// title and a legend. Logarithmic axes are plotted as `log10` and labelled
/// with the values. Without a font, only the lines, markers and grid are drawn.
pub(crate) fn line_chart(
    path: &Path,
    title: &str,
    x: &Axis<'_>,
    y: &Axis<'_>,
    series: &[Series],
) -> Result<(), Box<dyn std::error::Error>> {
    let font = register_font();
    let plot = |value: f64, log: bool| if log { value.log10() } else { value };
    let xs: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    let ys: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .collect();
    let (x_range, x_ticks) = chosen_ticks(x).unwrap_or_else(|| axis_ticks(&xs, x.log));
    let (y_range, y_ticks) = chosen_ticks(y).unwrap_or_else(|| axis_ticks(&ys, y.log));
    let root = BitMapBackend::new(path, (1000, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut builder = ChartBuilder::on(&root);
    builder.margin(20).margin_right(40);
    if font {
        builder
            .caption(title, ("sans-serif", 20))
            .x_label_area_size(50)
            .y_label_area_size(70);
    }
    let mut chart = builder.build_cartesian_2d(x_range.clone(), y_range.clone())?;
    let unplot = |value: f64, log: bool| if log { 10f64.powf(value) } else { value };
    if font {
        // Ticks are drawn below, at the values the axes need (decades on a
        // logarithmic axis); the mesh only draws the axes and their names.
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(0)
            .y_labels(0)
            .x_desc(x.label)
            .y_desc(y.label)
            .axis_desc_style(("sans-serif", 15))
            .draw()?;
        let below =
            TextStyle::from(("sans-serif", 14).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
        let beside = TextStyle::from(("sans-serif", 14).into_font())
            .pos(Pos::new(HPos::Right, VPos::Center));
        chart.draw_series(x_ticks.iter().map(|&at| {
            EmptyElement::at((at, y_range.start))
                + Text::new((x.format)(unplot(at, x.log)), (0, 8), below.clone())
        }))?;
        chart.draw_series(y_ticks.iter().map(|&at| {
            EmptyElement::at((x_range.start, at))
                + Text::new((y.format)(unplot(at, y.log)), (-8, 0), beside.clone())
        }))?;
    }
    let grid = RGBColor(225, 225, 225);
    for &at in &x_ticks {
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(at, y_range.start), (at, y_range.end)],
            grid,
        )))?;
    }
    for &at in &y_ticks {
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(x_range.start, at), (x_range.end, at)],
            grid,
        )))?;
    }
    for line in series {
        let points: Vec<(f64, f64)> = line
            .points
            .iter()
            .filter(|(px, py)| (!x.log || *px > 0.0) && (!y.log || *py > 0.0))
            .map(|&(px, py)| (plot(px, x.log), plot(py, y.log)))
            .collect();
        let style = line.colour.stroke_width(2);
        let drawn = if line.dashed {
            chart.draw_series(std::iter::once(DashedPathElement::new(
                points.clone(),
                8,
                5,
                style,
            )))?
        } else {
            chart.draw_series(std::iter::once(PathElement::new(points.clone(), style)))?
        };
        if font {
            let colour = line.colour;
            let dashed = line.dashed;
            drawn.label(line.label.clone()).legend(move |(lx, ly)| {
                if dashed {
                    DashedPathElement::new(
                        vec![(lx, ly), (lx + 24, ly)],
                        6,
                        3,
                        colour.stroke_width(2),
                    )
                    .into_dyn()
                } else {
                    PathElement::new(vec![(lx, ly), (lx + 24, ly)], colour.stroke_width(2))
                        .into_dyn()
                }
            });
        }
        chart.draw_series(
            points
                .iter()
                .map(|&p| Circle::new(p, 4, line.colour.filled())),
        )?;
    }
    if font {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.9))
            .border_style(RGBColor(180, 180, 180))
            .label_font(("sans-serif", 14))
            .draw()?;
    }
    root.present()?;
    Ok(())
}

/// Where a [`bar_chart`] draws: margins, bar placement, grid colour, and the
/// offsets and sizes of its text.
pub(crate) struct BarLayout {
    /// Left, right, top and bottom margins of the plotting area.
    pub(crate) margins: (i32, i32, i32, i32),
    /// Where a group's first bar starts, as a fraction of the group's width.
    pub(crate) inset: f64,
    /// The horizontal grid lines' colour.
    pub(crate) grid: RGBColor,
    /// A bar's label: offset from the bar's top-left corner, and text size.
    pub(crate) value_label: ((i32, i32), f64),
    /// A group's label: distance below the plotting area, and text size.
    pub(crate) group_label: (i32, f64),
    /// The title's top-left corner.
    pub(crate) title_at: (i32, i32),
}

/// One group of a [`bar_chart`]: its label and, for each colour in turn, the
/// bar's value and label (`None`: no bar, its place left empty).
pub(crate) struct BarGroup {
    pub(crate) label: String,
    pub(crate) bars: Vec<Option<(f64, String)>>,
}

/// A [`bar_chart`]'s content.
pub(crate) struct BarChart<'a> {
    pub(crate) title: &'a str,
    pub(crate) layout: BarLayout,
    /// The colour of each group's first, second, … bar.
    pub(crate) colours: &'a [RGBColor],
    /// Horizontal grid lines: value and label.
    pub(crate) grid: Vec<(f64, String)>,
    /// Where a value stands: 0 at the bottom of the plotting area, 1 at its
    /// top (a linear or logarithmic scale).
    pub(crate) fraction: &'a dyn Fn(f64) -> f64,
    pub(crate) groups: Vec<BarGroup>,
}

/// Bars in groups, 1000 × 560 px, over labelled horizontal grid lines. Without
/// a font, only the grid and the bars are drawn.
pub(crate) fn bar_chart(
    path: &Path,
    chart: &BarChart<'_>,
) -> Result<(), Box<dyn std::error::Error>> {
    let font = register_font();
    let layout = &chart.layout;
    let (width, height) = (1000i32, 560i32);
    let root = BitMapBackend::new(path, (width as u32, height as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right, top, bottom) = layout.margins;
    let y = |value: f64| {
        height - bottom - ((chart.fraction)(value) * f64::from(height - top - bottom)) as i32
    };
    let text = |size: f64| TextStyle::from(("sans-serif", size).into_font());
    for (value, label) in &chart.grid {
        let at = y(*value);
        root.draw(&PathElement::new(
            vec![(left, at), (width - right, at)],
            layout.grid,
        ))?;
        if font {
            root.draw(&Text::new(label.clone(), (8, at - 7), text(14.0)))?;
        }
    }
    let group = f64::from(width - left - right) / chart.groups.len().max(1) as f64;
    let bar = (group * 0.35) as i32;
    for (i, group_bars) in chart.groups.iter().enumerate() {
        let x0 = left + (group * i as f64 + group * layout.inset) as i32;
        for (j, drawn) in group_bars.bars.iter().enumerate() {
            let Some((value, label)) = drawn else {
                continue;
            };
            let x = x0 + j as i32 * bar;
            let top_y = y(*value);
            root.draw(&Rectangle::new(
                [(x, top_y), (x + bar - 4, height - bottom)],
                chart.colours[j].filled(),
            ))?;
            if font {
                let ((dx, dy), size) = layout.value_label;
                root.draw(&Text::new(label.clone(), (x + dx, top_y + dy), text(size)))?;
            }
        }
        if font {
            let (below, size) = layout.group_label;
            root.draw(&Text::new(
                group_bars.label.clone(),
                (x0, height - bottom + below),
                text(size),
            ))?;
        }
    }
    if font {
        root.draw(&Text::new(chart.title, layout.title_at, text(16.0)))?;
    }
    root.present()?;
    Ok(())
}
