//! Sharded sweeps (issue 21): an experiment run as 3 shards in separate processes and merged
//! has the rows of the same experiment run whole (every column but the timing ones); merges of
//! folders that are not shards of one run are refused, naming both folders; the SLURM scripts
//! are valid bash with the array, the shard argument per task and the dependent merge.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use contactlab_harness::results::{read_runs, Manifest, Row};

/// A small real experiment: 2 scenes x 2 formulations x 3 timesteps = 12 cells.
const EXPERIMENT: &str = "\
name: sharded
scenes:
  - name: box_drop
  - name: cartpole
formulations:
  - name: soft_convex
  - name: penalty
    ke: 1.0e5
sweep:
  timestep: [0.002, 0.005, 0.01]
horizon: 0.3
reference: {kind: same_formulation, timestep: 0.001}
";

/// Columns that measure the machine, not the physics.
const TIMING: &[&str] = &[
    "wall_time_s",
    "steps_per_s",
    "real_time_factor",
    "peak_rss_mib",
    "threads",
];

mod common;
use common::contactlab_builtin as contactlab;

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Rows without their timing columns, as JSON (NaN as null), by cell id.
fn physics(dir: &Path) -> Vec<(String, serde_json::Value)> {
    read_runs(dir)
        .unwrap()
        .into_iter()
        .map(|mut r: Row| {
            for c in TIMING {
                r.0.remove(*c);
            }
            (
                r.str("cell_id").to_string(),
                serde_json::to_value(&r).unwrap(),
            )
        })
        .collect()
}

fn shard_dir(tmp: &Path, i: usize) -> PathBuf {
    tmp.join(format!("shards/shard-{i}/sharded"))
}

#[test]
fn three_shards_merged_equal_the_whole_run() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    std::fs::write(t.join("exp.yaml"), EXPERIMENT).unwrap();
    // The three shards as separate processes, at once.
    let children: Vec<_> = (1..=3)
        .map(|i| {
            Command::new(env!("CARGO_BIN_EXE_contactlab"))
                .args([
                    "run",
                    "exp.yaml",
                    "--jobs",
                    "1",
                    "--shard",
                    &format!("{i}/3"),
                    "--out",
                    &format!("shards/shard-{i}"),
                ])
                .current_dir(t)
                // As SLURM sets it in array task i of job 77.
                .env("SLURM_ARRAY_JOB_ID", "77")
                .env("SLURM_ARRAY_TASK_ID", i.to_string())
                .output()
        })
        .collect();
    let mut counts = Vec::new();
    for (i, c) in children.into_iter().enumerate() {
        let o = c.unwrap();
        assert!(o.status.success(), "shard {}: {}", i + 1, text(&o));
        let m = Manifest::read(&shard_dir(t, i + 1));
        assert_eq!(m.shard, format!("{}/3", i + 1));
        assert_eq!(m.cells_total, 12);
        assert_eq!(m.cell_ids.len(), 12);
        counts.push(m.shard_cells);
        assert_eq!(physics(&shard_dir(t, i + 1)).len(), m.shard_cells);
    }
    // Round-robin over 12 cells: 4 each.
    assert_eq!(counts, vec![4, 4, 4]);
    // Rerunning a shard resumes it: nothing recomputed, nothing added.
    let o = contactlab(
        &[
            "run",
            "exp.yaml",
            "--jobs",
            "1",
            "--shard",
            "2/3",
            "--out",
            "shards/shard-2",
        ],
        t,
    );
    assert!(
        text(&o).contains("4 cells (4 resumed, 0 run)"),
        "{}",
        text(&o)
    );

    let o = contactlab(&["run", "exp.yaml", "--jobs", "1", "--out", "whole"], t);
    assert!(o.status.success(), "{}", text(&o));
    let o = contactlab(
        &[
            "merge",
            "shards/shard-1/sharded",
            "shards/shard-2/sharded",
            "shards/shard-3/sharded",
            "--out",
            "merged",
        ],
        t,
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("12 of 12 cells have rows"),
        "{}",
        text(&o)
    );
    let whole = physics(&t.join("whole/sharded"));
    let merged = physics(&t.join("merged"));
    assert_eq!(whole.len(), 12);
    // Same rows in the same (grid) order, every non-timing column equal.
    assert_eq!(
        whole.iter().map(|(id, _)| id).collect::<Vec<_>>(),
        merged.iter().map(|(id, _)| id).collect::<Vec<_>>()
    );
    for ((id, a), (_, b)) in whole.iter().zip(&merged) {
        assert_eq!(a, b, "cell {id}");
    }
    // Real results, not empty rows: every cell ran, most to their horizon (the penalty
    // diverges at the larger timesteps, a result like any other).
    let rows = read_runs(&t.join("merged")).unwrap();
    let statuses: Vec<(&str, &str, f64, &str)> = rows
        .iter()
        .map(|r| {
            (
                r.str("scene"),
                r.str("label"),
                r.f64("timestep_s"),
                r.str("status"),
            )
        })
        .collect();
    assert!(
        rows.iter()
            .all(|r| matches!(r.str("status"), "ok" | "diverged")),
        "{statuses:?}"
    );
    let ok: Vec<&Row> = rows.iter().filter(|r| r.str("status") == "ok").collect();
    assert!(ok.len() >= 8, "{statuses:?}");
    assert!(ok.iter().all(|r| r.f64("simulated_time_s") >= 0.3 - 1e-9));
    assert!(ok.iter().all(|r| r.f64("traj_error_final").is_finite()));
    // The merged folder: figures and report redrawn, each shard's provenance kept.
    assert!(t.join("merged/report.md").is_file());
    assert!(t.join("merged/runs.csv").is_file());
    let m = Manifest::read(&t.join("merged"));
    assert_eq!(
        m.cell_ids,
        Manifest::read(&t.join("whole/sharded")).cell_ids
    );
    assert_eq!(
        m.merged
            .iter()
            .map(|r| r.manifest.shard.as_str())
            .collect::<Vec<_>>(),
        vec!["1/3", "2/3", "3/3"]
    );
    assert!(m
        .merged
        .iter()
        .all(|r| r.cells == 4 && !r.manifest.end.is_empty() && r.manifest.cell_ids.is_empty()));
    assert!(m.merged[0].manifest.command_line.contains("--shard 1/3"));
    assert_eq!(m.merged[2].manifest.scheduler_job, "slurm job 77_3");
    let report = std::fs::read_to_string(t.join("merged/report.md")).unwrap();
    assert!(report.contains("(shard 3/3): 4 cells on"), "{report}");
    assert!(report.contains("slurm job 77_3"), "{report}");
    // A `report` of the merged folder redraws from its rows.
    let o = contactlab(&["report", "merged"], t);
    assert!(o.status.success(), "{}", text(&o));

    // Two shards only: merged, with the missing one named.
    let o = contactlab(
        &[
            "merge",
            "shards/shard-1/sharded",
            "shards/shard-3/sharded",
            "--out",
            "partial",
        ],
        t,
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("shard 2/3 is missing: 4 cells have no row"),
        "{}",
        text(&o)
    );
    assert_eq!(physics(&t.join("partial")).len(), 8);
}

#[test]
fn merges_of_folders_that_are_not_shards_of_one_run_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    std::fs::write(t.join("exp.yaml"), EXPERIMENT).unwrap();
    // The same experiment with another horizon: another config.
    std::fs::write(
        t.join("other.yaml"),
        EXPERIMENT.replace("horizon: 0.3", "horizon: 0.2"),
    )
    .unwrap();
    for (file, shard, out) in [
        ("exp.yaml", "1/2", "a"),
        ("other.yaml", "2/2", "b"),
        ("exp.yaml", "1/3", "c"),
    ] {
        let o = contactlab(
            &["run", file, "--jobs", "1", "--shard", shard, "--out", out],
            t,
        );
        assert!(o.status.success(), "{}", text(&o));
    }
    let refused = |args: &[&str], needles: &[&str]| {
        let o = contactlab(args, t);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        for n in needles {
            assert!(text(&o).contains(n), "'{n}' in {}", text(&o));
        }
        assert!(!t.join("out/runs.parquet").exists());
    };
    refused(
        &["merge", "a/sharded", "b/sharded", "--out", "out"],
        &["a/sharded and b/sharded", "different configs", "horizon"],
    );
    refused(
        &["merge", "a/sharded", "c/sharded", "--out", "out"],
        &[
            "a/sharded and c/sharded",
            "shards of different counts (1/2 against 1/3)",
        ],
    );
    refused(
        &["merge", "a/sharded", "a/sharded", "--out", "out"],
        &["a/sharded", "given twice"],
    );
    refused(
        &["merge", "a/sharded", "nowhere", "--out", "out"],
        &["nowhere", "no such results folder"],
    );
    // A shard's --out folder instead of its results folder: the right one is named.
    refused(
        &["merge", "a", "--out", "out"],
        &["a: not a results folder", "did you mean a/sharded?"],
    );
    std::fs::write(t.join("afile"), "x").unwrap();
    refused(
        &["merge", "a/sharded", "--out", "afile"],
        &["afile: --out is a file, not a folder"],
    );
    // Nothing was written into the folder that is not a results folder.
    assert!(!t.join("a/.lock").exists());
    // --out holding a run (not an earlier merge) is not replaced.
    refused(
        &["merge", "a/sharded", "--out", "c/sharded"],
        &["c/sharded", "--out holds shard 1/3, not an earlier merge"],
    );
    // A shard run into a folder that holds another shard is refused (its rows would be
    // replaced), --fresh or not.
    for fresh in [false, true] {
        let mut args = vec![
            "run", "exp.yaml", "--jobs", "1", "--shard", "2/3", "--out", "c",
        ];
        if fresh {
            args.push("--fresh");
        }
        let o = contactlab(&args, t);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(
            text(&o).contains("holds shard 1/3 of this experiment, not shard 2/3"),
            "{}",
            text(&o)
        );
    }
    assert_eq!(Manifest::read(&t.join("c/sharded")).shard_cells, 4);
    // A revision that differs (a shard run at another commit).
    std::fs::write(t.join("other.yaml"), EXPERIMENT).unwrap();
    let o = contactlab(
        &[
            "run",
            "other.yaml",
            "--jobs",
            "1",
            "--shard",
            "2/2",
            "--out",
            "d",
            "--fresh",
        ],
        t,
    );
    assert!(o.status.success(), "{}", text(&o));
    let md = t.join("d/sharded/manifest.json");
    let edited = std::fs::read_to_string(&md).unwrap().replacen(
        "\"revision\": \"",
        "\"revision\": \"0000000",
        1,
    );
    std::fs::write(&md, edited).unwrap();
    refused(
        &["merge", "a/sharded", "d/sharded", "--out", "out"],
        &["a/sharded and d/sharded", "different revisions"],
    );
}

/// `check --shard I/N` previews the cells a shard runs: 4 of the 12, and the three shards'
/// cell ids are the grid's, once each.
#[test]
fn check_previews_a_shard() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("exp.yaml"), EXPERIMENT).unwrap();
    let ids = |o: &Output| -> Vec<String> {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| {
                l.split_whitespace()
                    .find(|w| w.len() == 16 && w.chars().all(|c| c.is_ascii_hexdigit()))
                    .map(str::to_string)
            })
            .collect()
    };
    let whole = contactlab(&["check", "exp.yaml"], tmp.path());
    let mut all = ids(&whole);
    assert_eq!(all.len(), 12, "{}", text(&whole));
    let mut parts = Vec::new();
    for i in 1..=3 {
        let o = contactlab(
            &["check", "exp.yaml", "--shard", &format!("{i}/3")],
            tmp.path(),
        );
        assert!(o.status.success(), "{}", text(&o));
        assert!(text(&o).contains(&format!("shard {i}/3: these cells of the grid's 12")));
        let mine = ids(&o);
        assert_eq!(mine.len(), 4, "{}", text(&o));
        parts.extend(mine);
    }
    all.sort();
    parts.sort();
    assert_eq!(all, parts);
}

#[test]
fn a_bad_shard_argument_is_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("exp.yaml"), EXPERIMENT).unwrap();
    for bad in ["0/3", "4/3", "x"] {
        let o = contactlab(&["run", "exp.yaml", "--shard", bad], tmp.path());
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", text(&o));
        assert!(text(&o).contains("I/N"), "{}", text(&o));
        assert!(!tmp.path().join("results").exists());
    }
}

#[test]
fn slurm_scripts_are_valid_bash_with_the_array_the_shards_and_the_dependent_merge() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    std::fs::write(t.join("exp.yaml"), EXPERIMENT).unwrap();
    let o = contactlab(
        &[
            "slurm",
            "exp.yaml",
            "--shards",
            "3",
            "--cpus",
            "4",
            "--time",
            "01:30:00",
            "--partition",
            "short",
        ],
        t,
    );
    assert!(o.status.success(), "{}", text(&o));
    let dir = t.join("slurm/sharded");
    let read = |n: &str| std::fs::read_to_string(dir.join(n)).unwrap();
    let (array, merge, submit) = (
        read("array.sbatch"),
        read("merge.sbatch"),
        read("submit.sh"),
    );
    for (name, s) in [("array", &array), ("merge", &merge), ("submit", &submit)] {
        let f = dir.join(match name {
            "submit" => "submit.sh".to_string(),
            n => format!("{n}.sbatch"),
        });
        let check = Command::new("bash").arg("-n").arg(&f).output().unwrap();
        assert!(check.status.success(), "{name}: {}", text(&check));
        assert!(s.starts_with("#!/bin/bash\n"), "{name}");
    }
    let root = std::fs::canonicalize(t).unwrap();
    let shards = root.join("results/sharded.shards");
    assert!(array.contains("#SBATCH --array=1-3\n"), "{array}");
    assert!(array.contains("#SBATCH --cpus-per-task=4\n"));
    assert!(array.contains("#SBATCH --time=01:30:00\n"));
    assert!(array.contains("#SBATCH --partition=short\n"));
    assert!(array.contains("--shard \"${shard}/3\" --jobs 4"), "{array}");
    assert!(array.contains("shard=\"${SLURM_ARRAY_TASK_ID}\""));
    assert!(array.contains(&format!(
        "--out '{}'/shard-\"${{shard}}\"",
        shards.display()
    )));
    assert!(array.contains(&format!("'{}'", root.join("exp.yaml").display())));
    assert!(array.contains(env!("CARGO_BIN_EXE_contactlab")));
    // The merge: every shard's folder, into results/sharded.
    assert!(merge.contains(" merge \\\n"));
    for i in 1..=3 {
        assert!(
            merge.contains(&format!(
                "'{}'",
                shards.join(format!("shard-{i}/sharded")).display()
            )),
            "{merge}"
        );
    }
    assert!(merge.contains(&format!(
        "--out '{}'",
        root.join("results/sharded").display()
    )));
    // Submitted after the whole array.
    // Log files named on sbatch's command line (shell-quoted), never on #SBATCH lines, which
    // sbatch splits at spaces.
    assert!(submit.contains(&format!(
        "sbatch --parsable --output='{}' \"$here/array.sbatch\"",
        shards.join("slurm-%A_%a.out").display()
    )));
    assert!(submit.contains("--dependency=afterok:\"$array\""));
    assert!(submit.contains("\"$here/merge.sbatch\""));
    for s in [&array, &merge] {
        for l in s.lines().filter(|l| l.starts_with("#SBATCH")) {
            assert!(
                !l.contains('/') && !l.contains(' ') || l.matches(' ').count() == 1,
                "{l}"
            );
        }
    }
    // The array's #SBATCH lines come before any command (sbatch stops reading them there).
    let first_command = array
        .lines()
        .position(|l| !l.starts_with('#') && !l.is_empty())
        .unwrap();
    assert!(array
        .lines()
        .skip(first_command)
        .all(|l| !l.starts_with("#SBATCH")));

    // A merge destination that holds a run (not an earlier merge): refused before any shard
    // runs, as the final merge would refuse it.
    std::fs::create_dir_all(t.join("held/sharded")).unwrap();
    std::fs::write(
        t.join("held/sharded/config.resolved.yaml"),
        "name: sharded\n",
    )
    .unwrap();
    std::fs::write(t.join("held/sharded/manifest.json"), "{}").unwrap();
    let o = contactlab(
        &[
            "slurm",
            "exp.yaml",
            "--shards",
            "2",
            "--out",
            "held",
            "--scripts",
            "bad",
        ],
        t,
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("held/sharded: --out holds a run, not an earlier merge"),
        "{}",
        text(&o)
    );
    assert!(!t.join("bad").exists());

    // Bad input: exit 2, nothing written.
    for (args, needle) in [
        (vec!["slurm", "exp.yaml", "--shards", "0"], "--shards"),
        (
            vec!["slurm", "exp.yaml", "--shards", "2", "--time", "2h"],
            "--time '2h'",
        ),
        (
            vec!["slurm", "missing.yaml", "--shards", "2"],
            "missing.yaml",
        ),
        (
            vec!["slurm", "exp.yaml", "--shards", "13"],
            "the experiment has 12 cells",
        ),
        (
            vec!["slurm", "exp.yaml", "--shards", "2", "--partition", "a b"],
            "--partition 'a b'",
        ),
        (
            vec!["slurm", "exp.yaml", "--shards", "2", "--binary", "nowhere"],
            "nowhere: no such file",
        ),
    ] {
        let o = contactlab(&[args.as_slice(), &["--scripts", "bad"]].concat(), t);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains(needle), "{}", text(&o));
        assert!(!t.join("bad").exists());
    }
}

/// The control-synthesis study's batches of worlds stay whole: configs/control_synthesis.yaml
/// (ncp_fb's two cpu adjoints per instance; ncp_fb by `adjoint_batched`, soft_convex and
/// signorini by `autodiff`, each as one batch of 50 worlds per coordinates) as 3 shards: each batch lies in one shard, every cell in exactly
/// one shard.
#[test]
fn control_synthesis_batches_are_never_split() {
    use contactlab_harness::catalog::Catalog;
    use contactlab_harness::shard::Shard;
    use contactlab_harness::study_control::{plan, shard_cells};
    let file = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../configs/control_synthesis.yaml"
    ));
    let (cfg, text) = contactlab_harness::config::load(file).unwrap();
    let plan = plan(file, &text, cfg, &Catalog::builtin()).unwrap();
    assert_eq!(plan.cells.len(), 500);
    let mut owner: std::collections::BTreeMap<&str, usize> = Default::default();
    for index in 1..=3 {
        for c in shard_cells(&plan, Some(&Shard { index, count: 3 })) {
            assert!(
                owner.insert(c.id.as_str(), index).is_none(),
                "{} twice",
                c.id
            );
        }
    }
    assert_eq!(owner.len(), 500);
    let mut batches: std::collections::BTreeMap<String, std::collections::BTreeSet<usize>> =
        Default::default();
    for c in plan.cells.iter().filter(|c| c.method.batched()) {
        batches
            .entry(format!(
                "{} {} {}",
                c.label,
                c.method.name(),
                c.parametrization.name()
            ))
            .or_default()
            .insert(owner[c.id.as_str()]);
    }
    // ncp_fb, soft_convex and signorini, drive and wheel coordinates: six batches, each in one
    // shard.
    assert_eq!(batches.len(), 6);
    assert!(batches.values().all(|s| s.len() == 1), "{batches:?}");
    // The 200 single cells spread over the shards.
    for index in 1..=3 {
        let single = plan
            .cells
            .iter()
            .filter(|c| !c.method.batched() && owner[c.id.as_str()] == index)
            .count();
        assert!((60..=75).contains(&single), "shard {index}: {single}");
    }
}
