//! `index.html` renders as a one-page report: every section is there, every picture is
//! inlined (a `data:` URI that decodes to an SVG) and every link points at a file that
//! was written; and, where Debian's Chromium is installed, a headless screenshot of the
//! page is a real picture, not a blank or error page.
//!
//! Without `/usr/bin/chromium` the browser check is skipped with a banner, unless
//! `PROFINFER_REQUIRE_BROWSER=1` makes that a failure. `PROFINFER_KEEP_REPORT=DIR` keeps
//! the pages (and screenshots) under `DIR/<trace>/` to look at, and
//! `PROFINFER_REPORT_TRACE=FILE` puts a trace of your own through the same checks.

mod support;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use analyzer::AnalyzeOptions;
use base64::Engine as _;
use support::data;

/// The checked-in traces, and `PROFINFER_REPORT_TRACE` if set.
fn traces() -> Vec<PathBuf> {
    let mut t: Vec<PathBuf> = ["tiny_t1.pftrace", "tiny_t2.pftrace"]
        .into_iter()
        .map(data)
        .collect();
    t.extend(std::env::var_os("PROFINFER_REPORT_TRACE").map(PathBuf::from));
    t
}
const CHROMIUM: &str = "/usr/bin/chromium";
/// Sections of the page, by anchor, with a text each must contain.
const SECTIONS: [(&str, &str); 8] = [
    ("run", "command line"),
    ("timings", "TTFT"),
    ("operators", "MUL_MAT"),
    ("threads", "op busy"),
    ("dag", "Per-layer DAG"),
    ("plots", "Matrix products"),
    ("flame", "Where the time goes"),
    ("files", "timeline.json"),
];

/// Every value of `attr="..."` in `html`.
fn attr_values<'a>(html: &'a str, attr: &str) -> Vec<&'a str> {
    let needle = format!(" {attr}=\"");
    html.match_indices(&needle)
        .map(|(i, _)| {
            let rest = &html[i + needle.len()..];
            &rest[..rest.find('"').expect("attribute is closed")]
        })
        .collect()
}

/// The text of section `id`: from its heading to the next `<h2`.
fn section<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html
        .find(&format!("<h2 id=\"{id}\""))
        .unwrap_or_else(|| panic!("section #{id} is missing"));
    let rest = &html[start + 4..];
    &rest[..rest.find("<h2").unwrap_or(rest.len())]
}

fn graphviz_present() -> bool {
    Command::new("dot")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn out_dir(trace: &Path, suffix: &str) -> (PathBuf, Option<tempfile::TempDir>) {
    match std::env::var_os("PROFINFER_KEEP_REPORT") {
        Some(d) => {
            let stem = trace
                .file_stem()
                .expect("trace file name")
                .to_string_lossy();
            let dir = Path::new(&d).join(format!("{stem}{suffix}"));
            std::fs::create_dir_all(&dir).expect("keep dir");
            (dir, None)
        }
        None => {
            let t = tempfile::tempdir().expect("tempdir");
            (t.path().to_path_buf(), Some(t))
        }
    }
}

#[test]
fn index_html_has_every_section_and_every_picture_inline() {
    for path in traces() {
        let trace = path.display();
        let (dir, _keep) = out_dir(&path, "");
        let report = analyzer::run(&path, &dir, &AnalyzeOptions::default()).expect("analysis runs");
        let html = std::fs::read_to_string(dir.join("index.html")).expect("index.html");
        for (id, text) in SECTIONS {
            assert!(
                section(&html, id).contains(text),
                "{trace}: section #{id} lacks `{text}`"
            );
        }
        assert!(
            section(&html, "run").contains(&report.summary.trace.target),
            "{trace}: the header names the target"
        );
        // Nothing is fetched from elsewhere: no scripts or styles by URL, no remote images.
        assert!(
            !html.contains("<script"),
            "{trace}: no script in the page itself"
        );
        assert!(!html.contains("<link"), "{trace}: no external stylesheet");

        let ids: HashSet<&str> = attr_values(&html, "id").into_iter().collect();
        let mut inlined = Vec::new();
        for (attr, value) in ["src", "href", "data"]
            .into_iter()
            .flat_map(|a| attr_values(&html, a).into_iter().map(move |v| (a, v)))
        {
            if let Some(b64) = value.strip_prefix("data:image/svg+xml;base64,") {
                let svg = base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .expect("data URI is base64");
                let svg = String::from_utf8(svg).expect("SVG is UTF-8");
                assert!(
                    svg.contains("<svg") && svg.trim_end().ends_with("</svg>"),
                    "{trace}: an inlined picture is a whole SVG"
                );
                inlined.push(svg);
            } else if let Some(anchor) = value.strip_prefix('#') {
                assert!(ids.contains(anchor), "{trace}: link to missing #{anchor}");
            } else {
                assert!(
                    !value.contains("://") && !value.starts_with("//"),
                    "{trace}: {attr}=\"{value}\" leaves the page's directory"
                );
                assert!(
                    dir.join(value).is_file(),
                    "{trace}: {attr}=\"{value}\" points at a file that was not written"
                );
            }
        }
        // Four plots, the flame graph (an <object> with an <img> fallback: twice), and
        // the per-layer DAG when Graphviz could draw it.
        let expected = 4 + 2 + usize::from(graphviz_present());
        assert_eq!(inlined.len(), expected, "{trace}: pictures inlined");
        for file in [
            "latency.svg",
            "growth.svg",
            "matmul.svg",
            "load_balance.svg",
            "flame.svg",
        ] {
            let on_disk = std::fs::read_to_string(dir.join(file)).expect("picture written");
            assert!(
                inlined.contains(&on_disk),
                "{trace}: {file} is inlined as written"
            );
        }
        if !graphviz_present() {
            assert!(
                section(&html, "dag").contains("No picture"),
                "{trace}: says why"
            );
        }
        for raw in [
            "timeline.json",
            "summary.json",
            "stats.json",
            "op_types.csv",
            "flame.folded",
        ] {
            assert!(
                attr_values(&html, "href").contains(&raw),
                "{trace}: links {raw}"
            );
        }
    }
}

#[test]
fn without_graphics_the_page_says_why_pictures_are_missing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = AnalyzeOptions::default().with_graphics(false);
    analyzer::run(&data("tiny_t1.pftrace"), dir.path(), &opts).expect("analysis runs");
    let html = std::fs::read_to_string(dir.path().join("index.html")).expect("index.html");
    assert!(!html.contains("data:image"), "no pictures were drawn");
    for id in ["dag", "plots", "flame"] {
        assert!(
            section(&html, id).contains("graphics were switched off"),
            "#{id} says why it has no picture"
        );
    }
}

/// Distinct colours of an 8-bit RGB(A) PNG.
fn distinct_colours(png_path: &Path) -> (u32, u32, usize) {
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png_path).expect("screenshot"),
    ));
    let mut reader = decoder.read_info().expect("PNG header");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("PNG frame");
    let bytes = &buf[..info.buffer_size()];
    let step = match info.color_type {
        png::ColorType::Rgba => 4,
        png::ColorType::Rgb => 3,
        other => panic!("unexpected PNG colour type {other:?}"),
    };
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    let colours: HashSet<&[u8]> = bytes.chunks_exact(step).map(|p| &p[..3]).collect();
    (info.width, info.height, colours.len())
}

#[test]
fn index_html_renders_in_a_headless_browser() {
    if !Path::new(CHROMIUM).exists() {
        assert!(
            std::env::var_os("PROFINFER_REQUIRE_BROWSER").is_none_or(|v| v != "1"),
            "PROFINFER_REQUIRE_BROWSER=1 but {CHROMIUM} is missing (apt-get install chromium)"
        );
        eprintln!(
            "\n==== SKIPPED: {CHROMIUM} not installed; the page was not rendered in a browser \
             (apt-get install chromium, or `cargo xtask setup`) ====\n"
        );
        return;
    }
    for path in traces() {
        let trace = path.display();
        // Its own directory: the tests run in parallel.
        let (dir, _keep) = out_dir(&path, "-browser");
        analyzer::run(&path, &dir, &AnalyzeOptions::default()).expect("analysis runs");
        let profile = tempfile::tempdir().expect("browser profile dir");
        let png = dir.join("index.png");
        let _ = std::fs::remove_file(&png);
        let mut child = Command::new(CHROMIUM)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg(format!("--screenshot={}", png.display()))
            .arg("--window-size=1280,4000")
            .arg(format!("file://{}", dir.join("index.html").display()))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("chromium starts");
        let started = Instant::now();
        while child.try_wait().expect("wait").is_none() {
            if started.elapsed() > Duration::from_secs(120) {
                let _ = child.kill();
                panic!("{trace}: chromium took over two minutes");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(
            png.metadata().is_ok_and(|m| m.len() > 10_000),
            "{trace}: chromium wrote a screenshot"
        );
        let (w, h, colours) = distinct_colours(&png);
        assert_eq!((w, h), (1280, 4000), "{trace}: screenshot size");
        // A blank or error page has a handful of colours; text, tables, plots and the
        // flame graph's palette give hundreds.
        assert!(
            colours > 200,
            "{trace}: the screenshot looks blank ({colours} colours)"
        );
    }
}
