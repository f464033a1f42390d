//! Helpers shared by the harness's integration tests that run the `contactlab` binary with the
//! test fakes (`CONTACTLAB_TESTKIT=1`). Each test file uses a part of them.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

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

/// The standard error of a finished run, as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}
