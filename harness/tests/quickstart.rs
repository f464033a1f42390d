//! The default experiment, `configs/quickstart.yaml`, against the real registries.

use std::path::Path;

use contactlab_harness::catalog::Catalog;
use contactlab_harness::config::{parse, QUICKSTART_YAML};
use contactlab_harness::sweep::plan;

#[test]
fn quickstart_lists_every_registered_formulation() {
    let cfg = parse(Path::new("quickstart.yaml"), QUICKSTART_YAML).unwrap();
    for e in contactlab_solvers::FORMULATIONS {
        assert!(
            cfg.formulations.iter().any(|f| f.name == e.name),
            "formulation '{}' is registered but missing from configs/quickstart.yaml",
            e.name
        );
    }
    let scenes: Vec<&str> = cfg.scenes.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(scenes, ["box_slide", "box_drop", "cartpole"]);
}

/// Once every scene and formulation it names is registered, the quickstart validates and
/// expands to scenes x formulations x 6 timesteps x 2 seeds.
#[test]
fn quickstart_validates_once_its_names_are_registered() {
    let cfg = parse(Path::new("quickstart.yaml"), QUICKSTART_YAML).unwrap();
    let catalog = Catalog::builtin();
    let ready = cfg.scenes.iter().all(|s| catalog.scene(&s.name).is_ok())
        && cfg
            .formulations
            .iter()
            .all(|f| catalog.formulation(&f.name).is_ok());
    if !ready {
        eprintln!("quickstart names scenes or formulations not registered yet; skipping");
        return;
    }
    let n = cfg.scenes.len() * cfg.formulations.len() * 6 * 2;
    let p = plan(
        Path::new("configs/quickstart.yaml"),
        QUICKSTART_YAML,
        cfg,
        &catalog,
    )
    .unwrap();
    assert_eq!(p.cells.len(), n);
}
