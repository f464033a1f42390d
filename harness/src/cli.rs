//! The `contactlab` command line (clap): `run`, `check`, `simulate`, `report`, `list`, `merge`,
//! `slurm`.
//!
//! Exit status: 0 on success (diverged cells are results, not errors); 2 for bad input (an
//! experiment file, a flag, a name or a parameter), with one message naming file, line and key
//! where there is one, or naming a cell file that is not its cell's row; 1 for anything else
//! (a results folder in use by another run or that cannot be written, figures or a report
//! that cannot be written: the rows are kept).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use contactlab_harness::catalog::Catalog;
use contactlab_harness::config::{self, ConfigError, FigureKind, QUICKSTART_YAML};
use contactlab_harness::merge::MergeError;
use contactlab_harness::results::{ResultsError, COLUMNS};
use contactlab_harness::runner::{self, RunOptions};
use contactlab_harness::shard::Shard;
use contactlab_harness::slurm::SlurmOptions;
use contactlab_harness::{report, study_control, study_throughput, sweep};
use serde_json::{Map, Value};

const ABOUT: &str = "Run interchangeable rigid-body contact formulations on shared scenes and measure them side by side.";

const LONG_ABOUT: &str = "\
Run interchangeable rigid-body contact formulations on shared scenes and measure them side by side.

An experiment is one YAML file: scenes x formulations x sweep axes (timestep, seed, any scene or
formulation parameter) x seeds. `contactlab run` expands it into cells, runs them in parallel,
writes every finished cell at once (a rerun resumes), and leaves in results/<name>/:
runs.parquet and runs.csv (one row per cell; units in column names), figures/*.svg and *.png,
report.md, config.resolved.yaml and manifest.json.

Start here:
  contactlab list                      what formulations, scenes, metrics and figures exist
  contactlab check my.yaml             validate a file and print its grid; runs nothing
  contactlab run                       the default experiment (configs/quickstart.yaml, built in)
  contactlab run my.yaml --jobs 4      your experiment, 4 threads
  contactlab run my.yaml --shard 2/8   the second of eight shards of it (merge them after)
  contactlab merge DIR... --out DIR    combine shards' results folders into one
  contactlab slurm my.yaml --shards 8  SLURM scripts: a job array of shards, then the merge
  contactlab report results/my         redraw figures and report.md from stored rows
  contactlab simulate --scene box_slide --formulation penalty --timestep 0.001 --out t.csv

Exit status: 0 ok, 2 bad input (the message names file, line and key), 1 other errors.";

/// Command-line arguments.
#[derive(Debug, Parser)]
#[command(name = "contactlab", version, about = ABOUT, long_about = LONG_ABOUT)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run an experiment (default: the built-in configs/quickstart.yaml); rerunning resumes.
    #[command(long_about = "\
Run an experiment into <OUT>/<name>/.

With no CONFIG, runs the default experiment configs/quickstart.yaml, which is embedded in the
binary so it works from any directory. Cells run in parallel (--jobs threads); each finished cell
is written at once to cells/<id>.json, so a killed run loses only the cells in flight and running
the same experiment again computes only the cells still missing. --fresh starts over. A progress
bar shows cells done/total, elapsed time, ETA and the number of diverged cells. Diverged and
failed cells are recorded with their reason; the experiment goes on.")]
    Run(RunArgs),
    /// Validate an experiment file and print its expanded grid (count and table); run nothing.
    Check {
        /// The experiment file (YAML).
        config: PathBuf,
        /// Print only the cells shard I of N runs (`run --shard I/N`).
        #[arg(long, value_name = "I/N")]
        shard: Option<Shard>,
    },
    /// Simulate one cell from flags and write its per-step trajectory (CSV or Parquet).
    #[command(long_about = "\
Simulate one cell from flags and write its per-step trajectory.

  contactlab simulate (--scene NAME [--scene-param KEY=VALUE]... | --mjcf FILE)
                      --formulation NAME [--param KEY=VALUE]...
                      [--timestep H] [--horizon T] --out FILE.csv|FILE.parquet

Values are read as YAML scalars (1e5 is a number, elliptic a string). Columns: t, qpos_0 ..
qpos_{nq-1}, qvel_0 .. qvel_{nv-1}, n_contacts, iterations, best_iterate (the iteration whose
iterate the step returned), residual (the solver's own norm of its returned iterate),
converged (1 if the solver met its stopping test: for ncp_fb the residual tolerance, or the NCP
criterion with feasibility, so a converged step can show a residual above `tolerance`),
diverged. Explicit formulations (penalty) write iterations 0, residual 0, converged 1.
The file can serve as a `reference: {kind: trajectory, file: ...}` of an experiment.")]
    Simulate(SimulateArgs),
    /// Redraw figures and report.md of a results folder from its stored rows alone.
    Report {
        /// A results folder, e.g. results/quickstart.
        dir: PathBuf,
    },
    /// List formulations (parameters, defaults, units), scenes (parameters), metrics and figures.
    List,
    /// Combine the results folders of an experiment's shards into one results folder.
    #[command(long_about = "\
Combine the results folders of an experiment's shards (`run FILE --shard I/N`) into one.

  contactlab merge results/a.shards/shard-1/a results/a.shards/shard-2/a --out results/a

Every folder must be a finished run of the same experiment, config and revision, each shard of
one count N at most once; anything else is an error naming the two folders and what differs.
The merged folder holds every cell row and per-step log, runs.parquet and runs.csv in grid
order, the figures and report redrawn, and a manifest listing each shard's provenance (host,
revision, times, command line). Missing shards are reported; what there is, is merged.")]
    Merge {
        /// The shards' results folders (each `<out>/<name>` of a `run --shard`).
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// The merged results folder (new, or an earlier merge of the same experiment).
        #[arg(long)]
        out: PathBuf,
    },
    /// Write SLURM scripts that run an experiment as a job array of shards, then merge them.
    #[command(long_about = "\
Write SLURM scripts that run an experiment as a job array of N shards, then merge them.

  contactlab slurm configs/timestep_stability.yaml --shards 16 --cpus 4 --time 02:00:00
  bash slurm/timestep_stability/submit.sh      # on the login node

Writes array.sbatch (sbatch --array=1-N: task I runs `contactlab run FILE --shard I/N`),
merge.sbatch (contactlab merge of the N shard folders into <OUT>/<name>) and submit.sh (submits
the array, then the merge with --dependency=afterok on it) into slurm/<name>/. Paths in the
scripts are absolute: the binary and the checkout must be on a file system the compute nodes
share. The experiment is checked first, as by `check`.")]
    Slurm(SlurmArgs),
}

#[derive(Debug, Args)]
struct RunArgs {
    /// The experiment file (YAML); default: the built-in configs/quickstart.yaml.
    config: Option<PathBuf>,
    /// Worker threads (default: the file's `jobs`, else the number of cores); at least 1, more
    /// than the machine's cores are clamped to them with a note.
    #[arg(long, short)]
    jobs: Option<usize>,
    /// Parent folder of results; the experiment writes into <OUT>/<name>/.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Delete this experiment's earlier results and start over instead of resuming.
    #[arg(long)]
    fresh: bool,
    /// Run only shard I of N (1-based): a deterministic 1/N of the cells, the same on every
    /// rerun and machine; combine the shards' folders with `contactlab merge`.
    #[arg(long, value_name = "I/N")]
    shard: Option<Shard>,
}

#[derive(Debug, Args)]
struct SlurmArgs {
    /// The experiment file (YAML).
    config: PathBuf,
    /// Number of shards (array tasks).
    #[arg(long)]
    shards: usize,
    /// CPUs per task (`--cpus-per-task`; each shard runs with `--jobs` this).
    #[arg(long, default_value_t = 1)]
    cpus: usize,
    /// Wall-clock limit per task, SLURM's format (`MM`, `HH:MM:SS`, `D-HH:MM:SS`).
    #[arg(long)]
    time: Option<String>,
    /// Memory per task (`--mem`, e.g. 4G).
    #[arg(long)]
    mem: Option<String>,
    /// Partition (`--partition`).
    #[arg(long)]
    partition: Option<String>,
    /// Account to charge (`--account`).
    #[arg(long)]
    account: Option<String>,
    /// Parent folder of the merged results (shards go to <OUT>/<name>.shards/).
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Where to write the scripts (default: slurm/<name>/).
    #[arg(long, value_name = "DIR")]
    scripts: Option<PathBuf>,
    /// The contactlab binary the tasks run (default: this one).
    #[arg(long, value_name = "FILE")]
    binary: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct SimulateArgs {
    /// Scene registry name.
    #[arg(long, required_unless_present = "mjcf", conflicts_with = "mjcf")]
    scene: Option<String>,
    /// A scene parameter, KEY=VALUE (repeatable).
    #[arg(long = "scene-param", value_name = "KEY=VALUE")]
    scene_param: Vec<String>,
    /// An MJCF model file: the `mjcf` scene with file=FILE.
    #[arg(long, value_name = "FILE")]
    mjcf: Option<PathBuf>,
    /// Formulation registry name.
    #[arg(long)]
    formulation: String,
    /// Where to run: cpu (default), burn-ndarray, burn-wgpu or burn-cuda (the burn engines
    /// need the build features `burn`, `wgpu`, `cuda`).
    #[arg(long, default_value = "cpu")]
    engine: String,
    /// A formulation parameter, KEY=VALUE (repeatable).
    #[arg(long = "param", value_name = "KEY=VALUE")]
    param: Vec<String>,
    /// Timestep (s); default: the scene model's timestep.
    #[arg(long, value_name = "H")]
    timestep: Option<f64>,
    /// Simulated time (s); default: the scene's horizon.
    #[arg(long, value_name = "T")]
    horizon: Option<f64>,
    /// Most steps (horizon / timestep) the run may take (default 10,000,000).
    #[arg(long, value_name = "N")]
    max_steps: Option<u64>,
    /// Output file, .csv or .parquet.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
}

/// Bad input that is not in an experiment file (a flag, a name, a parameter): exit status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InputError(pub String);

/// Run the CLI with `catalog`; returns the process exit status.
pub fn main_with(cli: Cli, catalog: &Catalog) -> ExitCode {
    let result = match cli.command {
        Command::Run(a) => cmd_run(a, catalog),
        Command::Check { config, shard } => cmd_check(&config, shard.as_ref(), catalog),
        Command::Simulate(a) => cmd_simulate(a, catalog),
        Command::Report { dir } => cmd_report(&dir),
        Command::List => {
            cmd_list(catalog);
            Ok(())
        }
        Command::Merge { dirs, out } => cmd_merge(&dirs, &out),
        Command::Slurm(a) => cmd_slurm(a, catalog),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let bad_cell = matches!(
                e.downcast_ref::<ResultsError>(),
                Some(ResultsError::BadCell { .. })
            );
            let bad_merge = matches!(
                e.downcast_ref::<MergeError>(),
                Some(MergeError::Input { .. } | MergeError::Conflict { .. })
            );
            let bad_input = e.downcast_ref::<ConfigError>().is_some()
                || e.downcast_ref::<InputError>().is_some()
                || bad_cell
                || bad_merge;
            // `{:#}` keeps the cause after any context, on one line.
            eprintln!("error: {e:#}");
            ExitCode::from(if bad_input { 2 } else { 1 })
        }
    }
}

/// The experiment file (or the built-in quickstart), parsed: its name, config and text.
fn load_config(
    path: Option<&Path>,
) -> Result<(PathBuf, config::ExperimentConfig, String), ConfigError> {
    Ok(match path {
        Some(p) => {
            let (cfg, text) = config::load(p)?;
            (p.to_path_buf(), cfg, text)
        }
        None => {
            let file = PathBuf::from("configs/quickstart.yaml (built in)");
            let cfg = config::parse(&file, QUICKSTART_YAML)?;
            (file, cfg, QUICKSTART_YAML.to_string())
        }
    })
}

fn cmd_check(path: &Path, shard: Option<&Shard>, catalog: &Catalog) -> anyhow::Result<()> {
    let (_, table, cells) = checked_experiment(path, shard, catalog)?;
    println!("{}: ok", path.display());
    if let Some(s) = shard {
        println!("shard {s}: these cells of the grid's {cells}");
    }
    print!("{table}");
    Ok(())
}

/// Check the experiment file `path` as `check` does (load, expand the grid): its name, the
/// grid (or `shard`'s part of it) as a plain-text table, and the grid's number of cells.
fn checked_experiment(
    path: &Path,
    shard: Option<&Shard>,
    catalog: &Catalog,
) -> anyhow::Result<(String, String, usize)> {
    let (file, cfg, text) = load_config(Some(path))?;
    let name = cfg.name.clone();
    if cfg.study.is_control_synthesis() {
        let mut plan = study_control::plan(&file, &text, cfg, catalog)?;
        let n = plan.cells.len();
        plan.cells = study_control::shard_cells(&plan, shard)
            .into_iter()
            .cloned()
            .collect();
        return Ok((name, study_control::grid_table(&plan), n));
    }
    if cfg.study.is_throughput() {
        let mut plan = study_throughput::plan(&file, &text, cfg, catalog)?;
        let n = plan.cells.len();
        plan.cells = study_throughput::run::shard_cells(&plan, shard)
            .into_iter()
            .cloned()
            .collect();
        return Ok((name, study_throughput::grid_table(&plan), n));
    }
    let mut plan = sweep::plan(&file, &text, cfg, catalog)?;
    if let config::Study::Gradient(study) = &plan.config.study {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let cells = contactlab_harness::study_gradient::expand(
            path,
            &text,
            &plan.config,
            study,
            &plan.cells,
            catalog,
        )?;
        let mine: Vec<_> = contactlab_harness::study_gradient::run::shard_cells(&cells, shard)
            .into_iter()
            .cloned()
            .collect();
        return Ok((
            name,
            contactlab_harness::study_gradient::grid_table(&mine),
            cells.len(),
        ));
    }
    let n = plan.cells.len();
    plan.cells = runner::shard_cells(&plan, shard)
        .into_iter()
        .cloned()
        .collect();
    Ok((name, sweep::grid_table(&plan), n))
}

fn cmd_run(a: RunArgs, catalog: &Catalog) -> anyhow::Result<()> {
    let (file, cfg, text) = load_config(a.config.as_deref())?;
    check_shard_folder(&a.out.join(&cfg.name), a.shard.as_ref())?;
    if cfg.study.is_control_synthesis() {
        let plan = study_control::plan(&file, &text, cfg, catalog)?;
        return cmd_run_control(a, &plan);
    }
    if cfg.study.is_throughput() {
        let plan = study_throughput::plan(&file, &text, cfg, catalog)?;
        return cmd_run_throughput(a, &plan, catalog);
    }
    let plan = sweep::plan(&file, &text, cfg, catalog)?;
    let opts = run_options(&a, &plan.config)?;
    let dir = opts.dir.clone();
    let s = runner::run(&plan, catalog, &opts)
        .with_context(|| format!("writing results to {}", dir.display()))?;
    let skipped = match s.skipped {
        0 => String::new(),
        n => format!(", {n} skipped"),
    };
    println!(
        "{}: {} cells ({} resumed, {} run): {} ok, {} diverged, {} failed{skipped}",
        run_label(&plan.config.name, a.shard.as_ref()),
        s.total,
        s.resumed,
        s.ran,
        s.ok,
        s.diverged,
        s.failed
    );
    println!("results: {}", dir.display());
    // The rows are written; figures or a report that could not be are still a failed run.
    match s.outputs_error {
        Some(e) => Err(anyhow::anyhow!("{}: {e}", dir.display())),
        None => Ok(()),
    }
}

/// The experiment's name in `run`'s summary, with the shard if there is one.
fn run_label(name: &str, shard: Option<&Shard>) -> String {
    match shard {
        Some(s) => format!("{name} (shard {s})"),
        None => name.to_string(),
    }
}

/// Refuse to run a shard into a folder that holds the whole run or another shard, or the whole
/// run into a shard's folder: their rows, report and manifest would replace each other's (and
/// `--fresh` would delete the other's cells).
fn check_shard_folder(dir: &Path, shard: Option<&Shard>) -> Result<(), InputError> {
    let m = contactlab_harness::results::Manifest::read(dir);
    if m.cell_ids.is_empty() {
        return Ok(());
    }
    let wanted = shard.map(|s| s.to_string()).unwrap_or_default();
    if m.shard == wanted {
        return Ok(());
    }
    let holds = |s: &str| {
        if s.is_empty() {
            "the whole run".to_string()
        } else {
            format!("shard {s}")
        }
    };
    Err(InputError(format!(
        "{} holds {} of this experiment, not {}; give each shard its own --out (e.g. --out \
         shards/{}), or remove that folder",
        dir.display(),
        holds(&m.shard),
        holds(&wanted),
        shard.map_or(1, |s| s.index)
    )))
}

/// The run options of `run`: the results folder `<out>/<name>/` and the worker count
/// (`--jobs`, else the experiment's `jobs`, clamped to the cores with a note).
fn run_options(a: &RunArgs, cfg: &config::ExperimentConfig) -> anyhow::Result<RunOptions> {
    if a.jobs == Some(0) {
        return Err(InputError("--jobs must be at least 1".into()).into());
    }
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let (jobs, note) = clamp_jobs(a.jobs.or(cfg.jobs), cores);
    if let Some(note) = note {
        eprintln!("note: {note}");
    }
    Ok(RunOptions {
        dir: a.out.join(&cfg.name),
        jobs,
        fresh: a.fresh,
        progress: true,
        stop_after: None,
        shard: a.shard,
    })
}

/// `run` for a control-synthesis study ([`study_control`]).
fn cmd_run_control(a: RunArgs, plan: &study_control::ControlPlan) -> anyhow::Result<()> {
    let opts = run_options(&a, &plan.config)?;
    let dir = opts.dir.clone();
    let s = study_control::run(plan, &opts)
        .with_context(|| format!("writing results to {}", dir.display()))?;
    println!(
        "{}: {} cells ({} resumed, {} run): {} ok, {} failed",
        run_label(&plan.config.name, a.shard.as_ref()),
        s.total,
        s.resumed,
        s.ran,
        s.ok,
        s.failed
    );
    println!("results: {}", dir.display());
    match s.outputs_error {
        Some(e) => Err(anyhow::anyhow!("{}: {e}", dir.display())),
        None => Ok(()),
    }
}

/// `run` for a throughput study ([`study_throughput`]).
fn cmd_run_throughput(
    a: RunArgs,
    plan: &study_throughput::ThroughputPlan,
    catalog: &Catalog,
) -> anyhow::Result<()> {
    let opts = run_options(&a, &plan.config)?;
    let dir = opts.dir.clone();
    let t0 = std::time::Instant::now();
    let s = study_throughput::run::run(plan, catalog, &opts)
        .with_context(|| format!("writing results to {}", dir.display()))?;
    println!(
        "{}: {} cells ({} resumed, {} run): {} ok, {} diverged, {} failed, {} skipped in {:.0} s",
        run_label(&plan.config.name, a.shard.as_ref()),
        s.total,
        s.resumed,
        s.ran,
        s.ok,
        s.diverged,
        s.failed,
        s.skipped,
        t0.elapsed().as_secs_f64()
    );
    println!("results: {}", dir.display());
    match s.outputs_error {
        Some(e) => Err(anyhow::anyhow!("{}: {e}", dir.display())),
        None => Ok(()),
    }
}

fn cmd_merge(dirs: &[PathBuf], out: &Path) -> anyhow::Result<()> {
    let s = contactlab_harness::merge::merge(dirs, out)?;
    println!(
        "merged {} results folder{} into {}: {} of {} cells have rows",
        dirs.len(),
        if dirs.len() == 1 { "" } else { "s" },
        out.display(),
        s.rows,
        s.cells_total
    );
    let cells = |n: usize| format!("{n} cell{}", if n == 1 { "" } else { "s" });
    if !s.missing_shards.is_empty() {
        let one = s.missing_shards.len() == 1;
        let (shards, are, them, they_have) = if one {
            ("shard", "is", "it", "it has")
        } else {
            ("shards", "are", "them", "they have")
        };
        let without = match s.cells_total - s.rows {
            1 => "1 cell has".to_string(),
            n => format!("{} have", cells(n)),
        };
        eprintln!(
            "warning: {shards} {} {are} missing: {without} no row; merge again with {them} once \
             {they_have} run",
            s.missing_shards.join(", ")
        );
    } else if s.rows < s.cells_total {
        eprintln!("warning: {} without a row", cells(s.cells_total - s.rows));
    }
    if !s.missing_logs.is_empty() {
        eprintln!(
            "warning: the experiment logs steps (log_steps: true), but {} of the merged cells \
             have no per-step log, e.g. {}",
            s.missing_logs.len(),
            s.missing_logs[0]
        );
    }
    match s.outputs_error {
        Some(e) => Err(anyhow::anyhow!("{}: {e}", out.display())),
        None => Ok(()),
    }
}

fn cmd_slurm(a: SlurmArgs, catalog: &Catalog) -> anyhow::Result<()> {
    if a.shards == 0 {
        return Err(InputError("--shards must be at least 1".into()).into());
    }
    if a.cpus == 0 {
        return Err(InputError("--cpus must be at least 1".into()).into());
    }
    if let Some(t) = a
        .time
        .as_deref()
        .filter(|t| !contactlab_harness::slurm::valid_time(t))
    {
        return Err(InputError(format!(
            "--time '{t}': expected SLURM's format, MM, HH:MM:SS or D-HH:MM:SS"
        ))
        .into());
    }
    for (flag, v) in [
        ("--partition", &a.partition),
        ("--account", &a.account),
        ("--mem", &a.mem),
    ] {
        if let Some(v) = v
            .as_deref()
            .filter(|v| !contactlab_harness::slurm::valid_directive_value(v))
        {
            return Err(InputError(format!(
                "{flag} '{v}': only letters, digits and _ - . , : can stand on an #SBATCH line"
            ))
            .into());
        }
    }
    let (experiment, _, cells) = checked_experiment(&a.config, None, catalog)?;
    if a.shards > cells {
        return Err(InputError(format!(
            "--shards {}: the experiment has {cells} cells, so {} array tasks would run nothing; \
             use at most {cells}",
            a.shards,
            a.shards - cells
        ))
        .into());
    }
    let cwd = std::env::current_dir().context("the current folder")?;
    let abs = |p: &Path| {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            cwd.join(p)
        }
    };
    let binary = match a.binary {
        Some(b) => abs(&b),
        None => std::env::current_exe().context("this binary's path")?,
    };
    if !binary.is_file() {
        return Err(InputError(format!("--binary {}: no such file", binary.display())).into());
    }
    // The final merge's own check, now, before any shard runs.
    contactlab_harness::merge::check_out(&abs(&a.out).join(&experiment), None)?;
    let opts = SlurmOptions {
        experiment: experiment.clone(),
        config: abs(&a.config),
        shards: a.shards,
        cpus: a.cpus,
        time: a.time,
        mem: a.mem,
        partition: a.partition,
        account: a.account,
        binary,
        workdir: cwd.clone(),
        out: abs(&a.out),
    };
    let dir = a
        .scripts
        .map(|d| abs(&d))
        .unwrap_or_else(|| cwd.join("slurm").join(&experiment));
    let written = opts.write(&dir)?;
    for p in &written {
        println!("wrote {}", p.display());
    }
    println!(
        "submit on the login node: bash {}",
        dir.join("submit.sh").display()
    );
    Ok(())
}

fn cmd_report(dir: &Path) -> anyhow::Result<()> {
    let written = report::redraw(dir).map_err(anyhow::Error::msg)?;
    for p in written {
        println!("{}", p.display());
    }
    Ok(())
}

/// Worker threads for a request of `requested` (`None`: all) on a machine of `cores` cores:
/// at most `cores`, with a note when a larger request was clamped. `Some(0)` is refused
/// before this is called.
pub fn clamp_jobs(requested: Option<usize>, cores: usize) -> (usize, Option<String>) {
    let cores = cores.max(1);
    match requested {
        Some(n) if n > cores => (
            cores,
            Some(format!(
                "jobs = {n} is more than this machine's {cores} cores; running {cores} threads"
            )),
        ),
        Some(n) => (n, None),
        None => (cores, None),
    }
}

/// Parse `KEY=VALUE` flags into a JSON object.
fn params(flags: &[String], flag: &str) -> Result<Value, InputError> {
    let mut m = Map::new();
    for f in flags {
        let (k, v) = f
            .split_once('=')
            .filter(|(k, _)| !k.is_empty())
            .ok_or_else(|| InputError(format!("{flag} '{f}': expected KEY=VALUE")))?;
        m.insert(k.to_string(), config::parse_scalar(v));
    }
    Ok(Value::Object(m))
}

fn cmd_simulate(a: SimulateArgs, catalog: &Catalog) -> anyhow::Result<()> {
    // --mjcf FILE is the registry's `mjcf` scene with `file=FILE`, once the MJCF loader has
    // registered it.
    let mut scene_params = params(&a.scene_param, "--scene-param")?;
    let scene_name = match &a.mjcf {
        Some(file) if catalog.scene("mjcf").is_ok() => {
            scene_params["file"] = Value::String(file.display().to_string());
            "mjcf"
        }
        Some(_) => return Err(InputError(
            "--mjcf arrives with the MJCF loader, which is not in this build yet; use --scene NAME"
                .into(),
        )
        .into()),
        None => a.scene.as_deref().unwrap_or_default(),
    };
    let ext = a.out.extension().and_then(|e| e.to_str()).unwrap_or("");
    if ext != "csv" && ext != "parquet" {
        return Err(InputError(format!(
            "--out {}: the file must end in .csv or .parquet",
            a.out.display()
        ))
        .into());
    }
    let scene = catalog
        .build_scene(scene_name, &scene_params)
        .map_err(InputError)?;
    let fparams = params(&a.param, "--param")?;
    let mut f = catalog
        .build_formulation(&a.formulation, &fparams)
        .map_err(InputError)?;
    contactlab_solvers::engine::find(&a.engine).map_err(|e| InputError(e.to_string()))?;
    let h = a.timestep.unwrap_or(scene.model.options.timestep);
    let horizon = a.horizon.unwrap_or(scene.horizon);
    if !(h.is_finite() && h > 0.0) {
        return Err(InputError(format!("--timestep {h}: must be a finite number > 0 (s)")).into());
    }
    if !(horizon.is_finite() && horizon >= h) {
        return Err(InputError(format!(
            "--horizon {horizon}: must be at least one step ({h} s)"
        ))
        .into());
    }
    let max_steps = a
        .max_steps
        .unwrap_or(contactlab_scenarios::limits::DEFAULT_MAX_STEPS);
    let steps = sweep::step_count_f64(horizon, h);
    if steps > max_steps as f64 {
        return Err(InputError(format!(
            "--timestep {h:e} --horizon {horizon:e}: the run needs {steps:.3e} steps, over the limit of {max_steps}; pass --max-steps to raise it"
        ))
        .into());
    }
    let (ignored, out) = if a.engine == "cpu" {
        let ignored = contactlab_solvers::features::joined(&f.ignored_features(&scene.model));
        (
            ignored,
            runner::rollout(&scene, f.as_mut(), h, horizon, None, true),
        )
    } else {
        let mut stepper = contactlab_solvers::engine::batched_stepper(
            &a.engine,
            &a.formulation,
            &fparams,
            &scene.model,
            &scene.initial,
            1,
        )
        .map_err(|e| InputError(e.to_string()))?;
        let ignored = contactlab_solvers::features::joined(&stepper.ignored_features());
        let out = runner::rollout_worlds(&scene, stepper.as_mut(), h, horizon, None, true);
        (ignored, out)
    };
    let log = out.log.expect("rollout keeps the log when asked");
    log.write(&a.out)?;
    let ignored = if ignored.is_empty() {
        String::new()
    } else {
        format!("; ignored features: {ignored}")
    };
    // The solver's unconverged steps are part of the summary, not only of the log's column.
    let unconverged = match out.acc.nonconverged() {
        0 => String::new(),
        n => format!(" ({n} of them unconverged; the log's `converged` column says which)"),
    };
    match &out.diverged {
        None => println!(
            "{}: {} steps{unconverged}, ok{ignored}",
            a.out.display(),
            out.acc.steps()
        ),
        Some(why) => println!(
            "{}: {} steps{unconverged}, diverged: {why}{ignored}",
            a.out.display(),
            out.acc.steps()
        ),
    }
    Ok(())
}

/// Parameter lines of `list`, aligned on the longest name and default.
fn print_params(params: &[contactlab_solvers::formulation::ParamDoc]) {
    let wn = params.iter().map(|p| p.name.len()).max().unwrap_or(0);
    let wd = params
        .iter()
        .map(|p| p.default.len())
        .max()
        .unwrap_or(0)
        .min(24);
    for p in params {
        println!(
            "      {:<wn$} default {:<wd$} [{}]  {}",
            p.name, p.default, p.unit, p.doc
        );
    }
}

fn cmd_list(catalog: &Catalog) {
    println!("FORMULATIONS");
    for e in &catalog.formulations {
        println!("  {:<16} {}", e.name, e.description);
        print_params(e.params);
    }
    println!("\nSCENES");
    if catalog.scenes.is_empty() {
        println!("  (none registered yet)");
    }
    for e in &catalog.scenes {
        println!("  {:<16} {}", e.name, e.description);
        print_params(e.params);
    }
    println!("\nENGINES (`engine:` in experiments, `simulate --engine`)");
    for e in contactlab_solvers::engine::ENGINES {
        let built = match (e.built, e.feature) {
            (true, _) | (_, None) => String::new(),
            (false, Some(f)) => format!(" (not in this build: feature `{f}`)"),
        };
        println!("  {:<16} {}{built}", e.name, e.description);
    }
    println!(
        "\nMETRICS (columns of runs.parquet; the suffix is the unit: _m, _s, _j, _ns = N s, _rad)"
    );
    for c in COLUMNS {
        println!("  {:<34} {}", c.name, c.doc);
    }
    println!("\nFIGURES");
    for k in FigureKind::ALL {
        println!("  {}", k.name());
    }
}
