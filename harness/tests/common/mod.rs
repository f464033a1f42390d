//! Helpers shared by the harness's integration tests that run the `contactlab` binary with the
//! test fakes (`CONTACTLAB_TESTKIT=1`). Each test file uses a part of them.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

/// A valid experiment on the testkit's falling point: 2 timesteps x 2 seeds, results in
/// `results/clitest/`.
pub const GOOD: &str = "\
name: clitest
scenes:
  - name: falling_point
formulations:
  - name: falling_point
sweep:
  timestep: [0.01, 0.02]
  seed: [0, 1]
horizon: 0.2
reference: {kind: same_formulation, timestep: 0.005}
";

/// Run the binary with `args` in `cwd`, the test fakes registered.
pub fn contactlab(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_contactlab"))
        .args(args)
        .current_dir(cwd)
        .env("CONTACTLAB_TESTKIT", "1")
        .output()
        .unwrap()
}

/// Run the binary with `args` in `cwd` with the built-in catalog only (no test fakes).
pub fn contactlab_builtin(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_contactlab"))
        .args(args)
        .current_dir(cwd)
        .env_remove("CONTACTLAB_TESTKIT")
        .output()
        .unwrap()
}

/// Start the binary with `args` in `cwd` in the background (test fakes registered, output
/// discarded), for tests that act on a run while it is going.
pub fn spawn_contactlab(args: &[&str], cwd: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_contactlab"))
        .args(args)
        .current_dir(cwd)
        .env("CONTACTLAB_TESTKIT", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The standard error of a finished run, as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// Write `text` as bad.yaml beside an existing results folder `results/clitest/`, then `run`
/// and `check` it: each exits 2 with one message naming `bad.yaml:<line>:` and each needle,
/// and nothing is written (the existing folder untouched, no other results folder).
pub fn assert_bad(text: &str, line: usize, needles: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("bad.yaml"), text).unwrap();
    let existing = tmp.path().join("results/clitest");
    std::fs::create_dir_all(&existing).unwrap();
    std::fs::write(existing.join("runs.csv"), "sentinel").unwrap();
    for cmd in ["run", "check"] {
        let o = contactlab(&[cmd, "bad.yaml"], tmp.path());
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {err}");
        assert_eq!(err.lines().count(), 1, "one message: {err}");
        assert!(
            err.contains(&format!("bad.yaml:{line}:")),
            "line {line}: {err}"
        );
        for n in needles {
            assert!(err.contains(n), "'{n}' in {err}");
        }
    }
    assert_eq!(
        std::fs::read_to_string(existing.join("runs.csv")).unwrap(),
        "sentinel"
    );
    assert_eq!(
        std::fs::read_dir(&existing).unwrap().count(),
        1,
        "nothing written"
    );
    assert_eq!(
        std::fs::read_dir(tmp.path().join("results"))
            .unwrap()
            .count(),
        1,
        "no other results folder"
    );
}
