#!/usr/bin/env python3
"""MuJoCo references for soft_convex on general models (issue 18): one MJCF per case in
general/<name>.xml, its trajectory in general/<name>.csv, and general/<name>.json with the
constant controls applied at every step and MuJoCo's version.

Usage: python gen_general.py [CASE...]   (every case, or those named; pip install mujoco==4.0.0 mujoco-core==4.0.1 numpy)

CSV rows: t, qpos.., qvel.., ncon, nactive; row 0 the initial state, row k the state after k
calls of mj_step with d.ctrl = the case's controls; ncon the contacts MuJoCo detects at that
state and nactive those with a positive normal force (mj_contactForce) in the step leaving it
(a contact at exactly zero distance is detected but gets no constraint row, so carries none). qpos/qvel exactly as MuJoCo stores them (a free joint
is x y z qw qx qy qz | vx vy vz (world) wx wy wz (body frame)).
"""
import json
import os

import mujoco
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "general")

PENDULUM = """<mujoco model="{name}">
  <option timestep="0.01" integrator="{integrator}"/>
  <worldbody>
    <body name="link1" pos="0 0 1">
      <joint name="hinge1" type="hinge" axis="0 1 0" damping="0.3"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.04" mass="1" contype="0" conaffinity="0"/>
      <body name="link2" pos="0.5 0 0">
        <joint name="hinge2" type="hinge" axis="0 1 0" damping="0.1"/>
        <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03" mass="0.6" contype="0" conaffinity="0"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <velocity name="spin1" joint="hinge1" kv="20"/>
    <position name="hold2" joint="hinge2" kp="50" kv="5"/>
  </actuator>
</mujoco>
"""

FREE_SPIN = """<mujoco model="{name}">
  <option timestep="0.01" integrator="{integrator}" gravity="0 0 0"/>
  <worldbody>
    <body name="box" pos="0 0 0">
      <freejoint name="free"/>
      <geom type="box" size="0.1 0.2 0.3" mass="1"/>
    </body>
  </worldbody>
</mujoco>
"""

# A skid-steered cart: a free chassis with two sphere wheels on hinges driven by velocity
# servos (kv 2, forcerange 1 N m: saturated at the start, free later) on a plane.
CART = """<mujoco model="{name}">
  <option timestep="0.01" integrator="{integrator}"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="chassis" pos="0 0 0.1">
      <freejoint name="free"/>
      <geom type="box" size="0.15 0.1 0.02" mass="2" contype="0" conaffinity="0"/>
      <geom name="skid" type="sphere" pos="-0.12 0 -0.05" size="0.05" mass="0.1" friction="0.1"/>
      <body name="wheel_l" pos="0.08 0.13 0">
        <joint name="left" type="hinge" axis="0 1 0" damping="0.01"/>
        <geom type="sphere" size="0.1" mass="0.3"/>
      </body>
      <body name="wheel_r" pos="0.08 -0.13 0">
        <joint name="right" type="hinge" axis="0 1 0" damping="0.01"/>
        <geom type="sphere" size="0.1" mass="0.3"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <velocity name="drive_l" joint="left" kv="2" forcelimited="true" forcerange="-1 1"/>
    <velocity name="drive_r" joint="right" kv="2" forcelimited="true" forcerange="-1 1"/>
  </actuator>
</mujoco>
"""

# A double pendulum whose tip is held by a `connect` to a point of the world near it (a closed
# chain): the equality's reference acceleration and impedance (solref/solimp defaults).
CONNECT = """<mujoco model="{name}">
  <option timestep="0.002" integrator="{integrator}"/>
  <worldbody>
    <body name="link1" pos="0 0 1">
      <joint name="hinge1" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.04" mass="1" contype="0" conaffinity="0"/>
      <body name="link2" pos="0.5 0 0">
        <joint name="hinge2" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.03" mass="0.6" contype="0" conaffinity="0"/>
        <site name="tip" pos="0 0 -0.5"/>
      </body>
    </body>
  </worldbody>
  <equality>
    <connect body1="link2" body2="world" anchor="0 0 -0.5"/>
  </equality>
</mujoco>
"""

# A free box tied to a hinged arm by a `connect` at one of its corners, swinging under gravity:
# the velocity-product term of a point on a free body against one on a hinge chain.
CONNECT_FREE = """<mujoco model="{name}">
  <option timestep="0.002" integrator="{integrator}"/>
  <worldbody>
    <body name="arm" pos="0 0 1">
      <joint name="hinge" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03" mass="0.5" contype="0" conaffinity="0"/>
    </body>
    <body name="box" pos="0.5 0 1">
      <freejoint/>
      <geom type="box" size="0.1 0.05 0.03" mass="0.8" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <equality>
    <connect body1="box" body2="arm" anchor="-0.1 0 0"/>
  </equality>
</mujoco>
"""

# The same box welded to the arm instead (its relative pose at qpos0 kept): the weld's
# translation and rotation rows.
WELD_FREE = CONNECT_FREE.replace('<connect body1="box" body2="arm" anchor="-0.1 0 0"/>',
                                 '<weld body1="box" body2="arm"/>')

# Welded at a point of the arm (`anchor`, in body2's frame) with rotation rows scaled by
# `torquescale` 0.5.
WELD_ANCHOR = CONNECT_FREE.replace('<connect body1="box" body2="arm" anchor="-0.1 0 0"/>',
                                   '<weld body1="box" body2="arm" anchor="0.4 0 0" torquescale="0.5"/>')

# A double pendulum whose second hinge follows a cubic of the first (`<joint>` equality with
# `polycoef`, offsets from qpos0), started off the coupling.
COUPLED = """<mujoco model="{name}">
  <option timestep="0.002" integrator="{integrator}"/>
  <worldbody>
    <body name="link1" pos="0 0 1">
      <joint name="hinge1" type="hinge" axis="0 1 0" ref="0.2"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.04" mass="1" contype="0" conaffinity="0"/>
      <body name="link2" pos="0.5 0 0">
        <joint name="hinge2" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03" mass="0.6" contype="0" conaffinity="0"/>
      </body>
    </body>
  </worldbody>
  <equality>
    <joint joint1="hinge2" joint2="hinge1" polycoef="0.1 -0.5 0.3 0.2 0"/>
  </equality>
</mujoco>
"""

# A capsule dropped tilted onto a plane: one end touches first, then both (mjc_PlaneCapsule).
CAPSULE_DROP = """<mujoco model="{name}">
  <option timestep="0.002" integrator="{integrator}"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="capsule" pos="0 0 0.3" euler="0 20 10">
      <freejoint/>
      <geom type="capsule" size="0.05 0.2" mass="1"/>
    </body>
  </worldbody>
</mujoco>
"""

# Three spheres dropped onto each other and the floor, off-centre (mjc_SphereSphere).
SPHERE_STACK = """<mujoco model="{name}">
  <option timestep="0.002" integrator="{integrator}"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="a" pos="0 0 0.1">
      <freejoint/>
      <geom type="sphere" size="0.1" mass="1"/>
    </body>
    <body name="b" pos="0.05 0.02 0.32">
      <freejoint/>
      <geom type="sphere" size="0.1" mass="0.5"/>
    </body>
    <body name="c" pos="-0.03 0.06 0.55">
      <freejoint/>
      <geom type="sphere" size="0.08" mass="0.3"/>
    </body>
  </worldbody>
</mujoco>
"""

# Two capsules dropped crossed onto a third lying on the floor, one of them parallel to it
# (mjc_CapsuleCapsule, both branches), and a sphere onto the lying one (mjc_SphereCapsule).
CAPSULE_PILE = """<mujoco model="{name}">
  <option timestep="0.002" integrator="{integrator}"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="base" pos="0 0 0.05" euler="0 90 0">
      <freejoint/>
      <geom type="capsule" size="0.05 0.3" mass="2"/>
    </body>
    <body name="crossed" pos="0.1 0 0.2" euler="90 0 20">
      <freejoint/>
      <geom type="capsule" size="0.04 0.2" mass="0.5"/>
    </body>
    <body name="parallel" pos="-0.05 0 0.35" euler="0 90 0">
      <freejoint/>
      <geom type="capsule" size="0.04 0.15" mass="0.5"/>
    </body>
    <body name="ball" pos="0.25 0.01 0.3">
      <freejoint/>
      <geom type="sphere" size="0.05" mass="0.2"/>
    </body>
  </worldbody>
</mujoco>
"""

# A tilted, spinning cylinder dropped on the floor (mjc_PlaneCylinder: the deepest rim point,
# the opposite cap's, the triangle) and a sphere dropped on a fixed standing cylinder's cap that
# rolls over its rim (mjc_SphereCylinder: cap, rim, side). The post is part of the world: a free
# post standing on the floor makes mjc_PlaneCylinder pick its rim point from the difference of
# two nearly equal unit vectors, which turns a last-bit difference of its tilt into a
# different contact point (ill-conditioned in MuJoCo itself).
CYLINDERS = """<mujoco model="{name}">
  <option timestep="0.002" integrator="{integrator}"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="disc" pos="0 0 0.2" euler="25 10 0">
      <freejoint/>
      <geom type="cylinder" size="0.1 0.03" mass="1"/>
    </body>
    <geom name="post" type="cylinder" pos="0.6 0 0.1" size="0.08 0.1"/>
    <body name="ball" pos="0.64 0.01 0.3">
      <freejoint/>
      <geom type="sphere" size="0.05" mass="0.2"/>
    </body>
  </worldbody>
</mujoco>
"""

# Spheres thrown at a box resting on the floor, one onto a face and one at an edge
# (mjc_SphereBox).
SPHERE_BOX = """<mujoco model="{name}">
  <option timestep="0.002" integrator="{integrator}"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="box" pos="0 0 0.1" euler="0 0 15">
      <freejoint/>
      <geom type="box" size="0.15 0.1 0.1" mass="2"/>
    </body>
    <body name="top" pos="0.02 0.03 0.4">
      <freejoint/>
      <geom type="sphere" size="0.06" mass="0.3"/>
    </body>
    <body name="side" pos="-0.4 0.08 0.21">
      <freejoint/>
      <geom type="sphere" size="0.05" mass="0.2"/>
    </body>
  </worldbody>
</mujoco>
"""

# Ellipsoids on planes (mjc_PlaneConvex with the ellipsoid's support point): one dropped
# tilted and spinning onto the floor, where it rocks and rolls on its changing lowest point, one
# thrown sideways so that it tumbles over its long axis.
ELLIPSOIDS = """<mujoco model="{name}">
  <option timestep="0.002" integrator="{integrator}"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="spinner" pos="0 0 0.2" euler="20 35 0">
      <freejoint/>
      <geom type="ellipsoid" size="0.15 0.08 0.05" mass="1"/>
    </body>
    <body name="tumbler" pos="0.8 0 0.15" euler="0 10 30">
      <freejoint/>
      <geom type="ellipsoid" size="0.1 0.06 0.12" mass="0.5"/>
    </body>
  </worldbody>
</mujoco>
"""

# An ellipsoid on an inclined plane (20 degrees about y, friction 0.3): the plane's normal is
# not the world's z, so the support direction is a rotated one; it slides and rolls down.
ELLIPSOID_INCLINE = """<mujoco model="{name}">
  <option timestep="0.002" integrator="{integrator}"/>
  <worldbody>
    <geom name="ramp" type="plane" size="5 5 0.1" euler="0 20 0" friction="0.3"/>
    <body name="egg" pos="0 0 0.12" euler="0 20 40">
      <freejoint/>
      <geom type="ellipsoid" size="0.12 0.07 0.09" mass="0.8" friction="0.3"/>
    </body>
  </worldbody>
</mujoco>
"""

# Capsules against a fixed block and the floor (mjc_CapsuleBox: an end over a face, the segment
# across an edge, a corner; mjc_PlaneCapsule once they fall off): one dropped nearly flat on
# the top face (one end lands first), one dropped along x hanging over the block's +x edge, one
# dropped tilted onto a corner, one rolled across the top face off its -y edge.
CAPSULE_BOX = """<mujoco model="{name}">
  <option timestep="0.002" integrator="{integrator}"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <geom name="block" type="box" pos="0 0 0.2" size="0.4 0.3 0.2" euler="0 0 10"/>
    <body name="flat" pos="-0.22 -0.05 0.5" euler="0 85 0">
      <freejoint/>
      <geom type="capsule" size="0.04 0.15" mass="0.5"/>
    </body>
    <body name="over" pos="0.38 0.15 0.6" euler="5 90 0">
      <freejoint/>
      <geom type="capsule" size="0.03 0.12" mass="0.3"/>
    </body>
    <body name="corner" pos="-0.42 -0.33 0.7" euler="30 20 10">
      <freejoint/>
      <geom type="capsule" size="0.035 0.1" mass="0.3"/>
    </body>
    <body name="roller" pos="0.1 0.05 0.451" euler="0 90 10">
      <freejoint/>
      <geom type="capsule" size="0.05 0.1" mass="0.4"/>
    </body>
  </worldbody>
</mujoco>
"""

# Torsional and rolling friction (condim 4 and 6; the floor condim 1 and low friction, so that each
# contact takes its body's: MuJoCo mixes by the maximum), under each friction cone: a ball and a box
# spinning about the vertical on the floor (condim 4: the torsional row slows them), a ball
# launched sliding and a capsule launched rolling sideways (condim 6: the rolling rows stop
# them).
CONDIM = """<mujoco model="{name}">
  <option timestep="0.002" integrator="{integrator}" cone="CONE"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1" condim="1" friction="0.5 0.001 0.0001"/>
    <body name="spinner" pos="0 0 0.1">
      <freejoint/>
      <geom type="sphere" size="0.1" mass="1" condim="4" friction="0.8 0.02 0.001"/>
    </body>
    <body name="roller" pos="0.5 0 0.08">
      <freejoint/>
      <geom type="sphere" size="0.08" mass="0.5" condim="6" friction="0.8 0.005 0.01"/>
    </body>
    <body name="box" pos="0 0.6 0.05">
      <freejoint/>
      <geom type="box" size="0.1 0.08 0.05" mass="1" condim="4" friction="0.6 0.03 0.001"/>
    </body>
    <body name="log" pos="0.5 0.6 0.05" euler="0 90 0">
      <freejoint/>
      <geom type="capsule" size="0.05 0.15" mass="0.6" condim="6" friction="0.8 0.005 0.02"/>
    </body>
  </worldbody>
</mujoco>
"""
CONDIM_QVEL = [0, 0, 0, 0, 0, 10.0, 1.0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8.0, 0, 0.8, 0, 0, 0, 0]

# A 45 g capsule pinched between two position-servoed pads on slide joints (the grasp creep of
# mujoco#3328; scenarios/tests/mjcf/pinched_capsule_ncp_fb_no_iterations.xml without its
# comments): mjc_CapsuleBox gives two contacts per pad, and the soft contact lets the capsule
# creep down at a steady rate.
PINCH = """<mujoco model="{name}">
  <option timestep="0.001" integrator="{integrator}"/>
  <default>
    <geom friction="0.7 0.005 0.0001"/>
  </default>
  <worldbody>
    <body name="left_pad" pos="-0.009 0 0">
      <joint name="left_slide" type="slide" axis="1 0 0"/>
      <geom name="left_pad_geom" type="box" size="0.005 0.03 0.04" mass="0.1"/>
    </body>
    <body name="right_pad" pos="0.009 0 0">
      <joint name="right_slide" type="slide" axis="1 0 0"/>
      <geom name="right_pad_geom" type="box" size="0.005 0.03 0.04" mass="0.1"/>
    </body>
    <body name="capsule" pos="0 0 0">
      <freejoint name="capsule_free"/>
      <geom name="capsule_geom" type="capsule" size="0.004 0.03" mass="0.045"/>
    </body>
  </worldbody>
  <actuator>
    <position name="left_servo" joint="left_slide" kp="1000" kv="20"/>
    <position name="right_servo" joint="right_slide" kp="1000" kv="20"/>
  </actuator>
</mujoco>
"""

CASES = [
    ("pinched_capsule_euler", PINCH, "Euler", [0.002, -0.002], None, 1.0),
    # MuJoCo's no-slip post-solver (noslip_iterations 10) stops the creep, under both cones.
    ("pinched_noslip_euler",
     PINCH.replace('integrator="{integrator}"/>', 'integrator="{integrator}" noslip_iterations="10"/>'),
     "Euler", [0.002, -0.002], None, 1.0),
    ("pinched_noslip_elliptic_euler",
     PINCH.replace('integrator="{integrator}"/>',
                   'integrator="{integrator}" cone="elliptic" noslip_iterations="10"/>'),
     "Euler", [0.002, -0.002], None, 1.0),
    # The creep under the elliptic cone at impratio 1 and 10 (the slip rate impratio controls).
    ("pinched_elliptic_euler",
     PINCH.replace('integrator="{integrator}"/>', 'integrator="{integrator}" cone="elliptic"/>'),
     "Euler", [0.002, -0.002], None, 1.0),
    ("pinched_elliptic_impratio10_euler",
     PINCH.replace('integrator="{integrator}"/>',
                   'integrator="{integrator}" cone="elliptic" impratio="10"/>'),
     "Euler", [0.002, -0.002], None, 1.0),
    ("condim_pyramidal_euler", CONDIM.replace("CONE", "pyramidal"), "Euler", [], CONDIM_QVEL, 1.0),
    ("condim_elliptic_euler", CONDIM.replace("CONE", "elliptic"), "Euler", [], CONDIM_QVEL, 1.0),
    # The same with one constraint problem for all bodies (no islands; scale from meaninertia).
    ("condim_noisland_euler",
     CONDIM.replace('cone="CONE"/>', 'cone="pyramidal"><flag island="disable"/></option>'),
     "Euler", [], CONDIM_QVEL, 1.0),
    ("capsule_box_euler", CAPSULE_BOX, "Euler", [],
     [0] * 18 + [0, -0.8, 0, 0, 0, 0], 1.0),
    ("ellipsoids_euler", ELLIPSOIDS, "Euler", [],
     [0, 0, 0, 0.5, 0, 6.0, 1.2, 0.3, 0, 4.0, 0, 0], 1.0),
    ("ellipsoid_incline_euler", ELLIPSOID_INCLINE, "Euler", [], None, 1.0),
    ("sphere_stack_euler", SPHERE_STACK, "Euler", [], None, 1.0),
    ("capsule_pile_euler", CAPSULE_PILE, "Euler", [], None, 1.0),
    ("cylinders_euler", CYLINDERS, "Euler", [], [0, 0, 0, 0, 0, 8.0, 0.6, 0, 0, 0, 0, 0], 1.0),
    ("sphere_box_euler", SPHERE_BOX, "Euler", [], [0] * 12 + [1.5, 0, 0, 0, 0, 0], 1.0),
    ("capsule_drop_euler", CAPSULE_DROP, "Euler", [], [0.3, 0, 0, 0, 1.0, 0], 1.0),
    ("joint_coupling_euler", COUPLED, "Euler", [], [1.0, -0.5], 1.0),
    ("weld_anchor_euler", WELD_ANCHOR, "Euler", [], [2.0, 0, 0.8, 0, 1.0, 3.0, -2.0], 1.0),
    ("weld_free_euler", WELD_FREE, "Euler", [], [2.0, 0, 0.8, 0, 1.0, 3.0, -2.0], 1.0),
    ("connect_free_euler", CONNECT_FREE, "Euler", [], [2.0, 0, 0.8, 0, 1.0, 3.0, -2.0], 1.0),
    ("connect_chain_euler", CONNECT, "Euler", [], [1.5, -2.0], 1.0),
    # name, template, integrator, controls, initial qvel (None: zero), seconds
    ("pendulum_implicitfast", PENDULUM, "implicitfast", [3.0, 0.4], None, 2.0),
    ("pendulum_implicit", PENDULUM, "implicit", [3.0, 0.4], None, 2.0),
    ("free_spin_implicitfast", FREE_SPIN, "implicitfast", [], [0, 0, 0, 3.0, 0.2, 0.1], 2.0),
    ("free_spin_implicit", FREE_SPIN, "implicit", [], [0, 0, 0, 3.0, 0.2, 0.1], 2.0),
    ("cart_implicitfast", CART, "implicitfast", [6.0, 3.0], None, 2.0),
    ("cart_implicit", CART, "implicit", [6.0, 3.0], None, 2.0),
]


def main():
    """Write every case, or only those named on the command line."""
    import sys
    os.makedirs(OUT, exist_ok=True)
    only = set(sys.argv[1:])
    for name, template, integrator, ctrl, qvel0, seconds in CASES:
        if only and name not in only:
            continue
        xml = template.format(name=name, integrator=integrator)
        with open(os.path.join(OUT, f"{name}.xml"), "w") as f:
            f.write(xml)
        m = mujoco.MjModel.from_xml_string(xml)
        d = mujoco.MjData(m)
        if qvel0 is not None:
            d.qvel[:] = qvel0
        d.ctrl[:] = ctrl
        steps = int(round(seconds / m.opt.timestep))
        header = (["t"] + [f"qpos{i}" for i in range(m.nq)] + [f"qvel{i}" for i in range(m.nv)]
                  + ["ncon", "nactive"])
        rows = []
        for k in range(steps + 1):
            mujoco.mj_forward(m, d)
            nactive = 0
            for i in range(d.ncon):
                f6 = np.zeros(6)
                mujoco.mj_contactForce(m, d, i, f6)
                nactive += int(f6[0] > 0)
            rows.append([d.time, *d.qpos, *d.qvel, d.ncon, nactive])
            if k < steps:
                mujoco.mj_step(m, d)
        with open(os.path.join(OUT, f"{name}.csv"), "w") as f:
            f.write(",".join(header) + "\n")
            for r in rows:
                f.write(",".join(repr(float(x)) for x in r) + "\n")
        meta = {"ctrl": ctrl, "qvel0": qvel0, "timestep": m.opt.timestep, "steps": steps,
                "mujoco": mujoco.mj_versionString()}
        with open(os.path.join(OUT, f"{name}.json"), "w") as f:
            json.dump(meta, f, indent=1)
        print(name, steps, "steps, final qpos", d.qpos[:3])


if __name__ == "__main__":
    main()
