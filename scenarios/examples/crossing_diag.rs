//! Diagnostic of the ncp_fb adjoint through box_traversal's box crossing (issue 13).
//!
//! `cargo run -p contactlab-scenarios --example crossing_diag -- MODE H`
//!
//! * `noise`: along the nominal rollout (the knots of `ncp_fb_crossing_gradient.rs`), for each
//!   step with a wheel–box contact, the wheel–box contacts' gap, point and normal under central
//!   perturbations of the chassis x by δ = 1e-4 … 1e-10 m: the difference quotients of a
//!   smooth function settle as δ shrinks, noise grows like 1/δ.
//! * `step`: per step k, the adjoint's one-step Jacobian d(q⁺, v⁺)/d(q⁻, v⁻, ctrl) (one
//!   backward sweep per output) against central differences of the single step map (tight
//!   solver, step swept 1e-4 … 1e-8, best taken); prints the worst entry per step and the
//!   step's contacts.
//! * `spectrum K`: singular values of step K's transposed system and its contacts (sticking or
//!   sliding); `forward K I`: the forward-mode IFT sensitivity of step K to input I (min-norm,
//!   with the residual of the linear system) against one-sided and central FD of the step;
//!   `contacts K I`: the assembly's contacts with input I moved by ±1e-6.
//!
//! `SOLVER=tight` uses `TIGHT_NCP_FB` for the rollout too; `STEP=k`, `COLUMN=i`, `SKIP_QUAT=1`
//! restrict the `step` mode.

use contactlab_scenarios::control_synthesis::ControlProblem;
use contactlab_scenarios::gradient::cases::TIGHT_NCP_FB;
use contactlab_solvers::collision::Contact;
use contactlab_solvers::geometry::GeomShape;
use contactlab_solvers::ncp_fb::adjoint::{self, Mode};
use contactlab_solvers::ncp_fb::{NcpFb, NcpFbParams};
use contactlab_solvers::{Model, State};
use nalgebra::DVector;
use serde_json::json;

/// Entries as `+1.2345e-6`, space separated.
fn signed_row<'a>(v: impl Iterator<Item = &'a f64>) -> String {
    v.map(|x| format!("{x:+.4e}")).collect::<Vec<_>>().join(" ")
}

fn knots(p: &ControlProblem) -> Vec<f64> {
    (0..p.len())
        .map(|i| 1.6 + 0.2 * (i as f64 * 0.7).sin())
        .collect()
}

fn wheel_box(model: &Model, c: &Contact) -> bool {
    let is = |g: usize, box_: bool| match model.geoms[g].shape {
        GeomShape::Box { .. } => box_,
        GeomShape::Cylinder { .. } => !box_,
        _ => false,
    };
    is(c.geoms[0], false) && is(c.geoms[1], true)
}

fn contacts_at(
    f: &NcpFb,
    model: &Model,
    q: &DVector<f64>,
    v: &DVector<f64>,
    u: &[f64],
    h: f64,
) -> Vec<Contact> {
    f.assemble(model, q, v, u, h, 0.0).unwrap().contacts
}

fn noise(p: &ControlProblem, f: &NcpFb, r: &adjoint::Rollout) {
    for k in 0..r.len() {
        let st = r.step(k);
        let c0 = contacts_at(f, &p.model, &st.q, &st.v, &st.ctrl, p.h);
        let wb: Vec<&Contact> = c0.iter().filter(|c| wheel_box(&p.model, c)).collect();
        if wb.is_empty() {
            continue;
        }
        println!(
            "step {k} x {:.4}: {} contacts, {} wheel-box: {}",
            st.q[0],
            c0.len(),
            wb.len(),
            wb.iter()
                .map(|c| format!(
                    "[g{} gap {:.3e} n ({:.3},{:.3},{:.3}) p ({:.4},{:.4},{:.4})]",
                    c.geoms[0],
                    c.gap,
                    c.normal()[0],
                    c.normal()[1],
                    c.normal()[2],
                    c.point[0],
                    c.point[1],
                    c.point[2]
                ))
                .collect::<Vec<_>>()
                .join(" ")
        );
        for d in [1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10] {
            let (mut qp, mut qm) = (st.q.clone(), st.q.clone());
            qp[0] += d;
            qm[0] -= d;
            let cp = contacts_at(f, &p.model, &qp, &st.v, &st.ctrl, p.h);
            let cm = contacts_at(f, &p.model, &qm, &st.v, &st.ctrl, p.h);
            let wp: Vec<&Contact> = cp.iter().filter(|c| wheel_box(&p.model, c)).collect();
            let wm: Vec<&Contact> = cm.iter().filter(|c| wheel_box(&p.model, c)).collect();
            if wp.len() != wb.len() || wm.len() != wb.len() {
                println!(
                    "   δ {d:.0e}: wheel-box count {} / {} (nominal {})",
                    wp.len(),
                    wm.len(),
                    wb.len()
                );
                continue;
            }
            let line: Vec<String> = (0..wb.len())
                .map(|i| {
                    let dg = (wp[i].gap - wm[i].gap) / (2.0 * d);
                    let dn = (wp[i].normal() - wm[i].normal()).norm() / (2.0 * d);
                    let dx = (wp[i].point - wm[i].point).norm() / (2.0 * d);
                    format!("dgap {dg:+.4e} |dn| {dn:.3e} |dp| {dx:.3e}")
                })
                .collect();
            println!("   δ {d:.0e}: {}", line.join(" | "));
        }
    }
}

/// Single step map (q⁺, v⁺) from (q, v, ctrl) with input i moved by `d`.
fn step_map(
    f: &NcpFb,
    model: &Model,
    st: &adjoint::TapeStep,
    h: f64,
    i: usize,
    d: f64,
) -> DVector<f64> {
    let (nq, nv) = (model.nq, model.nv);
    let mut s = State {
        q: st.q.clone(),
        v: st.v.clone(),
        t: 0.0,
    };
    let mut u = st.ctrl.clone();
    if i < nq {
        s.q[i] += d;
    } else if i < nq + nv {
        s.v[i - nq] += d;
    } else {
        u[i - nq - nv] += d;
    }
    let mut g = f.clone();
    let _ = g.step_detail(model, &mut s, &u, h);
    let mut out = DVector::zeros(nq + nv);
    out.rows_mut(0, nq).copy_from(&s.q);
    out.rows_mut(nq, nv).copy_from(&s.v);
    out
}

fn step_check(p: &ControlProblem, tight: &NcpFb, r: &adjoint::Rollout) {
    let (nq, nv, nu) = (p.model.nq, p.model.nv, p.nu());
    let (nin, nout) = (nq + nv + nu, nq + nv);
    let only: Option<usize> = std::env::var("STEP").ok().map(|s| s.parse().unwrap());
    let column: Option<usize> = std::env::var("COLUMN").ok().map(|s| s.parse().unwrap());
    let skip_quat = std::env::var_os("SKIP_QUAT").is_some();
    for k in 0..r.len() {
        if only.is_some_and(|o| o != k) {
            continue;
        }
        let st = r.step(k);
        let s0 = State {
            q: st.q.clone(),
            v: st.v.clone(),
            t: 0.0,
        };
        let mut g = tight.clone();
        let one = adjoint::rollout(
            &mut g,
            &p.model,
            &s0,
            std::slice::from_ref(&st.ctrl),
            1,
            p.h,
        );
        // Adjoint Jacobian, row by row.
        let mut jac = vec![vec![0.0; nin]; nout];
        for (o, row) in jac.iter_mut().enumerate() {
            let gr = adjoint::backward(&g, &p.model, &one, &[], Mode::Exact, &|kk, _| {
                let (mut a, mut b) = (DVector::zeros(nq), DVector::zeros(nv));
                if kk == 1 {
                    if o < nq {
                        a[o] = 1.0
                    } else {
                        b[o - nq] = 1.0
                    }
                }
                (a, b)
            });
            for i in 0..nin {
                row[i] = if i < nq {
                    gr.q0[i]
                } else if i < nq + nv {
                    gr.v0[i - nq]
                } else {
                    gr.controls[0][i - nq - nv]
                };
            }
        }
        // FD, best step per entry.
        let steps = [1e-4, 1e-5, 1e-6, 1e-7, 1e-8];
        let fds: Vec<Vec<DVector<f64>>> = (0..nin)
            .map(|i| {
                steps
                    .iter()
                    .map(|&d| {
                        (step_map(tight, &p.model, &st, p.h, i, d)
                            - step_map(tight, &p.model, &st, p.h, i, -d))
                            / (2.0 * d)
                    })
                    .collect()
            })
            .collect();
        let (mut worst, mut at, mut fd_at, mut spread) = (0.0f64, (0, 0), vec![], 0.0);
        for o in 0..nout {
            for i in 0..nin {
                if skip_quat && (3..7).contains(&i) {
                    continue;
                }
                let a = jac[o][i];
                if column == Some(i) {
                    let f: Vec<String> = fds[i].iter().map(|v| format!("{:.4e}", v[o])).collect();
                    println!("   out {o:2} in {i}: adjoint {a:+.4e} fd {}", f.join(" "));
                }
                let best = fds[i]
                    .iter()
                    .map(|v| v[o])
                    .min_by(|x, y| (x - a).abs().total_cmp(&(y - a).abs()))
                    .unwrap();
                let scale = a.abs().max(best.abs()).max(1e-3);
                let e = (a - best).abs() / scale;
                if e > worst {
                    worst = e;
                    at = (o, i);
                    fd_at = fds[i].iter().map(|v| v[o]).collect();
                    spread = a;
                }
            }
        }
        let asm = g
            .assemble(&p.model, &st.q, &st.v, &st.ctrl, p.h, 0.0)
            .unwrap();
        let nwb = asm
            .contacts
            .iter()
            .filter(|c| wheel_box(&p.model, c))
            .count();
        println!(
            "step {k:3} x {:.3} contacts {:2} (wheel-box {nwb}) conv {} worst rel {worst:.2e} at out {} in {}: adjoint {spread:.4e} fd {}",
            st.q[0],
            asm.contacts.len(),
            one.converged[0],
            at.0,
            at.1,
            fd_at.iter().map(|x| format!("{x:.4e}")).collect::<Vec<_>>().join(" ")
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map_or("noise", String::as_str);
    let h: f64 = args.get(2).map_or(0.05, |s| s.parse().unwrap());
    let p = ControlProblem::box_traversal(&json!({}), h, 10).unwrap();
    let tight = NcpFb::new(serde_json::from_str(TIGHT_NCP_FB).unwrap()).unwrap();
    let f = if std::env::var("SOLVER").as_deref() == Ok("tight") {
        tight.clone()
    } else {
        NcpFb::new(NcpFbParams::default()).unwrap()
    };
    let mut g = f.clone();
    let r = adjoint::rollout(
        &mut g,
        &p.model,
        &p.initial,
        &p.controls(&knots(&p)),
        p.steps,
        p.h,
    );
    println!(
        "rollout: {} steps, {} unconverged, final x {:.4}",
        r.len(),
        r.unconverged(),
        r.final_state().q[0]
    );
    match mode {
        "noise" => noise(&p, &f, &r),
        "step" => step_check(&p, &tight, &r),
        "spectrum" => {
            use contactlab_solvers::ncp_fb::residual::{Block, Friction};
            let k: usize = args[3].parse().unwrap();
            let st = r.step(k);
            let asm = f
                .assemble(&p.model, &st.q, &st.v, &st.ctrl, p.h, 0.0)
                .unwrap();
            let pb = &asm.problem;
            let lin = pb.linearize(&st.u, &st.p, Friction::Exact);
            let a = &lin.r_vel * (&pb.j * &pb.minv_jt) + &lin.r_p;
            let sv = a.clone().svd(false, false).singular_values;
            let smax = sv.max();
            let mut v: Vec<f64> = sv.iter().map(|x| x / smax).collect();
            v.sort_by(|a, b| a.total_cmp(b));
            println!(
                "sigma_max {smax:.3e}; sigma/sigma_max ascending: {}",
                v.iter()
                    .map(|x| format!("{x:.1e}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            let vel = &pb.j * &st.u;
            for b in &pb.blocks {
                if let Block::Contact {
                    row,
                    friction,
                    mu,
                    gap,
                    ..
                } = *b
                {
                    let pn = st.p[row];
                    let pf = if friction {
                        (st.p[row + 1].powi(2) + st.p[row + 2].powi(2)).sqrt()
                    } else {
                        0.0
                    };
                    let vt = if friction {
                        (vel[row + 1].powi(2) + vel[row + 2].powi(2)).sqrt()
                    } else {
                        0.0
                    };
                    println!("  contact row {row}: gap {gap:+.2e} p_n {pn:.4e} |p_f|/(mu p_n) {:.6} |v_t| {vt:.2e} v_n {:.2e}", pf / (mu * pn), vel[row]);
                }
            }
        }
        "forward" => {
            // Forward-mode IFT sensitivity of u for input i of step k, against FD of the step.
            use contactlab_solvers::ncp_fb::residual::Friction;
            let k: usize = args[3].parse().unwrap();
            let i: usize = args[4].parse().unwrap();
            let st = r.step(k);
            let asm = tight
                .assemble(&p.model, &st.q, &st.v, &st.ctrl, p.h, 0.0)
                .unwrap();
            let pb = &asm.problem;
            let (u, pp) = (&st.u, &st.p);
            let lin = pb.linearize(u, pp, Friction::Exact);
            let a = &lin.r_vel * (&pb.j * &pb.minv_jt) + &lin.r_p;
            let d = 1e-6;
            let parts = |sign: f64| {
                let mut q = st.q.clone();
                let mut v = st.v.clone();
                let nq = p.model.nq;
                if i < nq {
                    q[i] += sign * d
                } else {
                    v[i - nq] += sign * d
                }
                let b = tight
                    .assemble(&p.model, &q, &v, &st.ctrl, p.h, 0.0)
                    .unwrap();
                assert!(b.same_structure(&asm));
                (b.problem.velocity(pp), &b.problem.j * u, b.problem.data())
            };
            let (yp, jup, dp_) = parts(1.0);
            let (ym, jum, dm) = parts(-1.0);
            let dy = (yp - ym) / (2.0 * d);
            let dju = (jup - jum) / (2.0 * d);
            let dd = (dp_ - dm) / (2.0 * d);
            let rhs = -(&lin.r_vel * (&pb.j * &dy + dju) + &lin.r_data * dd);
            let svd = a.clone().svd(true, true);
            let smax = svd.singular_values.max();
            let dpv = svd.solve(&rhs, 1e-12 * smax).unwrap();
            let res = (&a * &dpv - &rhs).norm() / rhs.norm();
            let du = &dy + &pb.minv_jt * &dpv;
            println!(
                "|rhs| {:.3e} relative residual of A dp = rhs (min-norm lstsq): {res:.3e}",
                rhs.norm()
            );
            // Left-null components of rhs.
            let uu = svd.u.as_ref().unwrap();
            for (c, sv) in svd.singular_values.iter().enumerate() {
                if *sv < 1e-12 * smax {
                    let comp = uu.column(c).dot(&rhs);
                    if comp.abs() > 1e-9 * rhs.norm() {
                        println!("  sigma {:.1e}: rhs component {comp:.3e}", sv / smax);
                    }
                }
            }
            println!("du (IFT, min-norm): {}", signed_row(du.iter()));
            let fd = (step_map(&tight, &p.model, &st, p.h, i, 1e-6)
                - step_map(&tight, &p.model, &st, p.h, i, -1e-6))
                / 2e-6;
            let nq = p.model.nq;
            let f0 = step_map(&tight, &p.model, &st, p.h, i, 0.0);
            for h1 in [1e-5, 1e-7] {
                let fp = (step_map(&tight, &p.model, &st, p.h, i, h1) - &f0) / h1;
                let fm = (&f0 - step_map(&tight, &p.model, &st, p.h, i, -h1)) / h1;
                println!(
                    "dv (FD +{h1:.0e}):      {}",
                    signed_row(fp.rows(nq, p.model.nv).iter())
                );
                println!(
                    "dv (FD -{h1:.0e}):      {}",
                    signed_row(fm.rows(nq, p.model.nv).iter())
                );
            }
            println!(
                "dv (FD 1e-6):       {}",
                signed_row(fd.rows(nq, p.model.nv).iter())
            );
        }
        "contacts" => {
            let k: usize = args[3].parse().unwrap();
            let i: usize = args[4].parse().unwrap();
            let st = r.step(k);
            for d in [0.0, 1e-6, -1e-6] {
                let mut q = st.q.clone();
                q[i] += d;
                let asm = f.assemble(&p.model, &q, &st.v, &st.ctrl, p.h, 0.0).unwrap();
                println!(
                    "d {d:+e}: nl {} blocks {}",
                    asm.problem.nl(),
                    asm.problem.blocks.len()
                );
                for c in &asm.contacts {
                    println!(
                        "   geoms {:?} gap {:+.6e} p ({:.6},{:.6},{:.6}) n ({:.4},{:.4},{:.4})",
                        c.geoms,
                        c.gap,
                        c.point[0],
                        c.point[1],
                        c.point[2],
                        c.normal()[0],
                        c.normal()[1],
                        c.normal()[2]
                    );
                }
            }
        }
        m => panic!("unknown mode {m}"),
    }
}
