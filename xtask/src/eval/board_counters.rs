//! Fig 11 where a PMU exists: the counters recording of SmolLM2 on the emulated arm64
//! board (`board-guest`: a stock Debian kernel in `qemu-system-aarch64`), with
//! `-icount shift=0` so that QEMU's PMU counts retired instructions. The static aarch64
//! `profinfer` records the static aarch64 engine inside the guest, the trace comes back
//! over the serial console and is exported into the run tables here like every other run.
//!
//! What it can show is limited by the emulation, and the document says so: instructions
//! are exact counts of the aarch64 code each operator ran; cycles follow the virtual
//! clock (one nanosecond per instruction under icount); QEMU implements no cache or
//! memory events, and its stall events read zero.

use std::time::Duration;

use anyhow::{Context as _, Result};
use board_guest::{GuestStep, Machine};

use super::recordings::{EngineRun, Recorder};
use crate::board::GuestKit;

/// The run's label in the run tables.
pub const LABEL: &str = "counters-arm64/smollm2";

/// Time limit of the boot: loading the programs (the verifier takes seconds per program
/// under TCG) and SmolLM2's run on one emulated CPU that also counts instructions.
const LIMIT: Duration = Duration::from_secs(900);

/// The emulated machine: one CPU (one engine thread, so no operator's counts include
/// spinning at a barrier while another vCPU is descheduled), instructions counted.
const MACHINE: Machine = Machine {
    cpus: 1,
    memory_mib: 2048,
    icount: true,
};

/// What the document says about the run.
#[derive(Clone, Debug)]
pub struct BoardCounters {
    /// The recording as the guest ran it (programs and the model by file name).
    pub command: String,
    /// The guest kernel's release, machine and PMU devices, as it printed them.
    pub kernel: String,
    /// The QEMU machine.
    pub qemu: String,
    /// The recording's notes about counters (what it left out, and why), from the
    /// trace's header.
    pub notes: Vec<String>,
    /// Wall time of the boot.
    pub elapsed: Duration,
}

/// Records `run` (its model a host path; threads and prompt as the guest runs them) in
/// the guest booted from `kit`'s newest kernel, exports the trace with [`LABEL`].
pub fn run(recorder: &Recorder<'_>, kit: &GuestKit, run: &EngineRun) -> Result<BoardCounters> {
    let dir = recorder.scratch.join("board-counters");
    crate::paths::create_dir(&dir)?;
    let file = run
        .model
        .file_name()
        .context("the model has no file name")?
        .to_string_lossy()
        .into_owned();
    let guest_model = format!("/{file}");
    let mut guest_run = run.clone();
    guest_run.model = guest_model.clone().into();
    let engine_args = guest_run.engine_args(None).join(" ");
    let flags = run.record_flags.join(" ");
    let step = GuestStep {
        name: "counters".into(),
        command: format!("/profinfer record {flags} -o /tmp/c.pftrace -- /engine {engine_args}"),
        outputs: vec!["/tmp/c.pftrace".into()],
    };
    let profinfer = kit.bin_dir.join("profinfer");
    let engine = kit.bin_dir.join("engine");
    let initrd = board_guest::initramfs(
        &dir,
        &kit.busybox,
        &[
            ("/profinfer", profinfer.as_path()),
            ("/engine", engine.as_path()),
            (guest_model.as_str(), run.model.as_path()),
        ],
        &[step],
    )?;
    let kernel = kit.newest_kernel()?;
    eprintln!(
        "    booting {} under qemu-system-aarch64 (1 CPU, -icount shift=0)",
        kernel.display()
    );
    let booted = board_guest::boot(kernel, &initrd, &MACHINE, LIMIT)?;
    booted.step_ok("counters")?;
    let trace = booted.save("/tmp/c.pftrace", &dir.join("counters-arm64.pftrace"))?;
    recorder.export(&trace, LABEL)?;
    Ok(BoardCounters {
        command: guest_run.command(),
        kernel: booted.kernel_line().unwrap_or("?").to_owned(),
        qemu: format!("{} (TCG)", MACHINE.describe()),
        notes: trace_format::TraceReader::open(&trace)
            .with_context(|| format!("reading {}", trace.display()))?
            .header()
            .counter_notes
            .clone(),
        elapsed: booted.elapsed,
    })
}

impl BoardCounters {
    /// The guest's kernel release (the first word of its line).
    pub fn release(&self) -> &str {
        self.kernel.split_whitespace().next().unwrap_or("?")
    }
}
