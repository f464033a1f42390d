//! The burn-ndarray stepper as the engine registry builds it (worlds split into shards stepped
//! in parallel, the contact law skipped in steps where no world of a shard has a contact
//! candidate) against one plain shard: the same numbers, bit for bit, on box_drop from its
//! default height (free fall, then impacts) with per-world initial states, over 0.5 s.
#![cfg(feature = "burn")]

use contactlab_scenarios::build;
use contactlab_solvers::batched::{BatchedPenalty, NdArrayF64};
use contactlab_solvers::engine::{batched_stepper, Stepper};
use contactlab_solvers::penalty::PenaltyParams;
use contactlab_solvers::State;
use serde_json::json;

#[test]
fn shards_and_the_idle_contact_skip_change_no_number() {
    let scene = build("box_drop", &json!({})).unwrap();
    let worlds = 600;
    // Distinct worlds: heights and spins differ, so worlds land at different steps.
    let initial: Vec<State> = (0..worlds)
        .map(|i| {
            let mut s = scene.initial.clone();
            s.q[2] = 0.06 + 0.0004 * i as f64;
            s.v[3] += 0.01 * (i % 7) as f64;
            s
        })
        .collect();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    let (plain, sharded) = pool.install(|| {
        let mut plain = BatchedPenalty::<NdArrayF64>::new(
            "burn-ndarray",
            &scene.model,
            PenaltyParams::default(),
            &scene.initial,
            worlds,
            Default::default(),
        );
        let mut sharded = batched_stepper(
            "burn-ndarray",
            "penalty",
            &json!({}),
            &scene.model,
            &scene.initial,
            worlds,
        )
        .unwrap();
        assert_eq!(
            contactlab_solvers::engine::shards("burn-ndarray", worlds),
            2
        );
        plain.write_states(&initial);
        sharded.write_states(&initial);
        let mut idle_steps = 0;
        for _ in 0..1000 {
            let reports = sharded.step(&[], 5e-4, true);
            if reports.iter().all(|r| r.contacts.is_empty()) {
                idle_steps += 1;
            }
            plain.step(&[], 5e-4, false);
        }
        // Both regimes occurred: steps with no contact anywhere, and contacts.
        assert!(idle_steps > 10, "idle steps {idle_steps}");
        assert!(idle_steps < 1000);
        (plain.read_states(), sharded.read_states())
    });
    for (i, (a, b)) in plain.iter().zip(&sharded).enumerate() {
        assert!(a.is_finite(), "world {i} diverged");
        assert_eq!(a.q, b.q, "world {i}: qpos");
        assert_eq!(a.v, b.v, "world {i}: qvel");
    }
}
