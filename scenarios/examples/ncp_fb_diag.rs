//! Diagnostic: run `ncp_fb` on a scene at one timestep, print the convergence statistics and
//! dump the Newton systems of the worst unconverged steps (issue 13, "find the cause").
//!
//! `cargo run -p contactlab-scenarios --example ncp_fb_diag -- SCENE H [SECONDS] [DUMP] [PARAMS_JSON]`
//!
//! Environment: `WHY=1` prints, for every unconverged step, which part of the stopping test it
//! misses (residual, NCP criterion, penetration, equation rows); `DUMP_FROM=i` starts the dump
//! at the i-th worst unconverged step instead of the worst.

use contactlab_scenarios::build;
use contactlab_solvers::ncp_fb::residual::{Block, Friction};
use contactlab_solvers::ncp_fb::{NcpFb, NcpFbParams};
use serde_json::json;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let scene_name = args.get(1).map_or("box_traversal", String::as_str);
    let h: f64 = args.get(2).map_or(0.005, |s| s.parse().unwrap());
    let scene = build(scene_name, &json!({})).unwrap();
    let seconds: f64 = args.get(3).map_or(scene.horizon, |s| s.parse().unwrap());
    let dump: usize = args.get(4).map_or(0, |s| s.parse().unwrap());
    let params: NcpFbParams = match args.get(5) {
        Some(s) => serde_json::from_str(s).unwrap(),
        None => NcpFbParams::default(),
    };
    let mut f = NcpFb::new(params).unwrap();
    let mut s = scene.initial.clone();
    let n = (seconds / h).round() as usize;
    let (mut unconv, mut worst_ncp, mut it_sum, mut it_max) = (0usize, 0.0f64, 0usize, 0usize);
    let mut worst_un_ncp = 0.0f64;
    let mut bad: Vec<(f64, usize, contactlab_solvers::State)> = Vec::new();
    let t0 = std::time::Instant::now();
    for k in 0..n {
        let u = scene.controls_at(s.t, &s);
        let before = s.clone();
        let (r, det) = f.step_detail(&scene.model, &mut s, &u, h);
        if let Some(d) = &r.diverged {
            println!("diverged at step {k}: {d}");
            break;
        }
        it_sum += r.iterations;
        it_max = it_max.max(r.iterations);
        let ncp = det.as_ref().map_or(0.0, |d| d.solution.ncp);
        if r.converged {
            worst_ncp = worst_ncp.max(ncp);
        } else {
            unconv += 1;
            worst_un_ncp = worst_un_ncp.max(ncp);
            if let Some(d) = &det {
                let (pb, so) = (&d.problem, &d.solution);
                let r = pb.constraint_residual(&so.u, &so.p);
                if std::env::var_os("WHY").is_some() {
                    println!(
                        "  unconverged step {k}: residual {:.2e} ncp {:.2e} penetration/h {:.2e} equations {:.2e} nl {}",
                        so.residual,
                        so.ncp,
                        pb.penetration(&so.u, &so.p) / h,
                        pb.equation_residual(&r),
                        pb.nl()
                    );
                }
            }
            bad.push((r.residual, k, before));
        }
    }
    let up = 1.0 - 2.0 * (s.q[4] * s.q[4] + s.q[5] * s.q[5]);
    println!(
        "scene {scene_name} h {h} steps {n} unconverged {unconv} ({:.2} %) worst_conv_ncp {worst_ncp:.3e} iters mean {:.2} max {it_max} final x {:.6} y {:.6} z {:.4} up {up:.4} wall {:.1}s",
        100.0 * unconv as f64 / n as f64,
        it_sum as f64 / n as f64,
        s.q[0], s.q[1], s.q[2],
        t0.elapsed().as_secs_f64()
    );
    bad.sort_by(|a, b| b.0.total_cmp(&a.0));
    println!(
        "unconverged: worst residual {:.3e} m/s, worst ncp {worst_un_ncp:.3e}, median residual {:.3e}",
        bad.first().map_or(0.0, |b| b.0),
        bad.get(bad.len() / 2).map_or(0.0, |b| b.0)
    );
    // Residual deciles of the unconverged steps.
    let dec: Vec<String> = (0..10)
        .map(|i| format!("{:.1e}", bad.get(i * bad.len() / 10).map_or(0.0, |b| b.0)))
        .collect();
    println!(
        "unconverged residual deciles (worst first): {}",
        dec.join(" ")
    );
    // DUMP_FROM=i starts the dump at the i-th worst unconverged step.
    let from: usize = std::env::var("DUMP_FROM")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    for (res, k, st) in bad.iter().skip(from).take(dump) {
        println!("\n=== step {k} t {:.4} residual {res:.3e}", st.t);
        let u = scene.controls_at(st.t, st);
        let asm = f.assemble(&scene.model, &st.q, &st.v, &u, h, st.t).unwrap();
        let pb = &asm.problem;
        let wmat = &pb.j * &pb.minv_jt;
        let sv = wmat.clone().svd(false, false).singular_values;
        println!(
            "nl {} nv {} W singular values {:?}",
            pb.nl(),
            pb.nv(),
            sv.as_slice()
        );
        for (bi, b) in pb.blocks.iter().enumerate() {
            match (*b, asm.block_contact[bi]) {
                (
                    Block::Contact {
                        row,
                        gap,
                        wn,
                        wt,
                        mu,
                        ..
                    },
                    Some(ci),
                ) => {
                    let c = &asm.contacts[ci];
                    println!(
                        "  block {bi} contact rows {row}.. geoms {:?} gap {gap:.3e} wn {wn:.3e} wt {wt:.3e} mu {mu} point {:?} n {:?}",
                        c.geoms, c.point.as_slice(), c.frame.row(0).transpose().as_slice()
                    );
                }
                (b, _) => println!("  block {bi} {b:?}"),
            }
        }
        let sol = contactlab_solvers::ncp_fb::solve::solve(pb, &f.settings(), &asm.pair_of_block());
        let r = pb.constraint_residual(&sol.u, &sol.p);
        println!("  p {:?}", sol.p.as_slice());
        println!("  r {:?}", r.as_slice());
        println!("  v {:?}", (&pb.j * &sol.u).as_slice());
        let lin = pb.linearize(&sol.u, &sol.p, Friction::Exact);
        let a = &lin.r_vel * &wmat + &lin.r_p;
        let sa = a.clone().svd(false, false).singular_values;
        println!("  A singular values {:?}", sa.as_slice());
        // Directional test of the Newton direction at the returned iterate.
        let reg = pb.regularization(1e-10, 1e-10);
        let mut areg = a.clone();
        for i in 0..pb.nl() {
            areg[(i, i)] += reg[i];
        }
        let d = areg.clone().lu().solve(&-&lin.r).unwrap();
        println!(
            "  |A d + r| {:.3e} |d| {:.3e}",
            (&a * &d + &lin.r).amax(),
            d.amax()
        );
        let th =
            |p: &nalgebra::DVector<f64>| pb.constraint_residual(&pb.velocity(p), p).norm_squared();
        let th0 = th(&sol.p);
        for t in [1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7] {
            let pt = &sol.p + &d * t;
            let mut pp = pt.clone();
            pb.project(&mut pp);
            println!("  t {t:.0e} unprojected dtheta/t {:.4e} projected dtheta/t {:.4e} (expect {:.4e}) |proj shift| {:.2e}", (th(&pt) - th0) / t, (th(&pp) - th0) / t, -2.0 * th0, (&pp - &pt).amax());
        }
        // The per-row contributions at t = 1e-6 unprojected vs linear prediction.
        let t = 1e-6;
        let pt = &sol.p + &d * t;
        let rt = pb.constraint_residual(&pb.velocity(&pt), &pt);
        let pred = &lin.r * (1.0 - t);
        let err = &rt - &pred;
        let imax = err.iamax();
        println!(
            "  worst row of linear prediction at t=1e-6: row {imax} err/t {:.3e} r {:.3e}",
            err[imax] / t,
            lin.r[imax]
        );
        for b in &pb.blocks {
            if let Block::Contact {
                row,
                friction: true,
                mu,
                ..
            } = *b
            {
                let pf = (sol.p[row + 1].powi(2) + sol.p[row + 2].powi(2)).sqrt();
                let vt =
                    ((&pb.j * &sol.u)[row + 1].powi(2) + (&pb.j * &sol.u)[row + 2].powi(2)).sqrt();
                println!("   contact row {row}: pn {:.3e} cone ratio |pf|/(mu pn) {:.6} slip {:.3e} d_pn {:.2e} d_pf ({:.2e},{:.2e})", sol.p[row], pf / (mu * sol.p[row]), vt, d[row], d[row+1], d[row+2]);
            }
        }
        println!(
            "  converged {} residual {:.3e} ncp {:.3e} iters {}",
            sol.converged, sol.residual, sol.ncp, sol.iterations
        );
    }
}
