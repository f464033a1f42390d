#!/usr/bin/env python3
"""MuJoCo references of the `grasp` benchmark scene (issue 18): the scene written as MJCF
(general/grasp.xml, the same model as `scenarios/src/benchmark/grasp.rs` builds with its
default parameters) and stepped by MuJoCo 4.0.1 under implicitfast with the scene's own control
law, at h = 10 ms and 20 ms: general/grasp_<ms>ms.csv (t, qpos.., pen: the deepest contact
penetration at that state), stopped at the first state whose penetration exceeds 1 cm (half
the object's smallest extent, the harness's divergence rule), and general/grasp.json.

Usage: python gen_grasp.py   (pip install mujoco==4.0.0 mujoco-core==4.0.1 numpy)
"""
import json
import os

import mujoco

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "general")
XML = """<mujoco model="grasp">
  <option timestep="0.01" integrator="implicitfast"/>
  <default><geom friction="0.8 0.005 0.0001"/></default>
  <worldbody>
    <geom name="table" type="plane" size="5 5 0.1"/>
    <body name="lift" pos="0 0 0.05">
      <inertial pos="0 0 0" mass="1" diaginertia="0.01 0.01 0.01"/>
      <joint name="lift_slide" type="slide" axis="0 0 1" stiffness="10" springref="1.4715"/>
      <body name="finger_left" pos="0 0.04 0">
        <joint name="finger_left_slide" type="slide" axis="0 -1 0"/>
        <geom name="finger_left_geom" type="box" size="0.02 0.01 0.04" mass="0.1"/>
      </body>
      <body name="finger_right" pos="0 -0.04 0">
        <joint name="finger_right_slide" type="slide" axis="0 1 0"/>
        <geom name="finger_right_geom" type="box" size="0.02 0.01 0.04" mass="0.1"/>
      </body>
    </body>
    <body name="object" pos="0 0 0.05">
      <freejoint name="object_free"/>
      <geom name="object_geom" type="box" size="0.03 0.03 0.05" mass="0.3"/>
    </body>
  </worldbody>
  <actuator>
    <velocity name="lift_servo" joint="lift_slide" kv="400" ctrllimited="true" ctrlrange="-0.2 0.2"/>
    <position name="finger_left_servo" joint="finger_left_slide" kp="1000" kv="20"/>
    <position name="finger_right_servo" joint="finger_right_slide" kp="1000" kv="20"/>
  </actuator>
</mujoco>"""


def controls(t, q):
    """The scene's control law (grasp_controls): lift velocity command, finger targets."""
    close = min(max(t / 0.3, 0.0), 1.0)
    finger = -0.02 + close * 0.03
    height = 0.0 if t < 0.5 else 0.2
    return [20.0 * (height - q[0]), finger, finger]


def run(h):
    m = mujoco.MjModel.from_xml_string(XML)
    m.opt.timestep = h
    d = mujoco.MjData(m)
    d.qpos[1] = d.qpos[2] = -0.02
    steps = int(round(2.5 / h))
    rows = []
    for k in range(steps + 1):
        d.ctrl[:] = controls(d.time, d.qpos)
        mujoco.mj_forward(m, d)
        pen = max([-c.dist for c in d.contact[:d.ncon]] + [0.0])
        rows.append([d.time, *d.qpos, pen])
        if pen > 0.01 or k == steps:
            break
        mujoco.mj_step(m, d)
    return rows


def main():
    with open(os.path.join(OUT, "grasp.xml"), "w") as f:
        f.write(XML)
    meta = {"mujoco": mujoco.mj_versionString(), "integrator": "implicitfast", "runs": {}}
    for ms in (10, 20):
        rows = run(ms / 1000.0)
        name = f"grasp_{ms}ms.csv"
        with open(os.path.join(OUT, name), "w") as f:
            f.write(",".join(["t"] + [f"qpos{i}" for i in range(len(rows[0]) - 2)] + ["pen"]) + "\n")
            for r in rows:
                f.write(",".join(repr(float(x)) for x in r) + "\n")
        meta["runs"][name] = {"timestep": ms / 1000.0, "states": len(rows),
                              "final_penetration": rows[-1][-1]}
        print(name, len(rows), "states, last penetration", rows[-1][-1])
    with open(os.path.join(OUT, "grasp.json"), "w") as f:
        json.dump(meta, f, indent=1)


if __name__ == "__main__":
    main()
