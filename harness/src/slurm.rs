//! `contactlab slurm FILE --shards N` (issue 21): the SLURM scripts that run an experiment as a
//! job array of N shards ([`crate::shard`]) and then merge them ([`crate::merge`]) in a job
//! that depends on the whole array (SLURM's `sbatch --array` and `--dependency=afterok`, the
//! way research clusters run sweeps; no scheduler of our own).
//!
//! Three files are written into the script folder (default `slurm/<experiment>/`):
//!
//! - `array.sbatch`: one array task per shard, `--array=1-N`; task I runs
//!   `contactlab run FILE --shard I/N --jobs <cpus> --out <shards>/shard-I`, so shard I's
//!   results land in `<shards>/shard-I/<experiment>/` (`<shards>` is `<out>/<experiment>.shards`).
//!   A task that is requeued or rerun resumes its shard.
//! - `merge.sbatch`: `contactlab merge <shards>/shard-1/<experiment> ... --out <out>/<experiment>`.
//! - `submit.sh`: submits the array, then the merge with `--dependency=afterok:<array job>`
//!   (the merge starts once every task has ended successfully).
//!
//! Every path in the scripts is absolute (the binary, the working folder the tasks `cd` into,
//! the experiment file and the results), because SLURM runs the tasks on other nodes from the
//! folder they were submitted from; the binary and the checkout must be on a file system the
//! compute nodes share (as home and project folders are on clusters).

use std::path::{Path, PathBuf};

/// What the scripts run and ask the scheduler for.
#[derive(Debug, Clone, PartialEq)]
pub struct SlurmOptions {
    /// The experiment's name (`name:` of the file).
    pub experiment: String,
    /// The experiment file, absolute.
    pub config: PathBuf,
    /// Number of shards (array tasks), ≥ 1.
    pub shards: usize,
    /// CPUs per task (`--cpus-per-task`, and each shard's `--jobs`), ≥ 1.
    pub cpus: usize,
    /// Wall-clock limit per task (`--time`, SLURM's format: `MM`, `HH:MM:SS`, `D-HH:MM:SS`).
    pub time: Option<String>,
    /// Memory per task (`--mem`, e.g. `4G`).
    pub mem: Option<String>,
    /// Partition (`--partition`).
    pub partition: Option<String>,
    /// Account to charge (`--account`).
    pub account: Option<String>,
    /// The contactlab binary, absolute.
    pub binary: PathBuf,
    /// The folder the tasks run in (where relative paths of the experiment resolve), absolute.
    pub workdir: PathBuf,
    /// Parent folder of the merged results, absolute (the merged folder is
    /// `<out>/<experiment>`).
    pub out: PathBuf,
}

/// The scripts' text.
#[derive(Debug, Clone, PartialEq)]
pub struct SlurmScripts {
    /// `array.sbatch`.
    pub array: String,
    /// `merge.sbatch`.
    pub merge: String,
    /// `submit.sh`.
    pub submit: String,
}

/// `s` quoted for a POSIX shell (single quotes; a single quote written as `'\''`).
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn q(p: &Path) -> String {
    sh_quote(&p.display().to_string())
}

/// `name` with every character but ASCII letters, digits, `_`, `-` and `.` replaced by `_` (a
/// job name needs no quoting on an `#SBATCH` line).
fn job_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Whether `v` can stand unquoted on an `#SBATCH` line as a partition, account or memory
/// value: ASCII letters, digits and `_ - . , :` only.
pub fn valid_directive_value(v: &str) -> bool {
    !v.is_empty()
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ',' | ':'))
}

/// Whether `t` is a SLURM time limit: `M`, `M:S`, `H:M:S`, `D-H`, `D-H:M`, `D-H:M:S` (digits).
pub fn valid_time(t: &str) -> bool {
    let (days, rest) = match t.split_once('-') {
        Some((d, r)) => (Some(d), r),
        None => (None, t),
    };
    let digits = |x: &str| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit());
    if days.is_some_and(|d| !digits(d)) {
        return false;
    }
    let parts: Vec<&str> = rest.split(':').collect();
    parts.len() <= 3 && parts.iter().all(|p| digits(p))
}

impl SlurmOptions {
    /// Where the shards' results go: `<out>/<experiment>.shards`.
    pub fn shards_root(&self) -> PathBuf {
        self.out.join(format!("{}.shards", self.experiment))
    }

    fn header(&self, job: &str) -> String {
        // No paths here: sbatch splits `#SBATCH` lines at spaces and ends them at `#`, so the
        // log files are named on submit.sh's command line instead, quoted by the shell.
        let mut h = format!("#SBATCH --job-name={}\n", job_name(job));
        if let Some(t) = &self.time {
            h += &format!("#SBATCH --time={t}\n");
        }
        if let Some(m) = &self.mem {
            h += &format!("#SBATCH --mem={m}\n");
        }
        if let Some(p) = &self.partition {
            h += &format!("#SBATCH --partition={p}\n");
        }
        if let Some(a) = &self.account {
            h += &format!("#SBATCH --account={a}\n");
        }
        h
    }

    /// The three scripts (module doc).
    pub fn scripts(&self) -> SlurmScripts {
        let n = self.shards;
        let root = self.shards_root();
        let job = format!("contactlab-{}", self.experiment);
        let array = format!(
            "#!/bin/bash\n\
             # Experiment '{exp}' ({config}) as {n} shards, one SLURM array task each.\n\
             # Written by `contactlab slurm`; submit with submit.sh, which queues the merge after.\n\
             {header}\
             #SBATCH --array=1-{n}\n\
             #SBATCH --cpus-per-task={cpus}\n\
             set -euo pipefail\n\
             cd {workdir}\n\
             shard=\"${{SLURM_ARRAY_TASK_ID}}\"\n\
             exec {bin} run {config_q} --shard \"${{shard}}/{n}\" --jobs {cpus} \\\n    \
             --out {root_q}/shard-\"${{shard}}\"\n",
            exp = self.experiment,
            config = self.config.display(),
            header = self.header(&job),
            cpus = self.cpus,
            workdir = q(&self.workdir),
            bin = q(&self.binary),
            config_q = q(&self.config),
            root_q = q(&root),
        );
        let inputs: Vec<String> = (1..=n)
            .map(|i| q(&root.join(format!("shard-{i}")).join(&self.experiment)))
            .collect();
        let merge = format!(
            "#!/bin/bash\n\
             # Merge the {n} shards of experiment '{exp}' into {out}.\n\
             # Written by `contactlab slurm`; submit.sh queues it after the array.\n\
             {header}\
             #SBATCH --cpus-per-task=1\n\
             set -euo pipefail\n\
             cd {workdir}\n\
             exec {bin} merge \\\n    {inputs} \\\n    --out {out_q}\n",
            exp = self.experiment,
            out = self.out.join(&self.experiment).display(),
            header = self.header(&format!("{job}-merge")),
            workdir = q(&self.workdir),
            bin = q(&self.binary),
            inputs = inputs.join(" \\\n    "),
            out_q = q(&self.out.join(&self.experiment)),
        );
        let submit = format!(
            "#!/bin/bash\n\
             # Queue experiment '{exp}' on SLURM: the {n} shards as one job array, then their\n\
             # merge, which starts once every shard has ended successfully.\n\
             set -euo pipefail\n\
             here=\"$(cd \"$(dirname \"$0\")\" && pwd)\"\n\
             mkdir -p {root_q}\n\
             array=\"$(sbatch --parsable --output={log_array} \"$here/array.sbatch\")\"\n\
             array=\"${{array%%;*}}\"  # --parsable prints <job>;<cluster> on federated clusters\n\
             merge=\"$(sbatch --parsable --output={log_merge} --dependency=afterok:\"$array\" \\\n    \"$here/merge.sbatch\")\"\n\
             # A task that fails or times out leaves the merge pending (afterok): rerun that\n\
             # task's shard (sbatch --array=I array.sbatch; it resumes), then submit merge.sbatch.\n\
             echo \"shards: job array $array (tasks 1-{n}); merge: job ${{merge%%;*}}\"\n\
             echo \"merged results: {out}\"\n",
            exp = self.experiment,
            root_q = q(&root),
            out = self.out.join(&self.experiment).display(),
            log_array = q(&root.join("slurm-%A_%a.out")),
            log_merge = q(&root.join("slurm-merge-%j.out")),
        );
        SlurmScripts {
            array,
            merge,
            submit,
        }
    }

    /// Write the scripts into `dir` (created), executable; returns their paths.
    ///
    /// # Errors
    /// I/O errors, naming the file.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>, crate::results::ResultsError> {
        let s = self.scripts();
        let mut written = Vec::new();
        for (name, text) in [
            ("array.sbatch", &s.array),
            ("merge.sbatch", &s.merge),
            ("submit.sh", &s.submit),
        ] {
            let p = dir.join(name);
            crate::results::write_atomic(&p, text.as_bytes())?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).map_err(
                    |source| crate::results::ResultsError::Io {
                        path: p.clone(),
                        source,
                    },
                )?;
            }
            written.push(p);
        }
        Ok(written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_and_times() {
        assert_eq!(sh_quote("a b"), "'a b'");
        assert_eq!(sh_quote("it's"), r"'it'\''s'");
        for ok in ["30", "1:00:00", "2-00:00:00", "2-12", "10:30"] {
            assert!(valid_time(ok), "{ok}");
        }
        for bad in ["", "1h", "1:2:3:4", "-1", "1-", "a-1:00"] {
            assert!(!valid_time(bad), "{bad}");
        }
    }
}
