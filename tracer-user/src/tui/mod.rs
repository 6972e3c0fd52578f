//! `profinfer live` / `profinfer record --tui`: a ratatui view over a running
//! recording (`docs/live.md`).
//!
//! Three threads, no shared state: the collector ([`crate::record::record_observed`]
//! with a [`feed::LiveFeed`]) → bounded channel of event batches → the aggregator
//! ([`feed::aggregate`]: the analyzer's `Reorder` + `TraceModel`) → bounded channel of
//! [`snapshot::LiveSnapshot`]s → the render loop here ([`app::App`] +
//! [`render::ui`]), which sends level switches and stop requests back to the collector.
//!
//! When the target exits, the render loop says so at once ([`exit_watch`]); the collector
//! then drains the last records, writes the footer and detaches the probes (seconds,
//! mostly uprobe detaching) before the final frame comes, with every record applied and
//! the footer's totals. That frame stays until `q`.

pub mod app;
pub mod exit_watch;
pub mod feed;
pub mod render;
pub mod snapshot;
pub mod terminal;

use std::{path::PathBuf, time::Duration};

use ratatui::crossterm::event::{self, Event as TermEvent, KeyEventKind};
use tokio::sync::mpsc::{self, error::TryRecvError};

use self::{
    app::{Action, App, Mode},
    exit_watch::ExitWatch,
    feed::{CONTROL_CAPACITY, Control, FEED_CAPACITY, LiveFeed, RecordingEnd, SNAPSHOT_CAPACITY},
    terminal::{StdioRedirect, TerminalError, TerminalGuard},
};
use crate::record::{RecordError, RecordRequest, RecordSummary, record_observed};

/// How long the render loop waits for a key before looking for a new snapshot.
const KEY_POLL: Duration = Duration::from_millis(100);

/// Why the live view failed.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// The terminal or the output redirection could not be set up.
    #[error(transparent)]
    Terminal(#[from] TerminalError),
    /// Reading keys or drawing failed.
    #[error("terminal I/O failed")]
    Io {
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A worker thread could not be started or panicked.
    #[error("the live view's {what} thread failed")]
    Thread {
        /// Which thread.
        what: &'static str,
    },
    /// Recording failed (boxed: `RecordError` is large).
    #[error(transparent)]
    Record(Box<RecordError>),
}

/// What a live session produced.
#[derive(Debug)]
pub struct LiveOutcome {
    /// The recording's totals.
    pub summary: RecordSummary,
    /// Where the target's (and the collector's) output went.
    pub target_log: PathBuf,
}

/// Records `req` while showing the live view; returns when the user leaves it. The
/// target's stdout/stderr go to `target_log`.
///
/// # Errors
/// [`LiveError`]: no terminal, a failed recording (shown first, until a key), I/O.
pub fn run(req: RecordRequest, target_log: PathBuf) -> Result<LiveOutcome, LiveError> {
    let mut app = App::new(
        req.output.display().to_string(),
        target_log.display().to_string(),
    );
    let mut guard = TerminalGuard::enter()?;
    let redirect = StdioRedirect::to_file(&target_log)?;
    let (feed_tx, feed_rx) = mpsc::channel(FEED_CAPACITY);
    let (ctl_tx, ctl_rx) = mpsc::channel(CONTROL_CAPACITY);
    let (snap_tx, mut snap_rx) = mpsc::channel(SNAPSHOT_CAPACITY);
    let collector = std::thread::Builder::new()
        .name("profinfer-collect".into())
        .spawn(move || {
            let mut feed = LiveFeed::new(feed_tx, ctl_rx);
            let result = record_observed(req, &mut feed);
            feed.finish(match &result {
                Ok(s) => Ok(RecordingEnd::of(s)),
                Err(e) => Err(crate::error_chain(e)),
            });
            result.map_err(Box::new)
        })
        .map_err(|_| LiveError::Thread { what: "collector" })?;
    let aggregator = std::thread::Builder::new()
        .name("profinfer-model".into())
        .spawn(move || feed::aggregate(feed_rx, snap_tx))
        .map_err(|_| LiveError::Thread { what: "aggregator" })?;

    let loop_result = (|| -> Result<(), LiveError> {
        let io = |source| LiveError::Io { source };
        let mut dirty = true;
        let mut exit_watch: Option<ExitWatch> = None;
        loop {
            loop {
                match snap_rx.try_recv() {
                    Ok(update) => {
                        dirty = true;
                        if app.on_update(update) {
                            return Ok(());
                        }
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        // The aggregator ended without a final frame (it panicked).
                        if matches!(app.mode, Mode::Live | Mode::Quitting) {
                            app.mode = Mode::Finished {
                                outcome: Err("the live view's model thread stopped".into()),
                            };
                            dirty = true;
                        }
                        break;
                    }
                }
            }
            // Say at once that the target exited: the final frame comes only once the
            // collector has drained, written the footer and detached the probes.
            if let (None, Some(pid)) = (&exit_watch, app.target_pid) {
                exit_watch = Some(ExitWatch::new(pid));
            }
            if !app.target_exited && exit_watch.as_mut().is_some_and(ExitWatch::exited) {
                app.on_target_exit();
                dirty = true;
            }
            if dirty {
                guard.terminal.draw(|f| render::ui(f, &app)).map_err(io)?;
                dirty = false;
            }
            if !event::poll(KEY_POLL).map_err(io)? {
                continue;
            }
            match event::read().map_err(io)? {
                TermEvent::Key(k) if k.kind == KeyEventKind::Press => {
                    dirty = true;
                    match app.on_key(k) {
                        Action::None => {}
                        Action::SetLevels(l) => {
                            let _ = ctl_tx.try_send(Control::SetLevels(l));
                        }
                        Action::Stop => {
                            let _ = ctl_tx.try_send(Control::Stop);
                        }
                        Action::Exit => return Ok(()),
                    }
                }
                TermEvent::Resize(..) => dirty = true,
                _ => {}
            }
        }
    })();
    // However the view was left (a terminal error, a dead model thread), detach
    // cleanly; after the collector finished this finds the channel closed.
    let _ = ctl_tx.try_send(Control::Stop);
    drop(guard);
    drop(redirect);
    let recorded = collector
        .join()
        .map_err(|_| LiveError::Thread { what: "collector" })?;
    let _ = aggregator.join();
    loop_result?;
    Ok(LiveOutcome {
        summary: recorded.map_err(LiveError::Record)?,
        target_log,
    })
}
