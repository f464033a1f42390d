//! signorini against Genesis' own signorini trajectories (`scenarios/tests/reference/genesis/`,
//! genesis-world 1.4.5, float64; options in its README: elliptic, Newton, Euler, 100 iterations,
//! tolerance 1e-10, impratio 1, h = 2 ms), and its physical guarantees.

use std::path::PathBuf;

use contactlab_scenarios::mjcf::load_file;
use contactlab_solvers::formulation::Formulation;
use contactlab_solvers::signorini::{Signorini, SignoriniParams};
use contactlab_solvers::{Model, State};

const H: f64 = 0.002;

fn reference(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/reference")
        .join(rel)
}

fn rows(file: &str) -> Vec<Vec<f64>> {
    let text = std::fs::read_to_string(reference(&format!("genesis/{file}"))).unwrap();
    text.lines()
        .skip(1)
        .filter(|l| !l.is_empty())
        .map(|l| l.split(',').map(|x| x.parse().unwrap()).collect())
        .collect()
}

fn genesis_options() -> SignoriniParams {
    SignoriniParams {
        iterations: Some(100),
        tolerance: Some(1e-10),
        impratio: Some(1.0),
        ..SignoriniParams::default()
    }
}

/// Max |qpos error| against a Genesis trajectory, starting from its row `start`.
fn compare(model: &Model, reference: &[Vec<f64>], start: usize) -> f64 {
    let (nq, nv) = (model.nq, model.nv);
    let mut f = Signorini::new(genesis_options()).unwrap();
    let r0 = &reference[start];
    let mut s = State {
        q: nalgebra::DVector::from_iterator(nq, r0[1..1 + nq].iter().copied()),
        v: nalgebra::DVector::from_iterator(nv, r0[1 + nq..1 + nq + nv].iter().copied()),
        t: r0[0],
    };
    let mut worst = 0.0f64;
    for row in &reference[start..] {
        for i in 0..nq {
            worst = worst.max((s.q[i] - row[1 + i]).abs());
        }
        let r = f.step(model, &mut s, &[], H);
        assert!(r.diverged.is_none());
    }
    worst
}

#[test]
fn reproduces_genesis_signorini_trajectories() {
    for (xml, csv) in [
        (
            "scenes/box_slide_elliptic.xml",
            "box_slide_elliptic_signorini_mjlike.csv",
        ),
        (
            "genesis/scenes/box_incline_mu0p30_elliptic.xml",
            "box_incline_mu0p30_signorini_mjlike.csv",
        ),
        (
            "scenes/box_incline_mu0p40_elliptic.xml",
            "box_incline_mu0p40_elliptic_signorini_mjlike.csv",
        ),
    ] {
        let m = load_file(reference(xml), None).unwrap();
        let err = compare(&m.model, &rows(csv), 0);
        println!("{csv}: max |qpos error| {err:.3e}");
        assert!(err <= 1e-6, "{csv}: {err:e}");
    }
}

/// Genesis counts a contact only at strictly positive penetration; MuJoCo (and contactlab)
/// make rows only for dist < 0 as well, but the sphere starts at a computed penetration of
/// 1.5e-17 m, which Genesis treats as contact from step 0 and we, with MuJoCo's arithmetic, at
/// a distance of exactly 0 (no rows) on step 0. So the comparison starts from Genesis' state at
/// row 1, after which both see the same contact.
#[test]
fn reproduces_genesis_sphere_roll_from_its_first_contact_step() {
    let m = load_file(reference("genesis/scenes/sphere_roll_elliptic.xml"), None).unwrap();
    let err = compare(&m.model, &rows("sphere_roll_signorini_mjlike.csv"), 1);
    println!("sphere_roll (from row 1): max |qpos error| {err:.3e}");
    assert!(err <= 1e-6, "{err:e}");
}
