//! `herald bench --plot FILE`: a chart of throughput and latency (p50, p99) over the run,
//! drawn with plotters as SVG or PNG, chosen by the file's extension. Text is set in DejaVu
//! Sans, embedded in the binary, so charts look the same on machines without fonts.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::timeline::Point;
use super::workload::Verb;
use crate::usage::UsageError;

/// The image formats `--plot` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `.svg`: vector, text kept as text.
    Svg,
    /// `.png`: 8-bit RGB raster.
    Png,
}

impl Format {
    /// The format for `path`'s extension (case-insensitive); anything else is a usage error.
    pub fn of(path: &Path) -> Result<Format, UsageError> {
        match path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("svg") => Ok(Format::Svg),
            Some("png") => Ok(Format::Png),
            _ => Err(UsageError(format!(
                "--plot {}: the file name must end in .svg or .png",
                path.display()
            ))),
        }
    }
}

/// A `--plot` file checked before the run: its format is known and it can be opened for
/// writing (so a bad path is found before the load, not after it).
#[derive(Debug)]
pub struct Target {
    /// Where the chart goes.
    pub path: PathBuf,
    format: Format,
    /// The check created the (empty) file; [`Target::abandon`] removes it.
    created: bool,
}

impl Target {
    /// Checks `path`: a usage error when its extension is not .svg/.png or when it cannot
    /// be opened for writing. Creates the file when missing (it is written after the run).
    pub fn check(path: &Path) -> Result<Target, UsageError> {
        let format = Format::of(path)?;
        let existed = path.symlink_metadata().is_ok();
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| {
                UsageError(format!(
                    "--plot {}: cannot write there: {e}",
                    path.display()
                ))
            })?;
        Ok(Target {
            path: path.to_path_buf(),
            format,
            created: !existed,
        })
    }

    /// Writes the chart (see [`write`]).
    pub fn write(self, points: &[Point], title: &str, verb: Verb) -> anyhow::Result<()> {
        write(&self.path, self.format, points, title, verb)
    }

    /// The run ended without a chart: removes the file if the check created it.
    pub fn abandon(self) {
        if self.created {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Chart size in pixels.
const SIZE: (u32, u32) = (1000, 700);

type DrawResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// Writes the chart of `points` to `path` in `format`, titled `title`, for requests of
/// `verb`.
pub fn write(
    path: &Path,
    format: Format,
    points: &[Point],
    title: &str,
    verb: Verb,
) -> anyhow::Result<()> {
    register_font()?;
    let drawn = match format {
        Format::Svg => draw(
            SVGBackend::new(path, SIZE).into_drawing_area(),
            points,
            title,
            verb,
        ),
        Format::Png => draw(
            BitMapBackend::new(path, SIZE).into_drawing_area(),
            points,
            title,
            verb,
        ),
    };
    drawn.map_err(|e| anyhow::anyhow!("cannot write the plot to {}: {e}", path.display()))
}

fn register_font() -> anyhow::Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
            .is_ok()
    });
    anyhow::ensure!(ok, "the embedded chart font could not be loaded");
    Ok(())
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    points: &[Point],
    title: &str,
    verb: Verb,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 22))?;
    let (_, height) = root.dim_in_pixel();
    let (upper, lower) = root.split_vertically(height / 2);
    let x_max = points
        .last()
        .map_or(1.0, |p| p.at_seconds + p.width_seconds)
        .max(1.0);
    // Each bucket is drawn at its middle.
    let mid = |p: &Point| p.at_seconds + p.width_seconds / 2.0;

    let t_max = points
        .iter()
        .map(|p| p.throughput_per_second)
        .fold(0.0, f64::max)
        .max(1.0)
        * 1.1;
    let mut chart = ChartBuilder::on(&upper)
        .caption("throughput", ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..x_max, 0f64..t_max)?;
    chart
        .configure_mesh()
        .x_desc("seconds since start")
        .y_desc(format!("{}/s", verb.noun()))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()?;
    chart
        .draw_series(LineSeries::new(
            points.iter().map(|p| (mid(p), p.throughput_per_second)),
            BLUE.stroke_width(2),
        ))?
        .label(format!("successful {} per second", verb.noun()))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE.stroke_width(2)));
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;

    let l_max = points.iter().map(|p| p.p99_ms).fold(0.0, f64::max).max(1.0) * 1.1;
    let mut chart = ChartBuilder::on(&lower)
        .caption(format!("{} latency", verb.name()), ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..x_max, 0f64..l_max)?;
    chart
        .configure_mesh()
        .x_desc("seconds since start")
        .y_desc("milliseconds")
        .draw()?;
    // Buckets without successful creates have no latency: leave gaps out of the lines.
    let with_latency = || points.iter().filter(|p| p.succeeded > 0);
    chart
        .draw_series(LineSeries::new(
            with_latency().map(|p| (mid(p), p.p50_ms)),
            GREEN.stroke_width(2),
        ))?
        .label("p50")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], GREEN.stroke_width(2)));
    chart
        .draw_series(LineSeries::new(
            with_latency().map(|p| (mid(p), p.p99_ms)),
            RED.stroke_width(2),
        ))?
        .label("p99")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED.stroke_width(2)));
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points() -> Vec<Point> {
        (0..5)
            .map(|i| Point {
                at_seconds: f64::from(i),
                width_seconds: 1.0,
                succeeded: 100 + u64::from(i as u32) * 10,
                failed: 0,
                throughput_per_second: 100.0 + f64::from(i) * 10.0,
                p50_ms: 1.0,
                p99_ms: 4.0,
            })
            .collect()
    }

    #[test]
    fn formats_by_extension() {
        assert_eq!(Format::of(Path::new("a/out.svg")), Ok(Format::Svg));
        assert_eq!(Format::of(Path::new("OUT.PNG")), Ok(Format::Png));
        let e = Format::of(Path::new("out.jpg")).unwrap_err();
        assert_eq!(
            e.0,
            "--plot out.jpg: the file name must end in .svg or .png"
        );
        assert!(Format::of(Path::new("out")).is_err());
    }

    #[test]
    fn writes_svg_and_png() {
        let dir = tempfile::tempdir().unwrap();
        let svg = dir.path().join("b.svg");
        write(&svg, Format::Svg, &points(), "bench", Verb::Create).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.starts_with("<svg"), "{}", &text[..80.min(text.len())]);
        assert!(text.contains("throughput") && text.contains("p99"));
        let png = dir.path().join("b.png");
        write(&png, Format::Png, &points(), "bench", Verb::Create).unwrap();
        let bytes = std::fs::read(&png).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        // An empty run still draws (empty axes).
        write(
            &dir.path().join("e.svg"),
            Format::Svg,
            &[],
            "empty",
            Verb::Patch,
        )
        .unwrap();
    }

    #[test]
    fn targets_are_checked_before_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no/such/dir/x.svg");
        let e = Target::check(&missing).unwrap_err();
        assert!(
            e.0.starts_with(&format!(
                "--plot {}: cannot write there: ",
                missing.display()
            )),
            "{e}"
        );
        assert!(!missing.exists());
        assert!(Target::check(Path::new("x.jpg")).is_err());
        // A new file is created by the check and removed when the run gives up.
        let new = dir.path().join("new.png");
        Target::check(&new).unwrap().abandon();
        assert!(!new.exists());
        // A file that was there stays.
        let old = dir.path().join("old.svg");
        std::fs::write(&old, "keep").unwrap();
        Target::check(&old).unwrap().abandon();
        assert_eq!(std::fs::read_to_string(&old).unwrap(), "keep");
        let t = Target::check(&old).unwrap();
        t.write(&points(), "bench", Verb::Create).unwrap();
        assert!(std::fs::read_to_string(&old).unwrap().starts_with("<svg"));
    }
}
