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

/// Every scene and formulation the quickstart names is registered, and it validates and
/// expands to scenes x formulations x 6 timesteps x 2 seeds (no skip: an unregistered name is
/// a failure).
#[test]
fn quickstart_validates_and_expands_to_its_full_grid() {
    let cfg = parse(Path::new("quickstart.yaml"), QUICKSTART_YAML).unwrap();
    let catalog = Catalog::builtin();
    for s in &cfg.scenes {
        assert!(
            catalog.scene(&s.name).is_ok(),
            "configs/quickstart.yaml names scene '{}', which is not registered",
            s.name
        );
    }
    for f in &cfg.formulations {
        assert!(
            catalog.formulation(&f.name).is_ok(),
            "configs/quickstart.yaml names formulation '{}', which is not registered",
            f.name
        );
    }
    assert_eq!(cfg.sweep["timestep"].len(), 6, "quickstart timesteps");
    assert_eq!(cfg.sweep["seed"].len(), 2, "quickstart seeds");
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
